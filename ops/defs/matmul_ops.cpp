// MatMul: the product of the last two dims, with numpy-broadcast batch dims in front.
#include "actorflow/op_registry.h"
#include "common/shape_fns.h"

namespace actorflow {
namespace {

std::string flags_note(bool ta, bool tb) {
  if (!ta && !tb) return "";
  std::string s = " (with ";
  if (ta) s += "transpose_a";
  if (ta && tb) s += ", ";
  if (tb) s += "transpose_b";
  return s + ")";
}

}  // namespace

Status shape_fns::matmul_shape(ShapeContext& c) {
  const bool ta = c.node().attr_bool("transpose_a");
  const bool tb = c.node().attr_bool("transpose_b");
  DType t = c.input_dtype(0);
  if (c.input_dtype(1) != t)
    return c.error("inputs have different dtypes: " + c.describe_input(0) + " and " + c.describe_input(1));
  if (t != DType::f32 && t != DType::f64 && t != DType::i32 && t != DType::i64)
    return c.error("needs float32, float64, int32 or int64 inputs, got " + c.describe_input(0));
  const Shape& a = c.input_shape(0);
  const Shape& b = c.input_shape(1);
  for (int i = 0; i < 2; ++i) {
    const Shape& s = i == 0 ? a : b;
    if (s.has_rank() && s.rank() < 2)
      return c.error("input " + c.describe_input(i) + " must have rank >= 2, got rank " + std::to_string(s.rank()));
  }
  if (!a.has_rank() || !b.has_rank()) {
    // Batch dims may come from either side, so even the rank is unknown.
    c.set_output(0, t, Shape::unknown_rank());
    return Status::OK();
  }
  const int ra = a.rank(), rb = b.rank();
  const int64_t m = ta ? a.dim(ra - 1) : a.dim(ra - 2);
  const int64_t ka = ta ? a.dim(ra - 2) : a.dim(ra - 1);
  const int64_t kb = tb ? b.dim(rb - 1) : b.dim(rb - 2);
  const int64_t n = tb ? b.dim(rb - 2) : b.dim(rb - 1);
  if (ka >= 0 && kb >= 0 && ka != kb)
    return c.error("inner dimensions differ: " + c.describe_input(0) + " and " + c.describe_input(1) + flags_note(ta, tb) +
                   ": " + std::to_string(ka) + " vs " + std::to_string(kb));
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

AF_REGISTER_OP("MatMul")
    .optional_attr("compute_type")
    .inputs(2)
    .attr("transpose_a", false)
    .attr("transpose_b", false)
    .expensive()
    .shape_fn(shape_fns::matmul_shape);

}  // namespace actorflow
