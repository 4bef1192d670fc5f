// Tensor shapes. At graph-building time a dimension may be unknown (-1), and a whole
// shape may have unknown rank; at run time every shape is fully defined.
#pragma once
#include "actorflow/api.h"
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

AF_PUBLIC_BEGIN

namespace actorflow {

class Shape {
 public:
  static constexpr int64_t kUnknown = -1;

  Shape() = default;  // a scalar: rank 0
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}
  static Shape unknown_rank() { Shape s; s.unknown_rank_ = true; return s; }
  static Shape scalar() { return Shape(); }

  bool has_rank() const { return !unknown_rank_; }
  int rank() const { return unknown_rank_ ? -1 : static_cast<int>(dims_.size()); }
  int64_t dim(int i) const { return dims_[static_cast<size_t>(i)]; }
  int64_t operator[](int i) const { return dim(i); }
  void set_dim(int i, int64_t d) { dims_[static_cast<size_t>(i)] = d; }
  const std::vector<int64_t>& dims() const { return dims_; }
  bool is_fully_defined() const;
  // Product of the dims; -1 if any is unknown.
  int64_t num_elements() const;
  bool is_scalar() const { return has_rank() && dims_.empty(); }

  // True if the two shapes could describe the same tensor (unknowns match anything).
  bool compatible_with(const Shape& other) const;
  // Unknown dims of one filled from the other; fails (returns false) if incompatible.
  bool merge(const Shape& other, Shape* out) const;

  std::string to_string() const;  // "[2,3]", "[?,784]", "<unknown>"
  bool operator==(const Shape& o) const { return unknown_rank_ == o.unknown_rank_ && dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return !(*this == o); }

 private:
  std::vector<int64_t> dims_;
  bool unknown_rank_ = false;
};

// numpy broadcasting of two (possibly partially known) shapes.
bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out);

}  // namespace actorflow

AF_PUBLIC_END
