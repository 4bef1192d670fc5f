// Internals of the safetensors reader/writer and of the checkpoint index: strict JSON
// parsing (headers and the index are JSON), POSIX file helpers for atomic writes, and a
// reader that validates a file's layout before handing out tensors.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "actorflow/saver.h"

namespace actorflow::st {

// ---- JSON (nlohmann-json, the project's one JSON library) ----
inline constexpr int kMaxJsonDepth = 64;
// Parses `text` as strict JSON. Two rules beyond the library's: a key may appear once per
// object (otherwise the last copy would silently win, and two readers of one header could
// disagree on a tensor), and nesting stops at kMaxJsonDepth. The error says where
// (line, column) and what, without naming the file: callers add that.
Result<nlohmann::json> parse_json(std::string_view text);
// A non-negative integer that fits in 63 bits.
bool json_index(const nlohmann::json& v, uint64_t* out);

// ---- checkpoint index: {"latest": name, "all": [names]} ----
// Fails only on names that are not UTF-8 (JSON cannot hold them).
Result<std::string> encode_checkpoint_index(const CheckpointState& s);
// Checks the index's shape, not its names; `path` is for messages.
Result<CheckpointState> decode_checkpoint_index(std::string_view bytes, const std::string& path);

// ---- files ----
// RAII file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd();
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { int f = fd_; fd_ = -1; return f; }
  // Closes, reporting the error close() may return (delayed write errors).
  Status close(const std::string& path);

 private:
  int fd_ = -1;
};

std::string errno_text(int err);
Status write_all(int fd, const void* data, size_t n, const std::string& path);
Status read_exact(int fd, void* data, size_t n, uint64_t offset, const std::string& path);
Status fsync_dir(const std::string& dir);
// tmp file in the same directory, fsync, rename over `path`, fsync the directory.
Status atomic_write_file(const std::string& path, std::string_view bytes);
Result<std::string> read_small_file(const std::string& path, size_t max_bytes);

// ---- safetensors ----
// Bytes per element of a safetensors dtype name (also those ActorFlow has no dtype for);
// 0 for an unknown name.
size_t st_dtype_size(std::string_view name);
const char* st_dtype_name(DType t);  // nullptr when safetensors has no equivalent
bool st_dtype_to_af(std::string_view name, DType* out);

struct Entry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // relative to the data section
};

inline constexpr const char* kCrcDataKey = "crc32c.data";
inline constexpr const char* kCrcHeaderKey = "crc32c.header";
inline constexpr const char* kCrcTensorPrefix = "crc32c:";

// What the header CRC covers: entries (by name) and metadata except the header CRC itself,
// so it does not depend on JSON spacing or member order.
std::string canonical_header(std::vector<const Entry*> entries, const std::map<std::string, std::string>& metadata);

class Reader {
 public:
  // Parses and validates the header: JSON, dtypes, contiguous offsets that match the
  // shapes, the file's size, and the header CRC when the file has one.
  static Result<Reader> open(const std::string& path);

  const std::string& path() const { return path_; }
  const std::vector<Entry>& entries() const { return entries_; }  // by offset
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const Entry* find(const std::string& name) const;
  bool has_checksums() const { return metadata_.count(kCrcDataKey) != 0; }

  // Reads the named tensors (every tensor when `wanted` is null) as ActorFlow tensors,
  // verifying per-tensor CRCs and, when it has one, the data section's CRC (which reads the
  // whole file). Unsupported dtypes are an error only for tensors that are read.
  Status read(const std::set<std::string>* wanted, std::map<std::string, Tensor>* out) const;

 private:
  std::string path_;
  Fd fd_;
  uint64_t data_start_ = 0;
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace actorflow::st
