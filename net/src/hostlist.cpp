// Slurm hostlist expansion. Slurm writes node lists compressed ("node[01-03,7]"); its own
// tools expand them, but a task must not depend on scontrol being on its PATH.
#include "actorflow/net/hostlist.h"

#include <cctype>

#include "parse_util.h"

namespace actorflow::net {
namespace {

using detail::parse_int;
using detail::quote;

// Beyond this a list is a mistake (or an attack), not a cluster.
constexpr size_t kMaxHosts = size_t{1} << 20;

bool host_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_'; }

// "01-03,7" → 01 02 03 7, each number keeping its first number's width.
Result<std::vector<std::string>> expand_ranges(std::string_view ranges, std::string_view list) {
  std::vector<std::string> out;
  for (std::string_view r : detail::split(ranges, ',')) {
    size_t dash = r.find('-');
    std::string_view lo_text = r.substr(0, dash);
    std::string_view hi_text = dash == std::string_view::npos ? lo_text : r.substr(dash + 1);
    auto lo = parse_int(lo_text, 0, 999'999'999);
    auto hi = parse_int(hi_text, 0, 999'999'999);
    if (!lo || !hi || lo_text.size() > 9 || hi_text.size() > 9)
      return invalid_argument("host list " + quote(list) + ": range " + quote(r) + " is not N or N-M");
    if (*hi < *lo) return invalid_argument("host list " + quote(list) + ": range " + quote(r) + " runs backwards");
    if (static_cast<size_t>(*hi - *lo) >= kMaxHosts)
      return invalid_argument("host list " + quote(list) + ": range " + quote(r) + " is too large");
    for (long long v = *lo; v <= *hi; ++v) {
      std::string digits = std::to_string(v);
      if (digits.size() < lo_text.size()) digits.insert(0, lo_text.size() - digits.size(), '0');
      out.push_back(std::move(digits));
    }
  }
  return out;
}

// One comma-free-at-top-level item: text, bracketed ranges, text, ... → the product.
Status expand_item(std::string_view item, std::string_view list, std::vector<std::string>* out) {
  std::vector<std::string> names{""};
  size_t pos = 0;
  while (pos < item.size()) {
    if (item[pos] == '[') {
      size_t close = item.find(']', pos);
      if (close == std::string_view::npos) return invalid_argument("host list " + quote(list) + " has an unclosed '['");
      AF_ASSIGN_OR_RETURN(std::vector<std::string> parts, expand_ranges(item.substr(pos + 1, close - pos - 1), list));
      if (names.size() * parts.size() > kMaxHosts)
        return invalid_argument("host list " + quote(list) + " expands to more than " + std::to_string(kMaxHosts) + " hosts");
      std::vector<std::string> next;
      next.reserve(names.size() * parts.size());
      for (const std::string& n : names)
        for (const std::string& p : parts) next.push_back(n + p);
      names = std::move(next);
      pos = close + 1;
      continue;
    }
    if (!host_char(item[pos]))
      return invalid_argument("host list " + quote(list) + " has an unexpected " + quote(item.substr(pos, 1)));
    for (std::string& n : names) n += item[pos];
    ++pos;
  }
  if (out->size() + names.size() > kMaxHosts)
    return invalid_argument("host list " + quote(list) + " expands to more than " + std::to_string(kMaxHosts) + " hosts");
  for (std::string& n : names) out->push_back(std::move(n));
  return Status::OK();
}

}  // namespace

Result<std::vector<std::string>> expand_hostlist(std::string_view list) {
  std::vector<std::string> out;
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[' && ++depth > 1) return invalid_argument("host list " + quote(list) + " nests '['");
    if (c == ']' && --depth < 0) return invalid_argument("host list " + quote(list) + " has a ']' without a '['");
    if (c != ',' || depth > 0) continue;
    std::string_view item = list.substr(start, i - start);
    if (item.empty()) return invalid_argument("host list " + quote(list) + " has an empty entry");
    AF_RETURN_IF_ERROR(expand_item(item, list, &out));
    start = i + 1;
  }
  if (depth > 0) return invalid_argument("host list " + quote(list) + " has an unclosed '['");
  return out;
}

Result<std::vector<int>> expand_tasks_per_node(std::string_view list) {
  std::vector<int> out;
  for (std::string_view item : detail::split(list, ',')) {
    std::string_view count_text = item;
    long long repeat = 1;
    if (size_t paren = item.find('('); paren != std::string_view::npos) {
      count_text = item.substr(0, paren);
      std::string_view rest = item.substr(paren);
      auto r = rest.size() > 3 && rest.substr(0, 2) == "(x" && rest.back() == ')'
                   ? parse_int(rest.substr(2, rest.size() - 3), 1, static_cast<long long>(kMaxHosts))
                   : std::nullopt;
      if (!r) return invalid_argument("task counts " + quote(list) + ": " + quote(item) + " is not N or N(xM)");
      repeat = *r;
    }
    auto count = parse_int(count_text, 1, 1 << 20);
    if (!count) return invalid_argument("task counts " + quote(list) + ": " + quote(item) + " is not N or N(xM)");
    if (out.size() + static_cast<size_t>(repeat) > kMaxHosts)
      return invalid_argument("task counts " + quote(list) + " name more than " + std::to_string(kMaxHosts) + " nodes");
    out.insert(out.end(), static_cast<size_t>(repeat), static_cast<int>(*count));
  }
  return out;
}

}  // namespace actorflow::net
