// What a peer sent, made safe for a log line: a name from a Hello or a request may hold a
// newline or a terminal escape sequence that would forge or hide lines.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace actorflow::net {

// Printable ASCII stays as it is; every other byte becomes \xNN, so a line stays one line
// and a terminal shows it as it is. (A backslash stays too: a line escaped twice, once
// where a name enters a Status and again at the log, reads the same.) At most `max_bytes`
// of `s` are shown, then "..." and the full length.
inline std::string escape_for_log(std::string_view s, size_t max_bytes = 256) {
  static const char hex[] = "0123456789abcdef";
  std::string out;
  size_t n = s.size() < max_bytes ? s.size() : max_bytes;
  out.reserve(n + 8);
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (s.size() > max_bytes) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace actorflow::net
