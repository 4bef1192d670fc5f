#include "actorflow/shape.h"

namespace actorflow {

bool Shape::is_fully_defined() const {
  if (unknown_rank_) return false;
  for (int64_t d : dims_)
    if (d < 0) return false;
  return true;
}

int64_t Shape::num_elements() const {
  if (unknown_rank_) return -1;
  int64_t n = 1;
  for (int64_t d : dims_) {
    if (d < 0) return -1;
    n *= d;
  }
  return n;
}

bool Shape::compatible_with(const Shape& o) const {
  if (unknown_rank_ || o.unknown_rank_) return true;
  if (dims_.size() != o.dims_.size()) return false;
  for (size_t i = 0; i < dims_.size(); ++i)
    if (dims_[i] >= 0 && o.dims_[i] >= 0 && dims_[i] != o.dims_[i]) return false;
  return true;
}

bool Shape::merge(const Shape& o, Shape* out) const {
  if (!compatible_with(o)) return false;
  if (unknown_rank_) { *out = o; return true; }
  if (o.unknown_rank_) { *out = *this; return true; }
  Shape r = *this;
  for (size_t i = 0; i < dims_.size(); ++i)
    if (r.dims_[i] < 0) r.dims_[i] = o.dims_[i];
  *out = r;
  return true;
}

std::string Shape::to_string() const {
  if (unknown_rank_) return "<unknown>";
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ",";
    s += dims_[i] < 0 ? "?" : std::to_string(dims_[i]);
  }
  return s + "]";
}

bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out) {
  if (!a.has_rank() || !b.has_rank()) {
    *out = Shape::unknown_rank();
    return true;
  }
  int ra = a.rank(), rb = b.rank(), r = ra > rb ? ra : rb;
  std::vector<int64_t> dims(static_cast<size_t>(r));
  for (int i = 0; i < r; ++i) {
    int64_t da = i < r - ra ? 1 : a.dim(i - (r - ra));
    int64_t db = i < r - rb ? 1 : b.dim(i - (r - rb));
    int64_t d;
    if (da == 1) d = db;
    else if (db == 1) d = da;
    else if (da < 0 && db < 0) d = -1;
    else if (da < 0) d = db;
    else if (db < 0) d = da;
    else if (da == db) d = da;
    else return false;
    dims[static_cast<size_t>(i)] = d;
  }
  *out = Shape(std::move(dims));
  return true;
}

}  // namespace actorflow
