// What an error message may quote of a client's bytes: a short printable prefix. An
// answer that echoed a value whole would cost as much as the body again (or far more,
// were it dumped by a recursive printer), and a client's bytes may hold anything.
#pragma once
#include <algorithm>
#include <string>
#include <string_view>

namespace serve {

// `s` cut to `max` bytes, each byte outside printable ASCII as '?', "..." when cut.
inline std::string echo(std::string_view s, size_t max = 64) {
  std::string out;
  out.reserve(std::min(s.size(), max) + 3);
  for (char c : s.substr(0, max)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > max) out += "...";
  return out;
}

}  // namespace serve
