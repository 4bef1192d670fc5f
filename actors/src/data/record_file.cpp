// Record files with TFRecord's framing, and the tf.train.Example codec.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "actorflow/crc32c.h"
#include "actorflow/data/readers.h"

namespace actorflow::data {

namespace {
void put_u64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
}
void put_u32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
}
uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}
}  // namespace

Result<std::unique_ptr<RecordWriter>> RecordWriter::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status(Code::unavailable, "cannot create record file '" + path + "': " + std::strerror(errno));
  return std::unique_ptr<RecordWriter>(new RecordWriter(path, fd));
}

RecordWriter::~RecordWriter() { (void)close(); }

Status RecordWriter::write(const std::string& record) {
  if (fd_ < 0) return failed_precondition("record file '" + path_ + "' is closed");
  std::string frame;
  frame.reserve(record.size() + 16);
  put_u64(frame, record.size());
  put_u32(frame, crc32c_mask(crc32c(frame.data(), 8)));
  frame += record;
  put_u32(frame, crc32c_mask(crc32c(record)));
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
    auto corrupt = [&](const std::string& what) -> Status {
      return data_loss("record file '" + path_ + "': " + what + " in the record at byte offset " + std::to_string(at));
    };
    std::string problem;
    if (bytes_.size() - at < 12) {
      problem = "truncated header";
    } else {
      uint64_t len = get_u64(bytes_.data() + at);
      uint32_t len_crc = get_u32(bytes_.data() + at + 8);
      if (crc32c_mask(crc32c(bytes_.data() + at, 8)) != len_crc) {
        problem = "length checksum mismatch";
      } else if (len > bytes_.size() - at - 12 || bytes_.size() - at - 12 - len < 4) {
        problem = "truncated data (length " + std::to_string(len) + ")";
      } else {
        const char* data = bytes_.data() + at + 12;
        uint32_t data_crc = get_u32(data + len);
        if (crc32c_mask(crc32c(data, len)) != data_crc) {
          problem = "data checksum mismatch";
        } else {
          out->assign(data, len);
          pos_ = at + 12 + len + 4;
          return true;
        }
      }
    }
    if (!options_.skip_corrupted) return corrupt(problem);
    // Resynchronize: the next offset whose header checksum holds.
    ++skipped_;
    uint64_t p = at + 1;
    while (p + 12 <= bytes_.size() && crc32c_mask(crc32c(bytes_.data() + p, 8)) != get_u32(bytes_.data() + p + 8)) ++p;
    pos_ = p + 12 <= bytes_.size() ? p : bytes_.size();
  }
  return false;
}

// ---- tf.train.Example protobuf, by hand ----
// Example{features=1: Features{feature=1: map<string, Feature>}}; map entry {key=1, value=2};
// Feature{bytes_list=1 {value=1 repeated bytes}, float_list=2 {value=1 packed float},
// int64_list=3 {value=1 packed int64}}.

namespace {

void put_varint(std::string& s, uint64_t v) {
  while (v >= 0x80) {
    s += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  s += static_cast<char>(v);
}
void put_field(std::string& s, int field, const std::string& bytes) {
  put_varint(s, (static_cast<uint64_t>(field) << 3) | 2);
  put_varint(s, bytes.size());
  s += bytes;
}

struct Cursor {
  const char* p;
  const char* end;
  bool varint(uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64 && p < end; shift += 7) {
      uint8_t b = static_cast<uint8_t>(*p++);
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  bool bytes(std::string_view* out) {
    uint64_t n;
    if (!varint(&n) || n > static_cast<uint64_t>(end - p)) return false;
    *out = std::string_view(p, n);
    p += n;
    return true;
  }
  bool skip(int wire) {
    uint64_t v;
    std::string_view sv;
    switch (wire) {
      case 0: return varint(&v);
      case 1: if (end - p < 8) return false; p += 8; return true;
      case 2: return bytes(&sv);
      case 5: if (end - p < 4) return false; p += 4; return true;
      default: return false;
    }
  }
};

bool decode_feature(std::string_view in, Feature* f) {
  Cursor c{in.data(), in.data() + in.size()};
  while (c.p < c.end) {
    uint64_t tag;
    if (!c.varint(&tag)) return false;
    int field = static_cast<int>(tag >> 3), wire = static_cast<int>(tag & 7);
    if (wire != 2) {
      if (!c.skip(wire)) return false;
      continue;
    }
    std::string_view list;
    if (!c.bytes(&list)) return false;
    Cursor l{list.data(), list.data() + list.size()};
    while (l.p < l.end) {
      uint64_t t;
      if (!l.varint(&t)) return false;
      int lw = static_cast<int>(t & 7);
      if ((t >> 3) != 1) {
        if (!l.skip(lw)) return false;
        continue;
      }
      if (field == 1 && lw == 2) {
        f->kind = Feature::Kind::bytes;
        std::string_view b;
        if (!l.bytes(&b)) return false;
        f->bytes.emplace_back(b);
      } else if (field == 2) {
        f->kind = Feature::Kind::floats;
        auto one = [&](Cursor& cc) {
          if (cc.end - cc.p < 4) return false;
          float v;
          std::memcpy(&v, cc.p, 4);
          cc.p += 4;
          f->floats.push_back(v);
          return true;
        };
        if (lw == 2) {
          std::string_view packed;
          if (!l.bytes(&packed)) return false;
          Cursor pc{packed.data(), packed.data() + packed.size()};
          while (pc.p < pc.end)
            if (!one(pc)) return false;
        } else if (lw == 5) {
          if (!one(l)) return false;
        } else return false;
      } else if (field == 3) {
        f->kind = Feature::Kind::ints;
        if (lw == 2) {
          std::string_view packed;
          if (!l.bytes(&packed)) return false;
          Cursor pc{packed.data(), packed.data() + packed.size()};
          while (pc.p < pc.end) {
            uint64_t v;
            if (!pc.varint(&v)) return false;
            f->ints.push_back(static_cast<int64_t>(v));
          }
        } else if (lw == 0) {
          uint64_t v;
          if (!l.varint(&v)) return false;
          f->ints.push_back(static_cast<int64_t>(v));
        } else return false;
      } else if (!l.skip(lw)) return false;
    }
  }
  return true;
}

}  // namespace

std::string encode_example(const Example& e) {
  std::string features;
  for (auto& [key, f] : e) {
    std::string list;
    std::string feature;
    if (f.kind == Feature::Kind::bytes) {
      for (auto& b : f.bytes) put_field(list, 1, b);
      put_field(feature, 1, list);
    } else if (f.kind == Feature::Kind::floats) {
      std::string packed(f.floats.size() * 4, '\0');
      if (!f.floats.empty()) std::memcpy(packed.data(), f.floats.data(), packed.size());
      put_field(list, 1, packed);
      put_field(feature, 2, list);
    } else {
      std::string packed;
      for (int64_t v : f.ints) put_varint(packed, static_cast<uint64_t>(v));
      put_field(list, 1, packed);
      put_field(feature, 3, list);
    }
    std::string entry;
    put_field(entry, 1, key);
    put_field(entry, 2, feature);
    put_field(features, 1, entry);
  }
  std::string out;
  put_field(out, 1, features);
  return out;
}

Result<Example> decode_example(const std::string& bytes) {
  Example ex;
  Cursor c{bytes.data(), bytes.data() + bytes.size()};
  auto bad = [] { return data_loss("malformed tf.train.Example"); };
  while (c.p < c.end) {
    uint64_t tag;
    if (!c.varint(&tag)) return bad();
    if (tag != ((1 << 3) | 2)) {
      if (!c.skip(static_cast<int>(tag & 7))) return bad();
      continue;
    }
    std::string_view features;
    if (!c.bytes(&features)) return bad();
    Cursor fc{features.data(), features.data() + features.size()};
    while (fc.p < fc.end) {
      uint64_t t;
      if (!fc.varint(&t)) return bad();
      if (t != ((1 << 3) | 2)) {
        if (!fc.skip(static_cast<int>(t & 7))) return bad();
        continue;
      }
      std::string_view entry;
      if (!fc.bytes(&entry)) return bad();
      Cursor ec{entry.data(), entry.data() + entry.size()};
      std::string key;
      Feature f;
      while (ec.p < ec.end) {
        uint64_t et;
        if (!ec.varint(&et)) return bad();
        std::string_view v;
        if ((et & 7) != 2) {
          if (!ec.skip(static_cast<int>(et & 7))) return bad();
          continue;
        }
        if (!ec.bytes(&v)) return bad();
        if ((et >> 3) == 1) key = std::string(v);
        else if ((et >> 3) == 2 && !decode_feature(v, &f)) return bad();
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
    e["label"].floats = {labels.valid() ? labels.data<float>()[r] : 0.0f};
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
