// Elementwise unary math and activations, Softmax/LogSoftmax over the last axis,
// LogicalNot and Cast. Each keeps its input's shape.
#include "actorflow/op_registry.h"
#include "common/shape_fns.h"

namespace actorflow {
namespace {

Status unary_of(ShapeContext& c, std::initializer_list<DType> allowed) {
  AF_RETURN_IF_ERROR(shape_fns::require_dtype(c, 0, allowed));
  return shape_fns::unchanged(c);
}
// Ops meaningful on signed integers as well as floats.
Status signed_numeric(ShapeContext& c) { return unary_of(c, {DType::f32, DType::f64, DType::i32, DType::i64}); }
Status floating(ShapeContext& c) { return unary_of(c, {DType::f32, DType::f64}); }

Status softmax_shape(ShapeContext& c) {
  AF_RETURN_IF_ERROR(floating(c));
  const Shape& s = c.input_shape(0);
  if (s.has_rank() && s.rank() < 1)
    return c.error("needs an input of rank >= 1 (it normalizes over the last axis), got " + c.describe_input(0));
  return Status::OK();
}

bool castable(DType t) { return is_numeric(t) || t == DType::boolean; }

Status cast_shape(ShapeContext& c) {
  const AttrValue* a = c.node().find_attr("dtype");
  if (!a || !a->is<DType>()) return c.error("attribute 'dtype' must be a dtype");
  DType to = a->get<DType>();
  if (!castable(to)) return c.error(std::string("cannot cast to ") + dtype_name(to) + " (numeric and bool only)");
  if (!castable(c.input_dtype(0)))
    return c.error("cannot cast " + c.describe_input(0) + " to " + dtype_name(to) + " (numeric and bool only)");
  c.set_output(0, to, c.input_shape(0));
  return Status::OK();
}

}  // namespace

AF_REGISTER_OP("Neg").inputs(1).shape_fn(signed_numeric);
AF_REGISTER_OP("Abs").inputs(1).shape_fn(signed_numeric);
AF_REGISTER_OP("Sign").inputs(1).shape_fn(signed_numeric);
AF_REGISTER_OP("Square").inputs(1).shape_fn(signed_numeric);
AF_REGISTER_OP("Relu").inputs(1).shape_fn(signed_numeric);

AF_REGISTER_OP("Exp").inputs(1).shape_fn(floating);
AF_REGISTER_OP("Log").inputs(1).shape_fn(floating);
AF_REGISTER_OP("Sqrt").inputs(1).shape_fn(floating);
AF_REGISTER_OP("Rsqrt").inputs(1).shape_fn(floating);
AF_REGISTER_OP("Sigmoid").inputs(1).shape_fn(floating);
AF_REGISTER_OP("Tanh").inputs(1).shape_fn(floating);
AF_REGISTER_OP("Softplus").inputs(1).shape_fn(floating);

AF_REGISTER_OP("Softmax").inputs(1).shape_fn(softmax_shape);
AF_REGISTER_OP("LogSoftmax").inputs(1).shape_fn(softmax_shape);

AF_REGISTER_OP("LogicalNot").inputs(1).shape_fn([](ShapeContext& c) { return unary_of(c, {DType::boolean}); });

AF_REGISTER_OP("Cast").inputs(1).required_attr("dtype").shape_fn(cast_shape);

}  // namespace actorflow
