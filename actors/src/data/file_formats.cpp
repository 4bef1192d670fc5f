// IDX, CSV and libsvm readers.
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "actorflow/data/readers.h"

namespace actorflow::data {

Result<std::string> read_file_maybe_gzip(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("cannot open '" + path + "': " + std::strerror(errno));
  std::string raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (raw.size() < 2 || static_cast<unsigned char>(raw[0]) != 0x1f || static_cast<unsigned char>(raw[1]) != 0x8b)
    return raw;
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return internal_error("zlib init failed for '" + path + "'");
  zs.next_in = reinterpret_cast<Bytef*>(raw.data());
  zs.avail_in = static_cast<uInt>(raw.size());
  std::string out;
  out.resize(raw.size() * 4 + 1024);
  int rc = Z_OK;
  while (true) {
    if (zs.total_out >= out.size()) out.resize(out.size() * 2);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + zs.total_out);
    zs.avail_out = static_cast<uInt>(out.size() - zs.total_out);
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) break;
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) break;  // input ended early
    if (rc != Z_OK && rc != Z_BUF_ERROR) break;
  }
  uint64_t consumed = zs.total_in, produced = zs.total_out;
  inflateEnd(&zs);
  if (rc != Z_STREAM_END)
    return data_loss("gzip file '" + path + "' is truncated or corrupt at compressed byte " + std::to_string(consumed) +
                     " (" + std::to_string(produced) + " bytes decompressed)");
  out.resize(produced);
  return out;
}

// Streamed through zlib's gz reader (gzip and plain files alike): the header, then the data
// straight into the tensor, so reading a file takes the tensor's memory and no more. Reading
// the whole file and inflating it into a buffer first had held 3-4x the tensor at once
// (Fashion-MNIST's training images: 26 MB read + a 104 MB inflate buffer + 47 MB tensor).
Result<Tensor> read_idx(const std::string& path) {
  errno = 0;
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return not_found("cannot open '" + path + "': " + std::strerror(errno ? errno : ENOENT));
  std::unique_ptr<gzFile_s, int (*)(gzFile)> closer(f, gzclose);
  (void)gzbuffer(f, 1u << 16);
  // Reads up to n bytes; fewer only at the end of the data. A corrupt or cut gzip stream
  // is an error naming the file.
  auto read = [&](void* dst, uint64_t n, uint64_t* got) -> Status {
    *got = 0;
    while (*got < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<uint64_t>(n - *got, 1u << 30));
      const int r = gzread(f, static_cast<char*>(dst) + *got, chunk);
      if (r <= 0) break;
      *got += static_cast<uint64_t>(r);
    }
    int err = Z_OK;
    const char* msg = gzerror(f, &err);
    if (err != Z_OK)
      return data_loss("gzip file '" + path + "' is truncated or corrupt (" + (msg ? msg : "zlib error") + ") after " +
                       std::to_string(*got) + " bytes of its data were decompressed");
    return Status::OK();
  };
  unsigned char head[4 + 4 * 255];
  uint64_t got = 0;
  AF_RETURN_IF_ERROR(read(head, 4, &got));
  if (got < 4 || head[0] != 0 || head[1] != 0) return data_loss("'" + path + "' is not an IDX file (bad magic at byte 0)");
  int type = head[2], rank = head[3];
  DType dt;
  size_t esize;
  switch (type) {
    case 0x08: dt = DType::u8; esize = 1; break;
    case 0x0C: dt = DType::i32; esize = 4; break;
    case 0x0D: dt = DType::f32; esize = 4; break;
    case 0x0E: dt = DType::f64; esize = 8; break;
    default: return data_loss("'" + path + "': unsupported IDX element type 0x" + std::to_string(type) + " at byte 2");
  }
  const size_t header = 4 + 4 * static_cast<size_t>(rank);
  AF_RETURN_IF_ERROR(read(head + 4, header - 4, &got));
  if (got < header - 4) return data_loss("'" + path + "' is truncated inside its header");
  std::vector<int64_t> dims;
  uint64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    const unsigned char* o = head + 4 + 4 * d;
    uint32_t v = (uint32_t{o[0]} << 24) | (uint32_t{o[1]} << 16) | (uint32_t{o[2]} << 8) | o[3];
    dims.push_back(v);
    count *= v;
    if (count > (uint64_t{1} << 40)) return data_loss("'" + path + "': dimensions too large");
  }
  Tensor t(dt, Shape(dims));
  const uint64_t want = count * esize;
  AF_RETURN_IF_ERROR(read(t.raw_data(), want, &got));
  char extra = 0;
  uint64_t more = 0;
  if (got == want) AF_RETURN_IF_ERROR(read(&extra, 1, &more));
  if (got != want || more != 0)
    return data_loss("'" + path + "' has " + (more ? "more than " + std::to_string(want) : std::to_string(got)) +
                     " data bytes after its header, expected " + std::to_string(want) + " (truncated or padded at byte " +
                     std::to_string(header + got + more) + ")");
  if (esize > 1) {
    // IDX is big-endian.
    auto* p = static_cast<unsigned char*>(t.raw_data());
    for (uint64_t i = 0; i < count; ++i) std::reverse(p + i * esize, p + (i + 1) * esize);
  }
  return t;
}

namespace {

std::vector<std::string> split_line(const std::string& line, char delim) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted;
    else if (c == delim && !quoted) {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r') cur += c;
  }
  out.push_back(cur);
  return out;
}

bool parse_float(const std::string& s, float* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  while (end && (*end == ' ' || *end == '\t')) ++end;
  if (end == s.c_str() || *end != '\0' || errno == ERANGE) return false;
  *out = static_cast<float>(v);
  return true;
}

// An integer literal (labels that are class ids stay int64).
bool parse_int(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  while (end && (*end == ' ' || *end == '\t')) ++end;
  if (end == s.c_str() || *end != '\0' || errno == ERANGE) return false;
  *out = v;
  return true;
}

bool all_numbers(const std::vector<std::string>& cells) {
  float v;
  for (auto& c : cells)
    if (!parse_float(c, &v)) return false;
  return !cells.empty();
}

// sklearn's "n_samples,n_features,class names..." line, checked against the line after it
// (n_features + 1 fields: the features and the target).
struct SklearnSummary {
  int64_t samples = 0, features = 0;
  std::vector<std::string> class_names;
};

std::optional<SklearnSummary> sklearn_summary(const std::vector<std::string>& first, const std::vector<std::string>& next) {
  SklearnSummary s;
  if (first.size() < 2 || !parse_int(first[0], &s.samples) || !parse_int(first[1], &s.features) || s.samples < 0 ||
      s.features < 1 || next.size() != static_cast<size_t>(s.features) + 1)
    return std::nullopt;
  float v;
  for (size_t i = 2; i < first.size(); ++i) {
    if (parse_float(first[i], &v)) return std::nullopt;
    if (!first[i].empty()) s.class_names.push_back(first[i]);
  }
  return s;
}

std::string shorten(const std::string& line) { return line.size() > 60 ? line.substr(0, 57) + "..." : line; }

}  // namespace

Result<CsvData> read_csv(const std::string& path, const CsvOptions& o) {
  AF_ASSIGN_OR_RETURN(std::string text, read_file_maybe_gzip(path));
  std::vector<std::string> lines;
  {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) lines.push_back(std::move(line));
  }
  auto blank = [&](size_t i) { return lines[i].empty() || lines[i] == "\r"; };
  auto where = [&](size_t i) { return "CSV '" + path + "' line " + std::to_string(i + 1); };

  std::optional<SklearnSummary> summary;
  if (o.sklearn_summary && lines.size() >= 2)
    summary = sklearn_summary(split_line(lines[0], o.delimiter), split_line(lines[1], o.delimiter));
  size_t next = std::min(lines.size(), static_cast<size_t>(std::max(0, o.skip_lines)));
  if (summary && next == 0) next = 1;

  std::vector<std::string> names;
  size_t ncols = 0;
  bool take_header = o.header;
  // sklearn's files carry a header only when one follows the summary (boston's).
  if (summary && next == 1) take_header = next < lines.size() && !all_numbers(split_line(lines[next], o.delimiter));
  if (take_header) {
    while (next < lines.size() && blank(next)) ++next;
    if (next >= lines.size()) return data_loss("CSV file '" + path + "' has no header line (it is empty after " +
                                               std::to_string(next) + " lines)");
    names = split_line(lines[next], o.delimiter);
    if (all_numbers(names))
      return invalid_argument(where(next) + ": the header row is made only of numbers ('" + shorten(lines[next]) +
                              "'), so it is probably the first row of data; read it with header=false" +
                              (o.skip_lines > 0 ? " (skip_lines already drops " + std::to_string(o.skip_lines) + ")" : ""));
    for (auto& n : names) {
      // Quoted names ("CRIM") lose their quotes in split_line; trailing spaces go too.
      while (!n.empty() && (n.back() == ' ' || n.back() == '\t')) n.pop_back();
    }
    ncols = names.size();
    ++next;
  }
  int label = summary ? -2 : kNoLabel;  // -2: the last column, once the width is known
  if (o.label_index) label = *o.label_index < 0 ? kNoLabel : *o.label_index;
  if (!o.label_name.empty()) {
    if (names.empty()) return invalid_argument("CSV '" + path + "': a label column by name needs a header");
    label = kNoLabel;
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == o.label_name) label = static_cast<int>(i);
    if (label < 0) return not_found("CSV '" + path + "' has no column named '" + o.label_name + "'");
  }
  auto is_cat = [&](size_t col) {
    for (auto& c : o.categorical)
      if ((col < names.size() && c == names[col]) || c == std::to_string(col)) return true;
    return false;
  };
  CsvData d;
  std::vector<bool> categorical;
  std::vector<std::map<std::string, int>> vocab;
  std::vector<float> feats, float_labels;
  std::vector<int64_t> int_labels;
  bool labels_are_ints = true;
  int64_t rows = 0;
  for (size_t i = next; i < lines.size(); ++i) {
    if (blank(i)) continue;
    auto cells = split_line(lines[i], o.delimiter);
    if (ncols == 0) {
      ncols = cells.size();
      for (size_t c = 0; c < ncols; ++c) names.push_back("col" + std::to_string(c));
    }
    if (categorical.empty()) {
      if (label == -2) label = static_cast<int>(ncols) - 1;
      for (size_t c = 0; c < ncols; ++c) categorical.push_back(is_cat(c));
      vocab.resize(ncols);
      if (label >= static_cast<int>(ncols))
        return invalid_argument("CSV '" + path + "': label column " + std::to_string(label) + " out of range (" +
                                std::to_string(ncols) + " columns)");
    }
    std::string bad;
    if (cells.size() != ncols) bad = "has " + std::to_string(cells.size()) + " fields, expected " + std::to_string(ncols);
    std::vector<float> row;
    float lab = 0;
    int64_t int_lab = 0;
    bool int_ok = true;
    for (size_t c = 0; c < cells.size() && bad.empty(); ++c) {
      float v;
      bool is_label = static_cast<int>(c) == label;
      if (categorical[c]) {
        auto [it, fresh] = vocab[c].emplace(cells[c], static_cast<int>(vocab[c].size()));
        v = static_cast<float>(it->second);
        if (is_label) int_lab = it->second;
      } else if (!parse_float(cells[c], &v)) {
        bad = "field " + std::to_string(c + 1) + " ('" + names[c] + "') is not a number: '" + cells[c] + "'";
        break;
      } else if (is_label) {
        int_ok = parse_int(cells[c], &int_lab);
      }
      if (is_label) lab = v;
      else row.push_back(v);
    }
    if (!bad.empty()) {
      if (o.skip_bad_lines) {
        d.skipped_lines.push_back(static_cast<int64_t>(i + 1));
        continue;
      }
      return invalid_argument(where(i) + " " + bad);
    }
    feats.insert(feats.end(), row.begin(), row.end());
    float_labels.push_back(lab);
    int_labels.push_back(int_lab);
    labels_are_ints = labels_are_ints && int_ok;
    ++rows;
  }
  if (summary && rows + static_cast<int64_t>(d.skipped_lines.size()) != summary->samples)
    return data_loss(where(0) + ": sklearn's summary line promises " + std::to_string(summary->samples) + " rows, the file has " +
                     std::to_string(rows + static_cast<int64_t>(d.skipped_lines.size())) +
                     (o.skip_lines > 1 ? " (skip_lines=" + std::to_string(o.skip_lines) + " dropped rows of data)" : ""));
  if (label == -2) label = kNoLabel;  // no rows: no width to place the label in
  int64_t nf = static_cast<int64_t>(ncols) - (label >= 0 ? 1 : 0);
  for (size_t c = 0; c < ncols; ++c)
    if (static_cast<int>(c) != label) d.columns.push_back(names[c]);
  d.features = Tensor::from_vector(feats, Shape{rows, nf});
  if (label >= 0)
    d.labels = labels_are_ints ? Tensor::from_vector(int_labels, Shape{rows}) : Tensor::from_vector(float_labels, Shape{rows});
  for (size_t c = 0; c < vocab.size(); ++c) {
    if (!categorical[c]) continue;
    std::vector<std::string> words(vocab[c].size());
    for (auto& [w, id] : vocab[c]) words[static_cast<size_t>(id)] = w;
    d.vocabularies[names[c]] = std::move(words);
  }
  if (summary) d.class_names = summary->class_names;
  return d;
}

Result<LibsvmData> read_libsvm(const std::string& path) {
  AF_ASSIGN_OR_RETURN(std::string text, read_file_maybe_gzip(path));
  std::istringstream in(text);
  std::string line;
  int64_t line_no = 0;
  std::vector<float> labels, values;
  std::vector<int64_t> splits{0}, indices;
  int64_t max_feature = 0;
  while (std::getline(in, line)) {
    ++line_no;
    auto hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream ls(line);
    std::string tok;
    if (!(ls >> tok)) continue;
    float lab;
    if (!parse_float(tok, &lab))
      return invalid_argument("libsvm '" + path + "' line " + std::to_string(line_no) + ": label '" + tok + "' is not a number");
    while (ls >> tok) {
      auto colon = tok.find(':');
      float v;
      char* end = nullptr;
      long long idx = colon == std::string::npos ? 0 : std::strtoll(tok.c_str(), &end, 10);
      if (colon == std::string::npos || end != tok.c_str() + colon || idx < 1 || !parse_float(tok.substr(colon + 1), &v))
        return invalid_argument("libsvm '" + path + "' line " + std::to_string(line_no) + ": bad entry '" + tok +
                                "' (want index:value with index >= 1)");
      indices.push_back(idx - 1);
      values.push_back(v);
      max_feature = std::max<int64_t>(max_feature, idx);
    }
    labels.push_back(lab);
    splits.push_back(static_cast<int64_t>(indices.size()));
  }
  LibsvmData d;
  d.labels = Tensor::from_vector(labels);
  d.row_splits = Tensor::from_vector(splits);
  d.indices = Tensor::from_vector(indices);
  d.values = Tensor::from_vector(values);
  d.num_features = max_feature;
  return d;
}

Tensor LibsvmData::dense(int64_t nf) const {
  if (nf < 0) nf = num_features;
  int64_t rows = labels.num_elements();
  Tensor t = Tensor::zeros(DType::f32, Shape{rows, nf});
  const int64_t* sp = row_splits.data<int64_t>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = sp[r]; k < sp[r + 1]; ++k) {
      int64_t f = indices.data<int64_t>()[k];
      if (f < nf) t.data<float>()[r * nf + f] = values.data<float>()[k];
    }
  return t;
}

}  // namespace actorflow::data
