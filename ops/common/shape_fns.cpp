#include "common/shape_fns.h"

#include <algorithm>

namespace actorflow::shape_fns {

Status unchanged(ShapeContext& c) {
  c.set_output(0, c.input_dtype(0), c.input_shape(0));
  return Status::OK();
}

Status broadcast_binary(ShapeContext& c, DType out) {
  if (c.input_dtype(0) != c.input_dtype(1))
    return c.error("inputs have different dtypes: " + c.describe_input(0) + " and " + c.describe_input(1));
  Shape s;
  if (!broadcast_shapes(c.input_shape(0), c.input_shape(1), &s))
    return c.error("shapes cannot be broadcast together: " + c.describe_input(0) + " and " + c.describe_input(1));
  c.set_output(0, out == DType::invalid ? c.input_dtype(0) : out, s);
  return Status::OK();
}

Status require_dtype(ShapeContext& c, int i, std::initializer_list<DType> allowed) {
  DType t = c.input_dtype(i);
  if (std::find(allowed.begin(), allowed.end(), t) != allowed.end()) return Status::OK();
  std::string names;
  for (DType a : allowed) names += std::string(names.empty() ? "" : ", ") + dtype_name(a);
  return c.error("input " + std::to_string(i) + " " + c.describe_input(i) + " must be one of {" + names + "}");
}

Status normalize_axis(const ShapeContext& c, int64_t axis, int rank, int64_t* out) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    return c.error("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  *out = a;
  return Status::OK();
}

Status reduced_shape(const ShapeContext& c, const Shape& in, const std::vector<int64_t>& axes, bool keepdims, Shape* out) {
  if (!in.has_rank()) {
    *out = Shape::unknown_rank();
    return Status::OK();
  }
  int r = in.rank();
  std::vector<bool> reduce(static_cast<size_t>(r), axes.empty());
  for (int64_t a : axes) {
    int64_t n;
    AF_RETURN_IF_ERROR(normalize_axis(c, a, r, &n));
    reduce[static_cast<size_t>(n)] = true;
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < r; ++i) {
    if (!reduce[static_cast<size_t>(i)]) dims.push_back(in.dim(i));
    else if (keepdims) dims.push_back(1);
  }
  *out = Shape(std::move(dims));
  return Status::OK();
}

}  // namespace actorflow::shape_fns
