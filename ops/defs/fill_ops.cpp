// Tensors made from a value or from another tensor's shape: Fill, ZerosLike, OnesLike,
// Shape.
#include "actorflow/op_registry.h"
#include "common/fill_util.h"
#include "common/shape_fns.h"

namespace actorflow {
namespace {

bool fillable(DType t) { return is_numeric(t) || t == DType::boolean; }

Status fill_shape(ShapeContext& c) {
  const AttrValue* v = c.node().find_attr("value");
  double value;
  if (v && v->is<double>()) value = v->get<double>();
  else if (v && v->is<int64_t>()) value = static_cast<double>(v->get<int64_t>());
  else return c.error("attribute 'value' must be a number");
  DType t = c.node().attr_dtype("dtype");
  if (!fillable(t)) return c.error("attribute 'dtype' must be a numeric or bool dtype");
  const AttrValue* sa = c.node().find_attr("shape");
  if (!sa || !sa->is<Shape>()) return c.error("attribute 'shape' must be a shape");
  const Shape& s = sa->get<Shape>();
  int64_t n;
  if (!s.is_fully_defined() || !fill_util::checked_num_elements(s.dims(), &n))
    return c.error("attribute 'shape' must be fully defined and of a sane size, got " + s.to_string());
  if (!fill_util::value_fits(value, t))
    return c.error("value " + std::to_string(value) + " does not fit dtype " + dtype_name(t));
  c.set_output(0, t, s);
  return Status::OK();
}

Status like_shape(ShapeContext& c) {
  if (!fillable(c.input_dtype(0))) return c.error("input " + c.describe_input(0) + " must be numeric or bool");
  return shape_fns::unchanged(c);
}

}  // namespace

AF_REGISTER_OP("Fill").inputs(0).required_attr("shape").attr("value", 0.0).attr("dtype", DType::f32).shape_fn(fill_shape);
AF_REGISTER_OP("ZerosLike").inputs(1).shape_fn(like_shape);
AF_REGISTER_OP("OnesLike").inputs(1).shape_fn(like_shape);
AF_REGISTER_OP("Shape").inputs(1).shape_fn([](ShapeContext& c) {
  const Shape& s = c.input_shape(0);
  c.set_output(0, DType::i64, Shape{s.has_rank() ? static_cast<int64_t>(s.rank()) : Shape::kUnknown});
  return Status::OK();
});

}  // namespace actorflow
