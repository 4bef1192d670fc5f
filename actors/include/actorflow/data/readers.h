// File formats for input data: IDX (MNIST-style, raw or gzip), CSV, libsvm, and record
// files with TFRecord's framing (so TensorFlow's TFRecordWriter files read too), plus a
// tf.train.Example codec for record payloads. Every error names the file and the record
// (line number or byte offset).
#pragma once
#include "actorflow/api.h"
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actorflow/tensor.h"

AF_PUBLIC_BEGIN

namespace actorflow::data {

// The whole file, gunzipped if it starts with the gzip magic.
Result<std::string> read_file_maybe_gzip(const std::string& path);

// An IDX file as a tensor: u8 for type 0x08, i32/f32/f64 for 0x0C/0x0D/0x0E; shape from
// the header (e.g. [60000, 28, 28]).
Result<Tensor> read_idx(const std::string& path);

// Column-label value for "no label column".
inline constexpr int kNoLabel = -1;

// How a CSV file is read:
//  1. `skip_lines` lines are dropped.
//  2. If `header`, the next line names the columns. A header made only of numbers is an
//     error naming its line: it is almost always the first row of data.
//  3. Every later non-empty line is a row; every field is a number unless its column is
//     categorical.
// sklearn's bundled CSVs (iris.csv, wine_data.csv, breast_cancer.csv,
// boston_house_prices.csv) start with a summary line "n_samples,n_features,class
// names...", then optionally a header (boston's), then rows with the target last. When
// line 1 has that form (and the next line has n_features + 1 fields) it is recognised
// whether or not `skip_lines` covers it: it is neither data nor header, a header is taken
// only if the next line is not made of numbers, the label defaults to the last column,
// the class names land in `CsvData::class_names`, and the row count must be n_samples.
struct CsvOptions {
  int skip_lines = 0;
  bool header = true;
  char delimiter = ',';
  // The label column, by name (needs a header) or index (kNoLabel: none). Unset: the last
  // column for sklearn's files, none otherwise.
  std::string label_name;
  std::optional<int> label_index;
  // Columns read as categories (by name or index): mapped to integer ids in order of
  // first appearance, returned in `vocabularies`.
  std::vector<std::string> categorical;
  // Skip lines this reader cannot parse instead of failing (their numbers are reported).
  bool skip_bad_lines = false;
  // Recognise sklearn's summary line (see above).
  bool sklearn_summary = true;
};

struct CsvData {
  std::vector<std::string> columns;        // feature column names, in order
  Tensor features;                         // f32 [rows, features]
  // [rows]: i64 when every label is an integer (class ids) or the label column is
  // categorical, f32 otherwise (regression targets); invalid if no label column.
  Tensor labels;
  std::map<std::string, std::vector<std::string>> vocabularies;
  std::vector<std::string> class_names;    // from an sklearn summary line
  std::vector<int64_t> skipped_lines;
};

Result<CsvData> read_csv(const std::string& path, const CsvOptions& options = {});

struct LibsvmData {
  Tensor labels;                           // f32 [rows]
  Tensor row_splits;                       // i64 [rows + 1]: row r has entries [splits[r], splits[r+1])
  Tensor indices;                          // i64 [nnz], zero-based feature ids
  Tensor values;                           // f32 [nnz]
  int64_t num_features = 0;                // 1 + the largest feature id seen
  Tensor dense(int64_t num_features = -1) const;  // f32 [rows, num_features]
};

// "label idx:value idx:value ..." with 1-based feature ids (as libsvm), '#' comments.
Result<LibsvmData> read_libsvm(const std::string& path);

// ---- records (TFRecord framing, actorflow/tfrecord.h: u64 length, masked crc32c(length), data, masked crc32c(data)) ----

class RecordWriter {
 public:
  static Result<std::unique_ptr<RecordWriter>> open(const std::string& path);
  ~RecordWriter();
  Status write(const std::string& record);
  // Flushes and fsyncs; later writes fail.
  Status close();

 private:
  RecordWriter(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
};

struct RecordReaderOptions {
  // On a corrupt record: false = stop with an error naming file and offset; true = skip
  // to the next intact record (found by scanning for a valid header) and count it.
  bool skip_corrupted = false;
};

class RecordReader {
 public:
  static Result<std::unique_ptr<RecordReader>> open(const std::string& path, RecordReaderOptions options = {});
  // Next record into *out: true; end of file: false; corruption: an error.
  Result<bool> next(std::string* out);
  uint64_t offset() const { return pos_; }
  int64_t skipped() const { return skipped_; }

 private:
  RecordReader(std::string path, std::string bytes, RecordReaderOptions o)
      : path_(std::move(path)), bytes_(std::move(bytes)), options_(o) {}
  std::string path_;
  std::string bytes_;
  RecordReaderOptions options_;
  uint64_t pos_ = 0;
  int64_t index_ = 0;  // records passed so far, corrupt ones included (for messages)
  int64_t skipped_ = 0;
};

// ---- tf.train.Example (a map from name to a float, int64 or bytes list) ----

struct Feature {
  enum class Kind { floats, ints, bytes } kind = Kind::floats;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> bytes;
};
using Example = std::map<std::string, Feature>;

std::string encode_example(const Example& e);
Result<Example> decode_example(const std::string& bytes);

// The seeds' generate_csv_tfrecords: one Example per row, "label" (float) and
// "features" (float list, dense) — from CSV or libsvm — into a record file.
Status convert_csv_to_records(const std::string& csv, const std::string& records, const CsvOptions& options);
Status convert_libsvm_to_records(const std::string& libsvm, const std::string& records);

}  // namespace actorflow::data

AF_PUBLIC_END
