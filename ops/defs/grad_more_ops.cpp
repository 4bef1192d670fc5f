// Support ops for gradient functions whose result is shaped like a forward tensor known
// only at run time (the forward attrs fix offsets, but dims may be unknown at graph
// time): reshaping, padding, slicing, splitting, un-tiling and scattering back to the
// shape of the forward input, plus the zero-safe product gradient of Prod. They take
// the forward tensor itself as a `like` input because only its runtime shape is known.
#include <string>
#include <vector>

#include "actorflow/op_registry.h"
#include "common/shape_fns.h"

namespace actorflow {
namespace {

std::string ints_to_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

Status floating_grad(const ShapeContext& c, int i) {
  if (!is_floating(c.input_dtype(i))) return c.error("gradient " + c.describe_input(i) + " must be floating point");
  return Status::OK();
}

// A list-of-ints attribute that must be present (a GraphDef may carry any kind).
Status ints_attr(const ShapeContext& c, const std::string& key, std::vector<int64_t>* out) {
  const AttrValue* a = c.node().find_attr(key);
  if (a && a->is<AttrValue::Ints>()) *out = a->get<AttrValue::Ints>();
  else if (a && a->is<int64_t>()) *out = {a->get<int64_t>()};
  else return c.error("attribute '" + key + "' must be a list of integers");
  return Status::OK();
}

Status int_attr(const ShapeContext& c, const std::string& key, int64_t* out) {
  const AttrValue* a = c.node().find_attr(key);
  if (!a || !a->is<int64_t>()) return c.error("attribute '" + key + "' must be an integer");
  *out = a->get<int64_t>();
  return Status::OK();
}

// The element count of a fully defined shape; false if unknown or past int64 (a hostile
// GraphDef may declare any dims).
bool known_count(const Shape& s, int64_t* out) {
  if (!s.is_fully_defined()) return false;
  int64_t n = 1;
  for (int64_t d : s.dims())
    if (__builtin_mul_overflow(n, d, &n)) return false;
  *out = n;
  return true;
}

// Inputs i and j, where their ranks are known, must agree in rank with each other and
// with the length of the per-dim attribute `attr`.
Status same_rank(const ShapeContext& c, int i, int j, size_t attr_len, const std::string& attr) {
  const Shape& a = c.input_shape(i);
  const Shape& b = c.input_shape(j);
  if (a.has_rank() && b.has_rank() && a.rank() != b.rank())
    return c.error(c.describe_input(i) + " and " + c.describe_input(j) + " differ in rank");
  for (const Shape* s : {&a, &b})
    if (s->has_rank() && static_cast<size_t>(s->rank()) != attr_len)
      return c.error("attribute '" + attr + "' has " + std::to_string(attr_len) + " entries for rank " +
                     std::to_string(s->rank()));
  return Status::OK();
}

// ReshapeLike(x, like): x's elements in like's shape.
Status reshape_like_shape(ShapeContext& c) {
  const Shape& x = c.input_shape(0);
  const Shape& like = c.input_shape(1);
  int64_t nx = 0, nl = 0;
  if (known_count(x, &nx) && known_count(like, &nl) && nx != nl)
    return c.error("cannot reshape " + c.describe_input(0) + " like " + c.describe_input(1) + ": element counts differ");
  c.set_output(0, c.input_dtype(0), like);
  return Status::OK();
}

// PadLike(g, like; begin): zeros shaped like `like` with g placed at `begin`. The
// gradient of Slice.
Status pad_like_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(floating_grad(c, 0));
  std::vector<int64_t> begin;
  AF_RETURN_IF_ERROR(ints_attr(c, "begin", &begin));
  AF_RETURN_IF_ERROR(same_rank(c, 0, 1, begin.size(), "begin"));
  const Shape& g = c.input_shape(0);
  const Shape& like = c.input_shape(1);
  for (size_t d = 0; d < begin.size(); ++d) {
    if (begin[d] < 0) return c.error("attribute 'begin' " + ints_to_string(begin) + " has a negative entry");
    const int i = static_cast<int>(d);
    if (g.has_rank() && like.has_rank() && g.dim(i) >= 0 && like.dim(i) >= 0 && begin[d] > like.dim(i) - g.dim(i))
      return c.error(c.describe_input(0) + " at " + ints_to_string(begin) + " does not fit in " + c.describe_input(1));
  }
  c.set_output(0, c.input_dtype(0), like);
  return Status::OK();
}

// SliceLike(g, like; begin): the like-shaped block of g at `begin`. The gradient of Pad.
Status slice_like_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(floating_grad(c, 0));
  std::vector<int64_t> begin;
  AF_RETURN_IF_ERROR(ints_attr(c, "begin", &begin));
  AF_RETURN_IF_ERROR(same_rank(c, 0, 1, begin.size(), "begin"));
  const Shape& g = c.input_shape(0);
  const Shape& like = c.input_shape(1);
  for (size_t d = 0; d < begin.size(); ++d) {
    if (begin[d] < 0) return c.error("attribute 'begin' " + ints_to_string(begin) + " has a negative entry");
    const int i = static_cast<int>(d);
    if (g.has_rank() && like.has_rank() && g.dim(i) >= 0 && like.dim(i) >= 0 && begin[d] > g.dim(i) - like.dim(i))
      return c.error("a block like " + c.describe_input(1) + " at " + ints_to_string(begin) + " does not fit in " +
                     c.describe_input(0));
  }
  c.set_output(0, c.input_dtype(0), like);
  return Status::OK();
}

// SplitLike(g, like_0, ..., like_n-1; axis): g cut along axis into blocks shaped like
// each like_i. The gradient of Concat.
Status split_like_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(floating_grad(c, 0));
  if (c.num_inputs() < 2) return c.error("needs the gradient and at least one tensor to split it like");
  int64_t axis = 0;
  AF_RETURN_IF_ERROR(int_attr(c, "axis", &axis));
  const Shape& g = c.input_shape(0);
  for (int i = 1; i < c.num_inputs(); ++i) {
    const Shape& s = c.input_shape(i);
    if (!s.has_rank()) continue;
    if (g.has_rank() && s.rank() != g.rank())
      return c.error(c.describe_input(i) + " and gradient " + c.describe_input(0) + " differ in rank");
    int64_t a = 0;
    AF_RETURN_IF_ERROR(shape_fns::normalize_axis(c, axis, s.rank(), &a));
  }
  for (int i = 1; i < c.num_inputs(); ++i) c.set_output(i - 1, c.input_dtype(0), c.input_shape(i));
  return Status::OK();
}

// TileGrad(g, like; multiples): the sum of the tiles of g, shaped like the tiled input.
Status tile_grad_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(floating_grad(c, 0));
  std::vector<int64_t> mult;
  AF_RETURN_IF_ERROR(ints_attr(c, "multiples", &mult));
  AF_RETURN_IF_ERROR(same_rank(c, 0, 1, mult.size(), "multiples"));
  for (size_t i = 0; i < mult.size(); ++i)
    if (mult[i] < 0) return c.error("attribute 'multiples' " + ints_to_string(mult) + " has a negative entry");
  c.set_output(0, c.input_dtype(0), c.input_shape(1));
  return Status::OK();
}

// GatherGrad(g, indices, like; axis): the dense gradient of Gather: zeros shaped like
// params with the rows of g scatter-added at `indices` along axis.
Status gather_grad_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(floating_grad(c, 0));
  AF_RETURN_IF_ERROR(shape_fns::require_dtype(c, 1, {DType::i32, DType::i64}));
  int64_t axis = 0;
  AF_RETURN_IF_ERROR(int_attr(c, "axis", &axis));
  const Shape& like = c.input_shape(2);
  if (like.has_rank()) {
    if (like.rank() == 0) return c.error("params " + c.describe_input(2) + " must have rank >= 1");
    int64_t a = 0;
    AF_RETURN_IF_ERROR(shape_fns::normalize_axis(c, axis, like.rank(), &a));
  }
  c.set_output(0, c.input_dtype(0), like);
  return Status::OK();
}

// GatherGradValues(g, indices): g with its leading indices.rank dims merged into one,
// i.e. one row per index: the `values` of the sparse gradient of Gather on axis 0.
Status gather_grad_values_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(floating_grad(c, 0));
  AF_RETURN_IF_ERROR(shape_fns::require_dtype(c, 1, {DType::i32, DType::i64}));
  const Shape& g = c.input_shape(0);
  const Shape& idx = c.input_shape(1);
  if (!g.has_rank() || !idx.has_rank()) {
    c.set_output(0, c.input_dtype(0), Shape::unknown_rank());
    return Status::OK();
  }
  if (g.rank() < idx.rank())
    return c.error("gradient " + c.describe_input(0) + " has lower rank than indices " + c.describe_input(1));
  int64_t count = -1;
  if (idx.is_fully_defined() && !known_count(idx, &count))
    return c.error("indices " + c.describe_input(1) + " are too large");
  std::vector<int64_t> dims{count};
  dims.insert(dims.end(), g.dims().begin() + idx.rank(), g.dims().end());
  c.set_output(0, c.input_dtype(0), Shape(std::move(dims)));
  return Status::OK();
}

// ProdOfOthers(x; axes): each element replaced by the product of the other elements of
// its reduction group (the derivative of Prod), computed without dividing so zeros work.
Status prod_of_others_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(floating_grad(c, 0));
  std::vector<int64_t> axes;
  const AttrValue* a = c.node().find_attr("axes");
  if (a && !a->empty()) AF_RETURN_IF_ERROR(ints_attr(c, "axes", &axes));
  const Shape& s = c.input_shape(0);
  if (s.has_rank())
    for (int64_t ax : axes) {
      int64_t n = 0;
      AF_RETURN_IF_ERROR(shape_fns::normalize_axis(c, ax, s.rank(), &n));
    }
  return shape_fns::unchanged(c);
}

}  // namespace

AF_REGISTER_OP("ReshapeLike").inputs(2).shape_fn(reshape_like_shape);
AF_REGISTER_OP("PadLike").inputs(2).required_attr("begin").shape_fn(pad_like_shape);
AF_REGISTER_OP("SliceLike").inputs(2).required_attr("begin").shape_fn(slice_like_shape);
AF_REGISTER_OP("SplitLike").variadic_inputs(2).outputs(-1).attr("axis", int64_t{0}).shape_fn(split_like_shape);
AF_REGISTER_OP("TileGrad").inputs(2).required_attr("multiples").shape_fn(tile_grad_shape);
AF_REGISTER_OP("GatherGrad").inputs(3).attr("axis", int64_t{0}).shape_fn(gather_grad_shape);
AF_REGISTER_OP("GatherGradValues").inputs(2).shape_fn(gather_grad_values_shape);
AF_REGISTER_OP("ProdOfOthers").inputs(1).attr("axes", AttrValue::Ints{}).shape_fn(prod_of_others_shape);

}  // namespace actorflow
