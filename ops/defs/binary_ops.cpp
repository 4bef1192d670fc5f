// Elementwise binary ops with numpy broadcasting.
#include "actorflow/op_registry.h"
#include "common/shape_fns.h"

namespace actorflow {
namespace {

Status numeric_binary(ShapeContext& c) {
  AF_RETURN_IF_ERROR(shape_fns::broadcast_binary(c));
  if (!is_numeric(c.input_dtype(0)))
    return c.error(std::string("needs numeric inputs, got ") + dtype_name(c.input_dtype(0)));
  return Status::OK();
}
Status comparison(ShapeContext& c) {
  AF_RETURN_IF_ERROR(shape_fns::broadcast_binary(c, DType::boolean));
  if (c.input_dtype(0) == DType::string) return c.error("cannot compare strings");
  return Status::OK();
}
Status logical(ShapeContext& c) {
  AF_RETURN_IF_ERROR(shape_fns::require_dtype(c, 0, {DType::boolean}));
  AF_RETURN_IF_ERROR(shape_fns::require_dtype(c, 1, {DType::boolean}));
  return shape_fns::broadcast_binary(c);
}

}  // namespace

AF_REGISTER_OP("Add").inputs(2).shape_fn(numeric_binary);
AF_REGISTER_OP("Sub").inputs(2).shape_fn(numeric_binary);
AF_REGISTER_OP("Mul").inputs(2).shape_fn(numeric_binary);
AF_REGISTER_OP("Div").inputs(2).shape_fn(numeric_binary);
AF_REGISTER_OP("Pow").inputs(2).shape_fn(numeric_binary);
AF_REGISTER_OP("Maximum").inputs(2).shape_fn(numeric_binary);
AF_REGISTER_OP("Minimum").inputs(2).shape_fn(numeric_binary);
AF_REGISTER_OP("SquaredDifference").inputs(2).shape_fn(numeric_binary);

AF_REGISTER_OP("Equal").inputs(2).shape_fn(comparison);
AF_REGISTER_OP("NotEqual").inputs(2).shape_fn(comparison);
AF_REGISTER_OP("Less").inputs(2).shape_fn(comparison);
AF_REGISTER_OP("LessEqual").inputs(2).shape_fn(comparison);
AF_REGISTER_OP("Greater").inputs(2).shape_fn(comparison);
AF_REGISTER_OP("GreaterEqual").inputs(2).shape_fn(comparison);
AF_REGISTER_OP("LogicalAnd").inputs(2).shape_fn(logical);
AF_REGISTER_OP("LogicalOr").inputs(2).shape_fn(logical);

AF_REGISTER_OP("AddN").variadic_inputs(1).shape_fn([](ShapeContext& c) {
  Shape s = c.input_shape(0);
  for (int i = 1; i < c.num_inputs(); ++i) {
    if (c.input_dtype(i) != c.input_dtype(0))
      return c.error("inputs have different dtypes: " + c.describe_input(0) + " and " + c.describe_input(i));
    if (!s.merge(c.input_shape(i), &s))
      return c.error("inputs have different shapes: " + c.describe_input(0) + " and " + c.describe_input(i));
  }
  if (!is_numeric(c.input_dtype(0))) return c.error("needs numeric inputs");
  c.set_output(0, c.input_dtype(0), s);
  return Status::OK();
});

}  // namespace actorflow
