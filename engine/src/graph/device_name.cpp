// Parsing and printing of device names; see device_name.h.
#include "actorflow/device_name.h"

#include <cctype>
#include <vector>

namespace actorflow {
namespace {

std::vector<std::string> split_parts(const std::string& s) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find('/', i);
    if (j == std::string::npos) j = s.size();
    if (j > i) parts.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

// A non-negative decimal that fits an int; false otherwise.
bool parse_index(const std::string& s, int* out) {
  if (s.empty() || s.size() > 9) return false;
  int v = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool known_type(const std::string& t) { return t == "cpu" || t == "gpu"; }

}  // namespace

DeviceName DeviceName::completed_by(const DeviceName& dflt) const {
  DeviceName d = *this;
  if (!d.has_job()) d.job = dflt.job;
  if (!d.has_task()) d.task = dflt.task;
  if (!d.has_device()) {
    d.type = dflt.type;
    d.index = dflt.index;
  } else if (d.index < 0) {
    d.index = 0;
  }
  return d;
}

std::string DeviceName::to_string() const {
  std::string s;
  if (has_job()) s += "/job:" + job;
  if (has_task()) s += "/task:" + std::to_string(task);
  if (has_device()) s += "/" + type + ":" + (index >= 0 ? std::to_string(index) : std::string("*"));
  return s;
}

std::string DeviceName::task_name() const {
  std::string s;
  if (has_job()) s += "/job:" + job;
  if (has_task()) s += "/task:" + std::to_string(task);
  return s;
}

Result<DeviceName> parse_device_name(const std::string& name) {
  DeviceName d;
  auto bad = [&](const std::string& part, const std::string& why) {
    return invalid_argument("device name '" + name + "': cannot read '" + part + "' (" + why + ")");
  };
  if (!name.empty() && name[0] != '/') return bad(name, "a device name starts with '/'");
  for (const std::string& part : split_parts(name)) {
    size_t colon = part.find(':');
    if (colon == std::string::npos) return bad(part, "expected key:value");
    std::string key = part.substr(0, colon), value = part.substr(colon + 1);
    std::string lkey = lower(key);
    if (lkey == "job") {
      if (value.empty()) return bad(part, "empty job");
      for (char c : value)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return bad(part, "job names are [A-Za-z0-9_-]");
      d.job = value;
    } else if (lkey == "replica") {
      int r;
      if (!parse_index(value, &r)) return bad(part, "replica must be a number");
    } else if (lkey == "task") {
      if (!parse_index(value, &d.task)) return bad(part, "task must be a number");
    } else if (lkey == "device") {
      // "device:CPU:0" or "device:GPU:*" (any index, read as 0).
      size_t c2 = value.find(':');
      std::string type = lower(value.substr(0, c2));
      if (!known_type(type)) return bad(part, "the device type must be CPU or GPU");
      d.type = type;
      d.index = 0;
      if (c2 != std::string::npos) {
        std::string idx = value.substr(c2 + 1);
        if (idx != "*" && !parse_index(idx, &d.index)) return bad(part, "the device index must be a number");
      }
    } else if (known_type(lkey)) {
      d.type = lkey;
      d.index = 0;
      if (value != "*" && !parse_index(value, &d.index)) return bad(part, "the device index must be a number");
    } else {
      return bad(part, "unknown key '" + key + "'");
    }
  }
  return d;
}

}  // namespace actorflow
