// Gradients of reductions (Sum, Mean; Max/Min/Prod elsewhere) and of arg-reductions.
#include "actorflow/actorflow.h"
#include "actorflow/gradients.h"
#include "../../engine/src/dsl_build.h"

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

}  // namespace

AF_REGISTER_GRADIENT("Sum", sum_grad);
AF_REGISTER_GRADIENT("Mean", mean_grad);
AF_NO_GRADIENT("ArgMax");
AF_NO_GRADIENT("ArgMin");

}  // namespace actorflow
