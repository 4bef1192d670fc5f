// _FusedElementwise: a chain (or small DAG) of f32 elementwise ops run as one node, the
// program in its attributes (actorflow/ops/fused_elementwise.h). The plan-time pass in
// actors/src/elementwise_fusion.cpp writes it after autodiff has run, so it has no
// gradient. Its kernel (ops/cpu/fused_elementwise_kernels.cpp) evaluates the program in
// one pass over the data where every input has the output's shape or one element, and
// op by op otherwise, so any inputs the original ops accept give their results.
#include "actorflow/op_registry.h"
#include "actorflow/ops/fused_elementwise.h"

namespace actorflow {
namespace {

Status fused_elementwise_shape(ShapeContext& c) {
  auto program = fused_elementwise::parse_program(c.node(), c.num_inputs());
  if (!program.ok()) return c.error(program.status().message());
  Shape s = c.input_shape(0);
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (c.input_dtype(i) != DType::f32) return c.error("needs float32 inputs, got " + c.describe_input(i));
    Shape merged;
    if (!broadcast_shapes(s, c.input_shape(i), &merged))
      return c.error("input " + c.describe_input(i) + " cannot be broadcast with the others, " + s.to_string());
    s = std::move(merged);
  }
  c.set_output(0, DType::f32, s);
  return Status::OK();
}

}  // namespace

AF_REGISTER_OP("_FusedElementwise")
    .variadic_inputs(1)
    .required_attr("ops")
    .required_attr("args")
    .attr("names", AttrValue(AttrValue::Strings{}))
    .shape_fn(fused_elementwise_shape);

}  // namespace actorflow
