// Gradients of the data-flow ops. DynamicStitch routes each row of its output back to
// the data input it came from (TF's _DynamicStitchGrads: a gather per input); the index
// inputs of it, of DynamicPartition and of Range are integers and get none.
#include "actorflow/dsl.h"
#include "actorflow/gradients.h"

namespace actorflow {
namespace {

Status dynamic_stitch_grad(GradContext& c) {
  const int n = c.num_inputs() / 2;
  Output g = c.grad(0);
  for (int i = 0; i < n; ++i) c.set_input_grad(n + i, gather(g, c.input(i), 0, "gather"));
  return Status::OK();
}

}  // namespace

AF_REGISTER_GRADIENT("DynamicStitch", dynamic_stitch_grad);
AF_NO_GRADIENT("Range");

}  // namespace actorflow
