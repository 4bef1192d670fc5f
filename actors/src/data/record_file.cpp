// Record files with TFRecord's framing, and the tf.train.Example codec, both on the
// engine's shared framing (actorflow/tfrecord.h) and protobuf writer (protobuf_wire.h).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "actorflow/data/readers.h"
#include "actorflow/protobuf_wire.h"
#include "actorflow/tfrecord.h"

namespace actorflow::data {

Result<std::unique_ptr<RecordWriter>> RecordWriter::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status(Code::unavailable, "cannot create record file '" + path + "': " + std::strerror(errno));
  return std::unique_ptr<RecordWriter>(new RecordWriter(path, fd));
}

RecordWriter::~RecordWriter() { (void)close(); }

Status RecordWriter::write(const std::string& record) {
  if (fd_ < 0) return failed_precondition("record file '" + path_ + "' is closed");
  std::string frame = tfrecord::frame_record(record);
  const char* p = frame.data();
  size_t left = frame.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return data_loss("writing record file '" + path_ + "': " + std::strerror(errno));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return Status::OK();
}

Status RecordWriter::close() {
  if (fd_ < 0) return Status::OK();
  int rc = ::fsync(fd_);
  int rc2 = ::close(fd_);
  fd_ = -1;
  if (rc != 0 || rc2 != 0) return data_loss("closing record file '" + path_ + "': " + std::strerror(errno));
  return Status::OK();
}

Result<std::unique_ptr<RecordReader>> RecordReader::open(const std::string& path, RecordReaderOptions options) {
  AF_ASSIGN_OR_RETURN(std::string bytes, read_file_maybe_gzip(path));
  return std::unique_ptr<RecordReader>(new RecordReader(path, std::move(bytes), options));
}

Result<bool> RecordReader::next(std::string* out) {
  while (pos_ < bytes_.size()) {
    uint64_t at = pos_;
    tfrecord::RecordAt r = tfrecord::record_at(bytes_, at);
    if (r.problem == tfrecord::RecordAt::Problem::none) {
      out->assign(r.data);
      pos_ = r.end;
      ++index_;
      return true;
    }
    if (!options_.skip_corrupted)
      return data_loss(tfrecord::record_error("record file '" + path_ + "'", static_cast<size_t>(index_), at, r));
    // Resynchronize: the next offset whose header checksum holds.
    ++skipped_;
    ++index_;
    uint64_t p = at + 1;
    while (p < bytes_.size() && !tfrecord::header_intact(bytes_, p)) ++p;
    pos_ = p;
  }
  return false;
}

// ---- tf.train.Example ----
// Example{features=1: Features{feature=1: map<string, Feature>}}; map entry {key=1, value=2};
// Feature{bytes_list=1 {value=1 repeated bytes}, float_list=2 {value=1 packed float},
// int64_list=3 {value=1 packed int64}}. Readers accept packed and unpacked lists.

namespace {

bool decode_list(int kind, std::string_view list, Feature* f) {
  std::vector<pb::Field> fields;
  if (!pb::parse_fields(list, &fields)) return false;
  for (const pb::Field& v : fields) {
    if (v.number != 1) continue;
    if (kind == 1 && v.wire == pb::kLengthDelimited) {
      f->bytes.emplace_back(v.bytes);
    } else if (kind == 2 && v.wire == pb::kLengthDelimited) {
      if (!pb::parse_packed_floats(v.bytes, &f->floats)) return false;
    } else if (kind == 2 && v.wire == pb::kFixed32) {
      f->floats.push_back(v.as_float());
    } else if (kind == 3 && v.wire == pb::kLengthDelimited) {
      std::vector<uint64_t> ints;
      if (!pb::parse_packed_varints(v.bytes, &ints)) return false;
      for (uint64_t i : ints) f->ints.push_back(static_cast<int64_t>(i));
    } else if (kind == 3 && v.wire == pb::kVarint) {
      f->ints.push_back(static_cast<int64_t>(v.value));
    } else {
      return false;
    }
  }
  return true;
}

bool decode_feature(std::string_view in, Feature* f) {
  std::vector<pb::Field> fields;
  if (!pb::parse_fields(in, &fields)) return false;
  for (const pb::Field& list : fields) {
    if (list.wire != pb::kLengthDelimited || list.number < 1 || list.number > 3) continue;
    f->kind = list.number == 1 ? Feature::Kind::bytes : list.number == 2 ? Feature::Kind::floats : Feature::Kind::ints;
    if (!decode_list(list.number, list.bytes, f)) return false;
  }
  return true;
}

}  // namespace

std::string encode_example(const Example& e) {
  pb::Writer features;
  for (auto& [key, f] : e) {
    pb::Writer list, feature;
    if (f.kind == Feature::Kind::bytes) {
      for (auto& b : f.bytes) list.bytes_field(1, b);
      feature.bytes_field(1, list.bytes());
    } else if (f.kind == Feature::Kind::floats) {
      list.packed_floats(1, f.floats);
      feature.bytes_field(2, list.bytes());
    } else {
      list.packed_ints(1, f.ints);
      feature.bytes_field(3, list.bytes());
    }
    pb::Writer entry;
    entry.bytes_field(1, key);
    entry.bytes_field(2, feature.bytes());
    features.bytes_field(1, entry.bytes());
  }
  pb::Writer out;
  out.bytes_field(1, features.bytes());
  return out.take();
}

Result<Example> decode_example(const std::string& bytes) {
  auto bad = [] { return data_loss("malformed tf.train.Example"); };
  Example ex;
  std::vector<pb::Field> top;
  if (!pb::parse_fields(bytes, &top)) return bad();
  for (const pb::Field& features : top) {
    if (features.number != 1 || features.wire != pb::kLengthDelimited) continue;
    std::vector<pb::Field> entries;
    if (!pb::parse_fields(features.bytes, &entries)) return bad();
    for (const pb::Field& entry : entries) {
      if (entry.number != 1 || entry.wire != pb::kLengthDelimited) continue;
      std::vector<pb::Field> kv;
      if (!pb::parse_fields(entry.bytes, &kv)) return bad();
      std::string key;
      Feature f;
      for (const pb::Field& part : kv) {
        if (part.wire != pb::kLengthDelimited) continue;
        if (part.number == 1) key = std::string(part.bytes);
        else if (part.number == 2 && !decode_feature(part.bytes, &f)) return bad();
      }
      ex[key] = std::move(f);
    }
  }
  return ex;
}

namespace {
Status write_rows(const std::string& out, const Tensor& features, const Tensor& labels) {
  AF_ASSIGN_OR_RETURN(auto w, RecordWriter::open(out));
  int64_t rows = features.dim(0), nf = features.dim(1);
  for (int64_t r = 0; r < rows; ++r) {
    Example e;
    e["label"].floats = {labels.valid() ? static_cast<float>(labels.element_as_double(r)) : 0.0f};
    e["features"].floats.assign(features.data<float>() + r * nf, features.data<float>() + (r + 1) * nf);
    AF_RETURN_IF_ERROR(w->write(encode_example(e)));
  }
  return w->close();
}
}  // namespace

Status convert_csv_to_records(const std::string& csv, const std::string& records, const CsvOptions& options) {
  AF_ASSIGN_OR_RETURN(CsvData d, read_csv(csv, options));
  return write_rows(records, d.features, d.labels);
}

Status convert_libsvm_to_records(const std::string& libsvm, const std::string& records) {
  AF_ASSIGN_OR_RETURN(LibsvmData d, read_libsvm(libsvm));
  return write_rows(records, d.dense(), d.labels);
}

}  // namespace actorflow::data
