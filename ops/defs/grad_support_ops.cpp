// Ops that gradient functions build: reducing a broadcast gradient back to its input's
// shape, and scattering sparse (row) gradients into a dense tensor.
#include "actorflow/op_registry.h"
#include "common/shape_fns.h"

namespace actorflow {

AF_REGISTER_OP("SumToShapeOf").inputs(2).shape_fn([](ShapeContext& c) {
  if (!is_floating(c.input_dtype(0))) return c.error("gradient " + c.describe_input(0) + " must be floating point");
  c.set_output(0, c.input_dtype(0), c.input_shape(1));
  return Status::OK();
});

AF_REGISTER_OP("SparseRowsToDense").inputs(3).shape_fn([](ShapeContext& c) {
  AF_RETURN_IF_ERROR(shape_fns::require_dtype(c, 1, {DType::i32, DType::i64}));
  if (c.input_dtype(0) != c.input_dtype(2))
    return c.error("values " + c.describe_input(0) + " and target " + c.describe_input(2) + " differ in dtype");
  c.set_output(0, c.input_dtype(2), c.input_shape(2));
  return Status::OK();
});

// (values [k, ...row], indices [k]) -> (unique indices int64 [u], values [u, ...row]): the
// rows of a sparse gradient summed by index, in the order each index first appears.
AF_REGISTER_OP("SparseSumDuplicates").inputs(2).outputs(2).shape_fn([](ShapeContext& c) {
  if (!is_floating(c.input_dtype(0))) return c.error("values " + c.describe_input(0) + " must be floating point");
  AF_RETURN_IF_ERROR(shape_fns::require_dtype(c, 1, {DType::i32, DType::i64}));
  const Shape& v = c.input_shape(0);
  if (v.has_rank() && v.rank() < 1) return c.error("values " + c.describe_input(0) + " must be rows [k, ...]");
  std::vector<int64_t> dims = v.has_rank() ? v.dims() : std::vector<int64_t>{};
  c.set_output(0, DType::i64, Shape{-1});
  if (v.has_rank()) {
    dims[0] = -1;
    c.set_output(1, c.input_dtype(0), Shape(dims));
  } else {
    c.set_output(1, c.input_dtype(0), v);
  }
  return Status::OK();
});

}  // namespace actorflow

namespace actorflow {

// The gradient of a reduction: each element of `like` gets the reduced value its
// position reduced into (divided by the reduced count when mean=true).
AF_REGISTER_OP("BroadcastReduced").inputs(2).attr("axes", AttrValue::Ints{}).attr("mean", false).shape_fn([](ShapeContext& c) {
  if (!is_floating(c.input_dtype(0))) return c.error("gradient " + c.describe_input(0) + " must be floating point");
  c.set_output(0, c.input_dtype(0), c.input_shape(1));
  return Status::OK();
});

}  // namespace actorflow
