// _FusedMatMul: MatMul, then BiasAdd along the last dim, then (attr relu) Relu, as one
// node. The plan-time fusion pass (actors/src/graph_passes.cpp) writes it in place of
// such chains, after autodiff has run, so it has no gradient: a graph that builds one
// by hand and differentiates through it gets gradients()' "no gradient is defined".
// f32 and f64 only (the pass fuses nothing else); the kernel is in
// ops/cpu/fused_matmul_kernels.cpp.
#include "actorflow/op_registry.h"

namespace actorflow {
namespace {

Status fused_matmul_shape(ShapeContext& c) {
  const bool ta = c.node().attr_bool("transpose_a");
  const bool tb = c.node().attr_bool("transpose_b");
  const DType t = c.input_dtype(0);
  if (t != DType::f32 && t != DType::f64)
    return c.error("needs float32 or float64 inputs, got " + c.describe_input(0));
  for (int i = 1; i < 3; ++i)
    if (c.input_dtype(i) != t)
      return c.error("input " + c.describe_input(i) + " differs in dtype from " + c.describe_input(0));
  const Shape& a = c.input_shape(0);
  const Shape& b = c.input_shape(1);
  const Shape& bias = c.input_shape(2);
  for (int i = 0; i < 2; ++i) {
    const Shape& s = i == 0 ? a : b;
    if (s.has_rank() && s.rank() < 2)
      return c.error("input " + c.describe_input(i) + " must have rank >= 2, got rank " + std::to_string(s.rank()));
  }
  if (bias.has_rank() && bias.rank() != 1) return c.error("bias " + c.describe_input(2) + " must be a vector");
  const int64_t bc = bias.has_rank() ? bias.dim(0) : Shape::kUnknown;
  if (!a.has_rank() || !b.has_rank()) {
    c.set_output(0, t, Shape::unknown_rank());
    return Status::OK();
  }
  const int ra = a.rank(), rb = b.rank();
  const int64_t m = ta ? a.dim(ra - 1) : a.dim(ra - 2);
  const int64_t ka = ta ? a.dim(ra - 2) : a.dim(ra - 1);
  const int64_t kb = tb ? b.dim(rb - 1) : b.dim(rb - 2);
  int64_t n = tb ? b.dim(rb - 2) : b.dim(rb - 1);
  if (ka >= 0 && kb >= 0 && ka != kb)
    return c.error("inner dimensions differ: " + c.describe_input(0) + " and " + c.describe_input(1) + ": " +
                   std::to_string(ka) + " vs " + std::to_string(kb));
  if (n >= 0 && bc >= 0 && n != bc)
    return c.error("bias " + c.describe_input(2) + " does not match the " + std::to_string(n) + " columns of the product");
  if (n < 0) n = bc;
  Shape batch_a(std::vector<int64_t>(a.dims().begin(), a.dims().end() - 2));
  Shape batch_b(std::vector<int64_t>(b.dims().begin(), b.dims().end() - 2));
  Shape batch;
  if (!broadcast_shapes(batch_a, batch_b, &batch))
    return c.error("batch dimensions cannot be broadcast: " + c.describe_input(0) + " and " + c.describe_input(1));
  std::vector<int64_t> dims = batch.dims();
  dims.push_back(m);
  dims.push_back(n);
  c.set_output(0, t, Shape(std::move(dims)));
  return Status::OK();
}

}  // namespace

// relu(op(a) * op(b) + bias), or without relu; inputs a, b, bias[n].
AF_REGISTER_OP("_FusedMatMul")
    .inputs(3)
    .attr("transpose_a", false)
    .attr("transpose_b", false)
    .attr("relu", false)
    .expensive()
    .shape_fn(fused_matmul_shape);

}  // namespace actorflow
