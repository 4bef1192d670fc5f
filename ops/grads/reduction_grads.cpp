// Gradients of reductions (Sum, Mean; Max/Min/Prod elsewhere) and of arg-reductions.
#include "actorflow/dsl.h"
#include "actorflow/gradients.h"
#include "../../engine/src/dsl/dsl_build.h"

namespace actorflow {
namespace {

Output broadcast_reduced(GradContext& c, const Output& g, bool mean) {
  return dsl::add(c.graph(), "BroadcastReduced", "BroadcastReduced", {g, c.input(0)},
                  {{"axes", AttrValue::Ints(c.node().attr_ints("axes"))}, {"mean", mean}});
}

Status sum_grad(GradContext& c) {
  c.set_input_grad(0, broadcast_reduced(c, c.grad(0), false));
  return Status::OK();
}

Status mean_grad(GradContext& c) {
  c.set_input_grad(0, broadcast_reduced(c, c.grad(0), true));
  return Status::OK();
}

// Max/Min: the gradient goes to the positions equal to the result, split equally
// between ties (as TF does).
Status extremum_grad(GradContext& c) {
  Output x = c.input(0);
  const auto axes = c.node().attr_ints("axes");
  Output chosen = cast(equal(x, broadcast_reduced(c, c.output(0), false)), x.dtype());
  Output count = reduce_sum(chosen, axes, c.node().attr_bool("keepdims"));
  c.set_input_grad(0, chosen * broadcast_reduced(c, c.grad(0) / count, false));
  return Status::OK();
}

// Prod: each element's derivative is the product of the others in its group, computed
// without dividing by the element so zeros are handled.
Status prod_grad(GradContext& c) {
  Output others = dsl::add(c.graph(), "ProdOfOthers", "ProdOfOthers", {c.input(0)},
                           {{"axes", AttrValue::Ints(c.node().attr_ints("axes"))}});
  c.set_input_grad(0, broadcast_reduced(c, c.grad(0), false) * others);
  return Status::OK();
}

}  // namespace

AF_REGISTER_GRADIENT("Sum", sum_grad);
AF_REGISTER_GRADIENT("Mean", mean_grad);
AF_REGISTER_GRADIENT("Max", extremum_grad);
AF_REGISTER_GRADIENT("Min", extremum_grad);
AF_REGISTER_GRADIENT("Prod", prod_grad);
AF_NO_GRADIENT("ArgMax");
AF_NO_GRADIENT("ArgMin");

}  // namespace actorflow

// Second-order support: the gradient ops above have gradients of their own.
namespace actorflow {
namespace {

Status broadcast_reduced_grad(GradContext& c) {
  Output dy = c.grad(0);
  std::vector<int64_t> axes = c.node().attr_ints("axes");
  Output r = c.node().attr_bool("mean") ? reduce_mean(dy, axes) : reduce_sum(dy, axes);
  c.set_input_grad(0, dsl::add(c.graph(), "ReshapeLike", "ReshapeLike", {r, c.input(0)}));
  return Status::OK();
}

Status sum_to_shape_of_grad(GradContext& c) {
  // Summing to a shape is undone by broadcasting back to the gradient's shape.
  c.set_input_grad(0, c.grad(0) * ones_like(c.input(0)));
  return Status::OK();
}

}  // namespace

AF_REGISTER_GRADIENT("BroadcastReduced", broadcast_reduced_grad);
AF_REGISTER_GRADIENT("SumToShapeOf", sum_to_shape_of_grad);

}  // namespace actorflow
