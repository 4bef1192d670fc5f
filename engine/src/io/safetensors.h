// Internals of the safetensors reader/writer and of the checkpoint index: a small JSON
// parser (headers are JSON), POSIX file helpers for atomic writes, and a reader that
// validates a file's layout before handing out tensors.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "actorflow/saver.h"

namespace actorflow::st {

// ---- JSON (just enough for safetensors headers and the checkpoint index) ----
struct JsonValue {
  enum class Kind { null, boolean, number, string, array, object };
  Kind kind = Kind::null;
  bool boolean = false;
  std::string text;  // a string's value, or a number's literal text
  std::vector<JsonValue> items;
  std::vector<std::pair<std::string, JsonValue>> members;  // in file order

  const JsonValue* find(std::string_view key) const;
  // A non-negative integer literal that fits in 63 bits.
  bool as_index(uint64_t* out) const;
};
// Fails with a message giving the byte offset of the problem.
Result<JsonValue> parse_json(std::string_view text);
// `s` as a JSON string literal, quotes included.
std::string json_quote(std::string_view s);

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
