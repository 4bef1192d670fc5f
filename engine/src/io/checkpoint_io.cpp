// The JSON parser behind safetensors headers and the checkpoint index, and the POSIX
// file helpers for atomic writes (write, fsync, rename, fsync of the directory).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "io/safetensors.h"

namespace actorflow::st {

// ---------------------------------------------------------------- JSON

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& [k, v] : members)
    if (k == key) return &v;
  return nullptr;
}

bool JsonValue::as_index(uint64_t* out) const {
  if (kind != Kind::number || text.empty() || text.size() > 18) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

namespace {

class JsonParser {
 public:
  explicit JsonParser(std::string_view s) : s_(s) {}

  Status parse(JsonValue* out) {
    AF_RETURN_IF_ERROR(value(out, 0));
    skip_ws();
    if (pos_ != s_.size()) return fail("unexpected trailing characters");
    return Status::OK();
  }

 private:
  Status fail(const std::string& what) const {
    return invalid_argument("invalid JSON at byte " + std::to_string(pos_) + ": " + what);
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool eat(char c) {
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == c) { ++pos_; return true; }
    return false;
  }
  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Status value(JsonValue* out, int depth) {
    if (depth > 32) return fail("nested too deeply");
    skip_ws();
    if (pos_ >= s_.size()) return fail("unexpected end");
    char c = s_[pos_];
    if (c == '{') {
      ++pos_;
      out->kind = JsonValue::Kind::object;
      if (eat('}')) return Status::OK();
      do {
        skip_ws();
        std::string key;
        AF_RETURN_IF_ERROR(string(&key));
        if (!eat(':')) return fail("expected ':'");
        JsonValue v;
        AF_RETURN_IF_ERROR(value(&v, depth + 1));
        out->members.emplace_back(std::move(key), std::move(v));
      } while (eat(','));
      if (!eat('}')) return fail("expected ',' or '}'");
      return Status::OK();
    }
    if (c == '[') {
      ++pos_;
      out->kind = JsonValue::Kind::array;
      if (eat(']')) return Status::OK();
      do {
        JsonValue v;
        AF_RETURN_IF_ERROR(value(&v, depth + 1));
        out->items.push_back(std::move(v));
      } while (eat(','));
      if (!eat(']')) return fail("expected ',' or ']'");
      return Status::OK();
    }
    if (c == '"') {
      out->kind = JsonValue::Kind::string;
      return string(&out->text);
    }
    if (literal("true")) { out->kind = JsonValue::Kind::boolean; out->boolean = true; return Status::OK(); }
    if (literal("false")) { out->kind = JsonValue::Kind::boolean; return Status::OK(); }
    if (literal("null")) return Status::OK();
    size_t start = pos_;
    while (pos_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[pos_])) || std::strchr("+-.eE", s_[pos_]))) ++pos_;
    if (pos_ == start) return fail(std::string("unexpected character '") + c + "'");
    out->kind = JsonValue::Kind::number;
    out->text = std::string(s_.substr(start, pos_ - start));
    return Status::OK();
  }

  Status hex4(uint32_t* out) {
    if (pos_ + 4 > s_.size()) return fail("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_++];
      int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
      if (d < 0) return fail("bad \\u escape");
      v = v << 4 | static_cast<uint32_t>(d);
    }
    *out = v;
    return Status::OK();
  }

  Status string(std::string* out) {
    if (pos_ >= s_.size() || s_[pos_] != '"') return fail("expected a string");
    ++pos_;
    while (true) {
      if (pos_ >= s_.size()) return fail("unterminated string");
      char c = s_[pos_++];
      if (c == '"') return Status::OK();
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in string");
      if (c != '\\') { out->push_back(c); continue; }
      if (pos_ >= s_.size()) return fail("unterminated escape");
      char e = s_[pos_++];
      switch (e) {
        case '"': case '\\': case '/': out->push_back(e); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          uint32_t cp = 0;
          AF_RETURN_IF_ERROR(hex4(&cp));
          if (cp >= 0xD800 && cp < 0xDC00) {
            uint32_t lo = 0;
            if (!literal("\\u")) return fail("unpaired surrogate");
            AF_RETURN_IF_ERROR(hex4(&lo));
            if (lo < 0xDC00 || lo >= 0xE000) return fail("unpaired surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            return fail("unpaired surrogate");
          }
          if (cp < 0x80) {
            out->push_back(static_cast<char>(cp));
          } else if (cp < 0x800) {
            out->push_back(static_cast<char>(0xC0 | cp >> 6));
            out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
          } else if (cp < 0x10000) {
            out->push_back(static_cast<char>(0xE0 | cp >> 12));
            out->push_back(static_cast<char>(0x80 | (cp >> 6 & 0x3F)));
            out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
          } else {
            out->push_back(static_cast<char>(0xF0 | cp >> 18));
            out->push_back(static_cast<char>(0x80 | (cp >> 12 & 0x3F)));
            out->push_back(static_cast<char>(0x80 | (cp >> 6 & 0x3F)));
            out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
          }
          break;
        }
        default: return fail(std::string("bad escape '\\") + e + "'");
      }
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

Result<JsonValue> parse_json(std::string_view text) {
  JsonValue v;
  JsonParser p(text);
  AF_RETURN_IF_ERROR(p.parse(&v));
  return v;
}

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
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
