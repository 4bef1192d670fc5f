#include "actorflow/attr_value.h"

namespace actorflow {

namespace {
template <typename T>
std::string join(const std::vector<T>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ",";
    if constexpr (std::is_same_v<T, std::string>) s += "\"" + v[i] + "\"";
    else s += std::to_string(v[i]);
  }
  return s + "]";
}
}  // namespace

std::string AttrValue::to_string() const {
  struct V {
    std::string operator()(std::monostate) const { return "<none>"; }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return std::to_string(v); }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(const std::string& v) const { return "\"" + v + "\""; }
    std::string operator()(DType v) const { return dtype_name(v); }
    std::string operator()(const Shape& v) const { return v.to_string(); }
    std::string operator()(const Ints& v) const { return join(v); }
    std::string operator()(const Floats& v) const { return join(v); }
    std::string operator()(const Strings& v) const { return join(v); }
    std::string operator()(const Tensor& v) const {
      std::string s = v.debug_string();
      return s.size() > 60 ? s.substr(0, 57) + "..." : s;
    }
  };
  return std::visit(V{}, v_);
}

bool AttrValue::operator==(const AttrValue& o) const {
  if (v_.index() != o.v_.index()) return false;
  return std::visit(
      [&](const auto& a) {
        using T = std::decay_t<decltype(a)>;
        const T& b = std::get<T>(o.v_);
        if constexpr (std::is_same_v<T, Tensor>) return a.equals(b);
        else if constexpr (std::is_same_v<T, std::monostate>) return true;
        else return a == b;
      },
      v_);
}

}  // namespace actorflow
