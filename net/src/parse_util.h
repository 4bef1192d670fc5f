// Small parsing helpers shared by the cluster sources.
#pragma once
#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace actorflow::net::detail {

// A whole decimal integer within [lo, hi]; nothing for signs, spaces or other text.
inline std::optional<long long> parse_int(std::string_view s, long long lo, long long hi) {
  long long v = 0;
  if (s.empty() || s[0] == '+') return std::nullopt;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi) return std::nullopt;
  return v;
}

inline std::string quote(std::string_view s) { return "'" + std::string(s) + "'"; }

// Splits on `sep`, keeping empty pieces.
inline std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (size_t start = 0;;) {
    size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

}  // namespace actorflow::net::detail
