// Gradient of MatMul, for every transpose combination. Each product below yields the
// gradient in the operand's own layout with the output's (broadcast) batch dims; those
// are then summed back to the operand's batch dims.
#include "actorflow/dsl.h"
#include "actorflow/gradients.h"

namespace actorflow {
namespace {

Status matmul_grad(GradContext& c) {
  const bool ta = c.node().attr_bool("transpose_a");
  const bool tb = c.node().attr_bool("transpose_b");
  Output g = c.grad(0), a = c.input(0), b = c.input(1);
  Output ga, gb;
  if (!ta && !tb) {  // C = A B
    ga = matmul(g, b, false, true);
    gb = matmul(a, g, true, false);
  } else if (!ta && tb) {  // C = A B^T
    ga = matmul(g, b, false, false);
    gb = matmul(g, a, true, false);
  } else if (ta && !tb) {  // C = A^T B
    ga = matmul(b, g, false, true);
    gb = matmul(a, g, false, false);
  } else {  // C = A^T B^T
    ga = matmul(b, g, true, true);
    gb = matmul(g, a, true, true);
  }
  c.set_input_grad(0, c.reduce_to_input(ga, 0));
  c.set_input_grad(1, c.reduce_to_input(gb, 1));
  return Status::OK();
}

}  // namespace

AF_REGISTER_GRADIENT("MatMul", matmul_grad);

}  // namespace actorflow
