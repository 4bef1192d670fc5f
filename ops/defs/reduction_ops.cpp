// Reductions (Sum, Mean, Max, Min, Prod over a list of axes) and ArgMax/ArgMin.
#include "actorflow/op_registry.h"
#include "common/shape_fns.h"

namespace actorflow {
namespace {

constexpr std::initializer_list<DType> kNumeric = {DType::f32, DType::f64, DType::i32, DType::i64, DType::u8};

// Axes arrive from the DSL as a list; a GraphDef may hold a single int. Anything else is
// a malformed node, reported rather than read as "all axes".
Status read_axes(const ShapeContext& c, std::vector<int64_t>* axes) {
  const AttrValue* a = c.node().find_attr("axes");
  if (!a || a->empty()) {
    axes->clear();
    return Status::OK();
  }
  if (a->is<AttrValue::Ints>()) *axes = a->get<AttrValue::Ints>();
  else if (a->is<int64_t>()) *axes = {a->get<int64_t>()};
  else return c.error("attribute 'axes' must be a list of ints, got " + a->to_string());
  return Status::OK();
}

Status check_axes(const ShapeContext& c, const std::vector<int64_t>& axes) {
  const Shape& s = c.input_shape(0);
  if (!s.has_rank()) return Status::OK();
  for (int64_t a : axes)
    if (a < -static_cast<int64_t>(s.rank()) || a >= s.rank())
      return c.error("axis " + std::to_string(a) + " is out of range for input " + c.describe_input(0) + " of rank " +
                     std::to_string(s.rank()));
  return Status::OK();
}

Status reduction_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(shape_fns::require_dtype(c, 0, kNumeric));
  std::vector<int64_t> axes;
  AF_RETURN_IF_ERROR(read_axes(c, &axes));
  const AttrValue* k = c.node().find_attr("keepdims");
  if (k && !k->is<bool>() && !k->is<int64_t>())
    return c.error("attribute 'keepdims' must be a bool, got " + k->to_string());
  AF_RETURN_IF_ERROR(check_axes(c, axes));
  Shape out;
  AF_RETURN_IF_ERROR(shape_fns::reduced_shape(c, c.input_shape(0), axes, c.node().attr_bool("keepdims"), &out));
  c.set_output(0, c.input_dtype(0), out);
  return Status::OK();
}

Status arg_reduction_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(shape_fns::require_dtype(c, 0, kNumeric));
  const AttrValue* a = c.node().find_attr("axis");
  if (!a || !a->is<int64_t>()) return c.error("attribute 'axis' must be an int");
  const Shape& s = c.input_shape(0);
  if (!s.has_rank()) {
    c.set_output(0, DType::i64, Shape::unknown_rank());
    return Status::OK();
  }
  if (s.rank() < 1) return c.error("needs an input of rank >= 1, got " + c.describe_input(0));
  AF_RETURN_IF_ERROR(check_axes(c, {a->get<int64_t>()}));
  int64_t axis;
  AF_RETURN_IF_ERROR(shape_fns::normalize_axis(c, a->get<int64_t>(), s.rank(), &axis));
  std::vector<int64_t> dims;
  for (int i = 0; i < s.rank(); ++i)
    if (i != axis) dims.push_back(s.dim(i));
  c.set_output(0, DType::i64, Shape(std::move(dims)));
  return Status::OK();
}

}  // namespace

AF_REGISTER_OP("Sum").inputs(1).attr("axes", AttrValue::Ints{}).attr("keepdims", false).shape_fn(reduction_shape);
AF_REGISTER_OP("Mean").inputs(1).attr("axes", AttrValue::Ints{}).attr("keepdims", false).shape_fn(reduction_shape);
AF_REGISTER_OP("Max").inputs(1).attr("axes", AttrValue::Ints{}).attr("keepdims", false).shape_fn(reduction_shape);
AF_REGISTER_OP("Min").inputs(1).attr("axes", AttrValue::Ints{}).attr("keepdims", false).shape_fn(reduction_shape);
AF_REGISTER_OP("Prod").inputs(1).attr("axes", AttrValue::Ints{}).attr("keepdims", false).shape_fn(reduction_shape);

AF_REGISTER_OP("ArgMax").inputs(1).attr("axis", int64_t{-1}).shape_fn(arg_reduction_shape);
AF_REGISTER_OP("ArgMin").inputs(1).attr("axis", int64_t{-1}).shape_fn(arg_reduction_shape);

}  // namespace actorflow
