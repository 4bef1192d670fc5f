// safetensors: an 8-byte little-endian header length N, N bytes of JSON (padded with
// spaces), then the raw little-endian tensor data, each tensor's data_offsets relative to
// the end of the header. Readers (the Rust crate behind Python's safetensors) require the
// offsets to tile the data section exactly, so there is no padding between tensors; we
// order tensors by element size, largest first, to keep each one aligned.
#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "actorflow/crc32c.h"

namespace actorflow::st {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the limit Python's safetensors enforces

std::string hex32(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

bool parse_hex32(const std::string& s, uint32_t* out) {
  if (s.size() != 8) return false;
  uint32_t v = 0;
  for (char c : s) {
    int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
    if (d < 0) return false;
    v = v << 4 | static_cast<uint32_t>(d);
  }
  *out = v;
  return true;
}

std::string quote_name(const std::string& s) { return "'" + s + "'"; }

}  // namespace

// ---------------------------------------------------------------- dtypes

size_t st_dtype_size(std::string_view n) {
  if (n == "BOOL" || n == "U8" || n == "I8" || n == "F8_E5M2" || n == "F8_E4M3") return 1;
  if (n == "I16" || n == "U16" || n == "F16" || n == "BF16") return 2;
  if (n == "I32" || n == "U32" || n == "F32") return 4;
  if (n == "I64" || n == "U64" || n == "F64") return 8;
  return 0;
}

const char* st_dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::u8: return "U8";
    case DType::boolean: return "BOOL";
    default: return nullptr;
  }
}

bool st_dtype_to_af(std::string_view n, DType* out) {
  for (DType t : {DType::f32, DType::f64, DType::i32, DType::i64, DType::u8, DType::boolean})
    if (n == st_dtype_name(t)) {
      *out = t;
      return true;
    }
  return false;
}

std::string canonical_header(std::vector<const Entry*> entries, const std::map<std::string, std::string>& metadata) {
  std::sort(entries.begin(), entries.end(), [](const Entry* a, const Entry* b) { return a->name < b->name; });
  std::string s;
  for (const Entry* e : entries) {
    s += e->name;
    s += '\0';
    s += e->dtype;
    s += '\0';
    for (size_t i = 0; i < e->shape.size(); ++i) s += (i ? "," : "") + std::to_string(e->shape[i]);
    s += '\0';
    s += std::to_string(e->begin) + "," + std::to_string(e->end) + "\n";
  }
  for (const auto& [k, v] : metadata) {
    if (k == kCrcHeaderKey) continue;
    s += k;
    s += '\0';
    s += v;
    s += '\n';
  }
  return s;
}

// ---------------------------------------------------------------- reading

Result<Reader> Reader::open(const std::string& path) {
  Reader r;
  r.path_ = path;
  const std::string where = "safetensors file '" + path + "'";
  r.fd_ = Fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (r.fd_.get() < 0) {
    if (errno == ENOENT) return not_found(where + " does not exist");
    return internal_error("opening " + where + ": " + errno_text(errno));
  }
  struct stat sb;
  if (::fstat(r.fd_.get(), &sb) != 0) return internal_error("stat of " + where + ": " + errno_text(errno));
  const uint64_t file_size = static_cast<uint64_t>(sb.st_size);
  if (file_size < 8) return data_loss(where + " is truncated: " + std::to_string(file_size) + " bytes, less than the 8-byte header length");
  unsigned char len[8];
  AF_RETURN_IF_ERROR(read_exact(r.fd_.get(), len, 8, 0, path));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | len[i];
  if (n > kMaxHeaderBytes) return data_loss(where + " is corrupted: header length " + std::to_string(n) + " exceeds 100 MB");
  if (8 + n > file_size)
    return data_loss(where + " is truncated: its header needs " + std::to_string(8 + n) + " bytes, the file has " +
                     std::to_string(file_size));
  std::string header(static_cast<size_t>(n), '\0');
  AF_RETURN_IF_ERROR(read_exact(r.fd_.get(), header.data(), header.size(), 8, path));
  r.data_start_ = 8 + n;

  auto json = parse_json(header);
  if (!json.ok()) return data_loss(where + " is corrupted: its header is not valid JSON (" + json.status().message() + ")");
  if (!json->is_object()) return data_loss(where + " is corrupted: its header is not a JSON object");
  for (const auto& [key, v] : json->items()) {
    if (key == "__metadata__") {
      if (!v.is_object()) return data_loss(where + ": __metadata__ is not an object");
      for (const auto& [mk, mv] : v.items()) {
        if (!mv.is_string()) return data_loss(where + ": __metadata__ value of '" + mk + "' is not a string");
        r.metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    const std::string what = where + ", tensor " + quote_name(key);
    Entry e;
    e.name = key;
    const auto field = [&v](const char* name) -> const nlohmann::json* {
      if (!v.is_object()) return nullptr;
      auto it = v.find(name);
      return it == v.end() ? nullptr : &*it;
    };
    const nlohmann::json* dt = field("dtype");
    const nlohmann::json* sh = field("shape");
    const nlohmann::json* off = field("data_offsets");
    if (!dt || !dt->is_string() || !sh || !sh->is_array() || !off || !off->is_array() || off->size() != 2)
      return data_loss(what + ": header entry needs dtype, shape and two data_offsets");
    e.dtype = dt->get<std::string>();
    const size_t esize = st_dtype_size(e.dtype);
    if (esize == 0) return data_loss(what + ": unknown dtype '" + e.dtype + "'");
    unsigned __int128 count = 1;
    for (const nlohmann::json& d : *sh) {
      uint64_t dim;
      if (!json_index(d, &dim)) return data_loss(what + ": shape has an entry that is not a non-negative integer");
      e.shape.push_back(static_cast<int64_t>(dim));
      count *= dim;
      if (count > (static_cast<unsigned __int128>(1) << 62)) return data_loss(what + ": shape is impossibly large");
    }
    if (!json_index((*off)[0], &e.begin) || !json_index((*off)[1], &e.end) || e.end < e.begin)
      return data_loss(what + ": bad data_offsets");
    if (count * esize != e.end - e.begin)
      return data_loss(what + ": data_offsets span " + std::to_string(e.end - e.begin) + " bytes but " + e.dtype +
                       " of that shape needs " + std::to_string(static_cast<uint64_t>(count * esize)));
    r.entries_.push_back(std::move(e));
  }
  std::sort(r.entries_.begin(), r.entries_.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t at = 0;
  for (const Entry& e : r.entries_) {
    if (e.begin != at)
      return data_loss(where + ", tensor " + quote_name(e.name) + ": data_offsets start at " + std::to_string(e.begin) +
                       ", expected " + std::to_string(at) + " (tensors must tile the data section)");
    at = e.end;
  }
  const uint64_t have = file_size - r.data_start_;
  if (have < at)
    return data_loss(where + " is truncated: its data section needs " + std::to_string(at) + " bytes, the file holds " +
                     std::to_string(have));
  if (have > at) return data_loss(where + " is corrupted: " + std::to_string(have - at) + " bytes follow the last tensor");

  // A file with any checksum must have them all: otherwise damage to a checksum's key
  // would silently turn off the check that should catch damage elsewhere.
  bool has_crcs = false;
  for (const auto& [k, v] : r.metadata_) has_crcs |= k.rfind("crc32c", 0) == 0;
  if (has_crcs) {
    for (const char* key : {kCrcHeaderKey, kCrcDataKey})
      if (!r.metadata_.count(key)) return data_loss(where + " is corrupted: its __metadata__ lacks '" + key + "'");
  }
  auto hc = r.metadata_.find(kCrcHeaderKey);
  if (hc != r.metadata_.end()) {
    uint32_t stored;
    if (!parse_hex32(hc->second, &stored)) return data_loss(where + ": malformed " + kCrcHeaderKey + " '" + hc->second + "'");
    std::vector<const Entry*> ptrs;
    for (const Entry& e : r.entries_) ptrs.push_back(&e);
    uint32_t actual = crc32c(canonical_header(ptrs, r.metadata_));
    if (actual != stored)
      return data_loss(where + " is corrupted: its header fails the CRC-32C check (stored " + hc->second + ", computed " +
                       hex32(actual) + ")");
  }
  if (has_crcs)
    for (const Entry& e : r.entries_)
      if (!r.metadata_.count(kCrcTensorPrefix + e.name))
        return data_loss(where + " is corrupted: tensor " + quote_name(e.name) + " has no checksum in __metadata__");
  return r;
}

const Entry* Reader::find(const std::string& name) const {
  for (const Entry& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

Status Reader::read(const std::set<std::string>* wanted, std::map<std::string, Tensor>* out) const {
  const std::string where = "safetensors file '" + path_ + "'";
  uint32_t stored_data = 0;
  const bool check_data = metadata_.count(kCrcDataKey) != 0;
  if (check_data && !parse_hex32(metadata_.at(kCrcDataKey), &stored_data))
    return data_loss(where + ": malformed " + kCrcDataKey + " '" + metadata_.at(kCrcDataKey) + "'");
  uint32_t data_crc = 0;
  std::vector<char> scratch;
  for (const Entry& e : entries_) {
    const bool want = !wanted || wanted->count(e.name);
    if (!want && !check_data) continue;
    const std::string what = where + ", tensor " + quote_name(e.name);
    const size_t nbytes = static_cast<size_t>(e.end - e.begin);
    auto tc = metadata_.find(std::string(kCrcTensorPrefix) + e.name);
    uint32_t stored_tensor = 0;
    if (tc != metadata_.end() && !parse_hex32(tc->second, &stored_tensor))
      return data_loss(what + ": malformed CRC '" + tc->second + "'");
    uint32_t tensor_crc = 0;
    if (want) {
      DType t;
      if (!st_dtype_to_af(e.dtype, &t)) return unimplemented(what + " has dtype " + e.dtype + ", which ActorFlow does not support");
      Tensor value(t, Shape(e.shape));
      if (nbytes) {
        AF_RETURN_IF_ERROR(read_exact(fd_.get(), value.raw_data(), nbytes, data_start_ + e.begin, path_));
        tensor_crc = crc32c(value.raw_data(), nbytes);
        data_crc = crc32c_extend(data_crc, value.raw_data(), nbytes);
        if (t == DType::boolean) {
          // Any nonzero byte is true; storing other bit patterns in a bool is undefined.
          auto* p = static_cast<unsigned char*>(value.raw_data());
          for (size_t i = 0; i < nbytes; ++i) p[i] = p[i] != 0;
        }
      }
      (*out)[e.name] = std::move(value);
    } else {
      scratch.resize(std::min<size_t>(nbytes, size_t{4} << 20));
      for (uint64_t done = 0; done < nbytes;) {
        size_t chunk = std::min<size_t>(scratch.size(), nbytes - done);
        AF_RETURN_IF_ERROR(read_exact(fd_.get(), scratch.data(), chunk, data_start_ + e.begin + done, path_));
        tensor_crc = crc32c_extend(tensor_crc, scratch.data(), chunk);
        data_crc = crc32c_extend(data_crc, scratch.data(), chunk);
        done += chunk;
      }
    }
    if (tc != metadata_.end() && tensor_crc != stored_tensor)
      return data_loss(what + " is corrupted: its data fails the CRC-32C check (stored " + tc->second + ", computed " +
                       hex32(tensor_crc) + ")");
  }
  if (check_data && data_crc != stored_data)
    return data_loss(where + " is corrupted: its data section fails the CRC-32C check (stored " + metadata_.at(kCrcDataKey) +
                     ", computed " + hex32(data_crc) + ")");
  return Status::OK();
}

}  // namespace actorflow::st

namespace actorflow {

using namespace st;  // NOLINT: this file implements st

// ---------------------------------------------------------------- writing

Status write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                         const std::map<std::string, std::string>& metadata, bool sync) {
  const std::string where = "write_safetensors('" + path + "'): ";
  for (const auto& [k, v] : metadata)
    if (k.rfind("crc32c", 0) == 0) return invalid_argument(where + "metadata key '" + k + "' is reserved");
  std::vector<size_t> order(tensors.size());
  std::set<std::string> seen;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const NamedTensor& t = tensors[i];
    if (t.name.empty() || t.name == "__metadata__") return invalid_argument(where + "bad tensor name '" + t.name + "'");
    if (!seen.insert(t.name).second) return invalid_argument(where + "tensor name '" + t.name + "' appears twice");
    if (!t.value.valid()) return invalid_argument(where + "tensor '" + t.name + "' is empty (not a valid tensor)");
    if (!st_dtype_name(t.value.dtype()))
      return unimplemented(where + "tensor '" + t.name + "' has dtype " + dtype_name(t.value.dtype()) +
                           ", which safetensors cannot store");
    if (t.value.num_elements() > 0 && !(t.value.device() == DeviceId{}))
      return invalid_argument(where + "tensor '" + t.name + "' is on " + t.value.device().to_string() + ", not in host memory");
    order[i] = i;
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    size_t sa = dtype_size(tensors[a].value.dtype()), sb = dtype_size(tensors[b].value.dtype());
    return sa != sb ? sa > sb : tensors[a].name < tensors[b].name;
  });

  std::vector<Entry> entries(tensors.size());
  std::map<std::string, std::string> meta = metadata;
  uint64_t offset = 0;
  uint32_t data_crc = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const NamedTensor& t = tensors[order[k]];
    Entry& e = entries[k];
    e.name = t.name;
    e.dtype = st_dtype_name(t.value.dtype());
    e.shape = t.value.shape().dims();
    e.begin = offset;
    offset += t.value.bytes();
    e.end = offset;
    const void* p = t.value.bytes() ? t.value.raw_data() : nullptr;
    meta[std::string(kCrcTensorPrefix) + t.name] = hex32(p ? crc32c(p, t.value.bytes()) : 0);
    if (p) data_crc = crc32c_extend(data_crc, p, t.value.bytes());
  }
  meta[kCrcDataKey] = hex32(data_crc);
  std::vector<const Entry*> ptrs;
  for (const Entry& e : entries) ptrs.push_back(&e);
  meta[kCrcHeaderKey] = hex32(crc32c(canonical_header(ptrs, meta)));

  // Written member by member, each serialized by the library, so the header keeps
  // __metadata__ first, tensors in file order and each entry's fields in the order
  // Python's safetensors writes them; one JSON object for the whole header would sort
  // its keys, and an insertion-ordered one looks keys up linearly.
  std::string header;
  try {
    header = "{\"__metadata__\":" + nlohmann::json(meta).dump();
    for (const Entry& e : entries) {
      nlohmann::ordered_json fields = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {e.begin, e.end}}};
      header += "," + nlohmann::json(e.name).dump() + ":" + fields.dump();
    }
    header += "}";
  } catch (const nlohmann::json::exception&) {
    return invalid_argument(where + "tensor names and metadata must be valid UTF-8 (the header is JSON)");
  }
  while ((8 + header.size()) % 8 != 0) header += ' ';
  if (header.size() > kMaxHeaderBytes) return invalid_argument(where + "header exceeds 100 MB (too many tensors)");

  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return internal_error(where + "cannot create the file: " + errno_text(errno));
  unsigned char len[8];
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  AF_RETURN_IF_ERROR(write_all(fd.get(), len, 8, path));
  AF_RETURN_IF_ERROR(write_all(fd.get(), header.data(), header.size(), path));
  for (size_t idx : order) {
    const Tensor& v = tensors[idx].value;
    if (v.bytes()) AF_RETURN_IF_ERROR(write_all(fd.get(), v.raw_data(), v.bytes(), path));
  }
  if (sync && ::fsync(fd.get()) != 0) return internal_error(where + "fsync: " + errno_text(errno));
  return fd.close(path);
}

Result<std::vector<NamedTensor>> read_safetensors(const std::string& path, std::map<std::string, std::string>* metadata) {
  AF_ASSIGN_OR_RETURN(st::Reader r, st::Reader::open(path));
  std::map<std::string, Tensor> values;
  AF_RETURN_IF_ERROR(r.read(nullptr, &values));
  if (metadata) *metadata = r.metadata();
  std::vector<NamedTensor> out;
  for (const st::Entry& e : r.entries()) out.push_back({e.name, values[e.name]});
  return out;
}

}  // namespace actorflow
