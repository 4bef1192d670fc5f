// _FusedMatMul: MatMul, then BiasAdd along the last dim, then (attr relu) Relu, as one
// node. The plan-time fusion pass (actors/src/graph_passes.cpp) writes it in place of
// such chains, after autodiff has run, so it has no gradient: a graph that builds one
// by hand and differentiates through it gets gradients()' "no gradient is defined".
// f32 and f64 only (the pass fuses nothing else); the kernel is in
// ops/cpu/fused_matmul_kernels.cpp.
#include "actorflow/op_registry.h"
#include "common/shape_fns.h"

namespace actorflow {
namespace {

Status fused_matmul_shape(ShapeContext& c) {
  const DType t = c.input_dtype(0);
  if (t != DType::f32 && t != DType::f64)
    return c.error("needs float32 or float64 inputs, got " + c.describe_input(0));
  if (c.input_dtype(2) != t) return c.error("input " + c.describe_input(2) + " differs in dtype from " + c.describe_input(0));
  const Shape& bias = c.input_shape(2);
  if (bias.has_rank() && bias.rank() != 1) return c.error("bias " + c.describe_input(2) + " must be a vector");
  AF_RETURN_IF_ERROR(shape_fns::matmul_shape(c));
  // The product's columns and the bias must agree; either may tell the other.
  const Shape out = c.node().output_shapes[0];
  if (!out.has_rank() || !bias.has_rank()) return Status::OK();
  const int64_t n = out.dim(out.rank() - 1), bc = bias.dim(0);
  if (n >= 0 && bc >= 0 && n != bc)
    return c.error("bias " + c.describe_input(2) + " does not match the " + std::to_string(n) + " columns of the product");
  if (n < 0 && bc >= 0) {
    std::vector<int64_t> dims = out.dims();
    dims.back() = bc;
    c.set_output(0, t, Shape(std::move(dims)));
  }
  return Status::OK();
}

}  // namespace

// relu(op(a) * op(b) + bias), or without relu; inputs a, b, bias[n].
AF_REGISTER_OP("_FusedMatMul")
    .optional_attr("compute_type")
    .inputs(3)
    .attr("transpose_a", false)
    .attr("transpose_b", false)
    .attr("relu", false)
    .expensive()
    .shape_fn(fused_matmul_shape);

}  // namespace actorflow
