// Node attributes: a small closed set of value kinds, all serializable to GraphDef.
#pragma once
#include "actorflow/api.h"
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "actorflow/dtype.h"
#include "actorflow/shape.h"
#include "actorflow/tensor.h"

AF_PUBLIC_BEGIN

namespace actorflow {

class AttrValue {
 public:
  using Ints = std::vector<int64_t>;
  using Floats = std::vector<double>;
  using Strings = std::vector<std::string>;
  using Variant = std::variant<std::monostate, int64_t, double, bool, std::string, DType, Shape,
                               Ints, Floats, Strings, Tensor>;

  AttrValue() = default;
  AttrValue(int v) : v_(int64_t{v}) {}
  AttrValue(int64_t v) : v_(v) {}
  AttrValue(float v) : v_(double{v}) {}
  AttrValue(double v) : v_(v) {}
  AttrValue(bool v) : v_(v) {}
  AttrValue(const char* v) : v_(std::string(v)) {}
  AttrValue(std::string v) : v_(std::move(v)) {}
  AttrValue(DType v) : v_(v) {}
  AttrValue(Shape v) : v_(std::move(v)) {}
  AttrValue(Ints v) : v_(std::move(v)) {}
  AttrValue(std::initializer_list<int64_t> v) : v_(Ints(v)) {}
  AttrValue(Floats v) : v_(std::move(v)) {}
  AttrValue(Strings v) : v_(std::move(v)) {}
  AttrValue(Tensor v) : v_(std::move(v)) {}

  const Variant& variant() const { return v_; }
  template <typename T> bool is() const { return std::holds_alternative<T>(v_); }
  template <typename T> const T& get() const { return std::get<T>(v_); }
  bool empty() const { return is<std::monostate>(); }
  std::string to_string() const;
  bool operator==(const AttrValue& o) const;

 private:
  Variant v_;
};

}  // namespace actorflow

AF_PUBLIC_END
