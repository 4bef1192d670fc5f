// Strict JSON parsing (on nlohmann-json) for safetensors headers and the checkpoint index,
// the index's encoding, and the POSIX file helpers for atomic writes (write, fsync, rename,
// fsync of the directory).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"

namespace actorflow::st {

// ---------------------------------------------------------------- JSON

namespace {

// Thrown from the parse callback to stop the parse; never leaves parse_json.
struct JsonRuleBroken {
  std::string what;
};

// Text from a damaged file, fit for a message: non-ASCII and control bytes become '?',
// and at most `max` bytes are kept.
std::string printable(std::string_view text, size_t max) {
  std::string out(text.substr(0, max));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  return text.size() > max ? out + "..." : out;
}

// "[json.exception.parse_error.101] parse error at line 1, ..." without the bracketed id.
// The library quotes the token it stopped in ("last read: '...'"), which in a damaged file
// can be megabytes of binary: only its last bytes are kept, and only printable ASCII.
std::string library_message(const std::exception& e) {
  std::string m = e.what();
  if (!m.empty() && m[0] == '[') {
    size_t close = m.find("] ");
    if (close != std::string::npos) m.erase(0, close + 2);
  }
  constexpr std::string_view kLastRead = "last read: '";
  constexpr size_t kKeep = 40;
  size_t from = m.find(kLastRead);
  size_t to = m.rfind('\'');
  if (from != std::string::npos && to != std::string::npos && to > from + kLastRead.size() + kKeep) {
    from += kLastRead.size();
    m.replace(from, to - from, "..." + m.substr(to - kKeep, kKeep));
  }
  return printable(m, m.size());
}

}  // namespace

Result<nlohmann::json> parse_json(std::string_view text) {
  using nlohmann::json;
  // One key set per open object; keys always belong to the innermost open container,
  // which is then an object, so arrays need no entry.
  std::vector<std::set<std::string>> keys;
  auto check = [&keys](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= kMaxJsonDepth) throw JsonRuleBroken{"nested deeper than " + std::to_string(kMaxJsonDepth) + " levels"};
        if (event == json::parse_event_t::object_start) keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
        keys.pop_back();
        break;
      case json::parse_event_t::key:
        if (!keys.back().insert(parsed.get<std::string>()).second)
          throw JsonRuleBroken{"key \"" + printable(parsed.get<std::string>(), 80) + "\" appears twice in one object"};
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), check);
  } catch (const JsonRuleBroken& e) {
    return invalid_argument(e.what);
  } catch (const json::exception& e) {
    return invalid_argument(library_message(e));
  }
}

bool json_index(const nlohmann::json& v, uint64_t* out) {
  if (!v.is_number_unsigned()) return false;
  uint64_t x = v.get<uint64_t>();
  if (x >> 63) return false;
  *out = x;
  return true;
}

// ---------------------------------------------------------------- checkpoint index

Result<std::string> encode_checkpoint_index(const CheckpointState& s) {
  // Ordered so the file reads "latest" first, as a person expects.
  nlohmann::ordered_json j;
  j["latest"] = s.latest;
  j["all"] = s.all;
  try {
    return j.dump(2) + "\n";
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument("checkpoint index: a checkpoint name is not valid UTF-8 (" + library_message(e) + ")");
  }
}

Result<CheckpointState> decode_checkpoint_index(std::string_view bytes, const std::string& path) {
  const std::string where = "checkpoint index '" + path + "' is corrupted: ";
  auto j = parse_json(bytes);
  if (!j.ok()) return data_loss(where + "not valid JSON (" + j.status().message() + ")");
  const nlohmann::json& v = *j;
  const auto latest = v.is_object() ? v.find("latest") : v.end();
  const auto all = v.is_object() ? v.find("all") : v.end();
  if (latest == v.end() || !latest->is_string() || all == v.end() || !all->is_array())
    return data_loss(where + "expected {\"latest\": name, \"all\": [names]}");
  CheckpointState s;
  s.latest = latest->get<std::string>();
  for (const nlohmann::json& name : *all) {
    if (!name.is_string()) return data_loss(where + "\"all\" holds " + std::string(name.type_name()) + ", not a file name");
    s.all.push_back(name.get<std::string>());
  }
  return s;
}

// ---------------------------------------------------------------- files

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

Status Fd::close(const std::string& path) {
  int f = release();
  if (f >= 0 && ::close(f) != 0) return internal_error("closing '" + path + "': " + errno_text(errno));
  return Status::OK();
}

std::string errno_text(int err) { return std::strerror(err); }

Status write_all(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, std::min<size_t>(n, size_t{1} << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      return internal_error("writing '" + path + "': " + errno_text(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

Status read_exact(int fd, void* data, size_t n, uint64_t offset, const std::string& path) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, std::min<size_t>(n, size_t{1} << 30), static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      return data_loss("reading '" + path + "': " + errno_text(errno));
    }
    if (r == 0) return data_loss("'" + path + "' ended early (truncated?) at byte " + std::to_string(offset));
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return Status::OK();
}

Status fsync_dir(const std::string& dir) {
  Fd fd(::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return internal_error("opening directory '" + dir + "': " + errno_text(errno));
  if (::fsync(fd.get()) != 0 && errno != EINVAL)
    return internal_error("fsync of directory '" + dir + "': " + errno_text(errno));
  return Status::OK();
}

static std::string dir_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

Status atomic_write_file(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp";
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return internal_error("creating '" + tmp + "': " + errno_text(errno));
  AF_RETURN_IF_ERROR(write_all(fd.get(), bytes.data(), bytes.size(), tmp));
  if (::fsync(fd.get()) != 0) return internal_error("fsync of '" + tmp + "': " + errno_text(errno));
  AF_RETURN_IF_ERROR(fd.close(tmp));
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return internal_error("renaming '" + tmp + "' to '" + path + "': " + errno_text(errno));
  return fsync_dir(dir_of(path));
}

Result<std::string> read_small_file(const std::string& path, size_t max_bytes) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return not_found("'" + path + "' does not exist");
    return internal_error("opening '" + path + "': " + errno_text(errno));
  }
  std::string out;
  char buf[4096];
  while (true) {
    ssize_t r = ::read(fd.get(), buf, sizeof buf);
    if (r < 0) {
      if (errno == EINTR) continue;
      return internal_error("reading '" + path + "': " + errno_text(errno));
    }
    if (r == 0) break;
    out.append(buf, static_cast<size_t>(r));
    if (out.size() > max_bytes) return data_loss("'" + path + "' is larger than " + std::to_string(max_bytes) + " bytes");
  }
  return out;
}

}  // namespace actorflow::st
