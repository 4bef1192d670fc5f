// Gradients of elementwise binary ops. Each reduces its broadcast result back to the
// shape of the input it flows into.
#include "actorflow/actorflow.h"
#include "actorflow/gradients.h"

namespace actorflow {
namespace {

Status add_grad(GradContext& c) {
  Output g = c.grad(0);
  c.set_input_grad(0, c.reduce_to_input(g, 0));
  c.set_input_grad(1, c.reduce_to_input(g, 1));
  return Status::OK();
}

Status sub_grad(GradContext& c) {
  Output g = c.grad(0);
  c.set_input_grad(0, c.reduce_to_input(g, 0));
  c.set_input_grad(1, c.reduce_to_input(neg(g), 1));
  return Status::OK();
}

Status mul_grad(GradContext& c) {
  Output g = c.grad(0);
  c.set_input_grad(0, c.reduce_to_input(g * c.input(1), 0));
  c.set_input_grad(1, c.reduce_to_input(g * c.input(0), 1));
  return Status::OK();
}

Status div_grad(GradContext& c) {
  Output g = c.grad(0);
  Output a = c.input(0), b = c.input(1);
  c.set_input_grad(0, c.reduce_to_input(g / b, 0));
  c.set_input_grad(1, c.reduce_to_input(neg(g) * a / square(b), 1));
  return Status::OK();
}

Status add_n_grad(GradContext& c) {
  Output g = c.grad(0);
  for (int i = 0; i < c.num_inputs(); ++i) c.set_input_grad(i, g);
  return Status::OK();
}

}  // namespace

AF_REGISTER_GRADIENT("Add", add_grad);
AF_REGISTER_GRADIENT("Sub", sub_grad);
AF_REGISTER_GRADIENT("Mul", mul_grad);
AF_REGISTER_GRADIENT("Div", div_grad);
AF_REGISTER_GRADIENT("AddN", add_n_grad);
AF_NO_GRADIENT("Equal");
AF_NO_GRADIENT("NotEqual");
AF_NO_GRADIENT("Less");
AF_NO_GRADIENT("LessEqual");
AF_NO_GRADIENT("Greater");
AF_NO_GRADIENT("GreaterEqual");
AF_NO_GRADIENT("LogicalAnd");
AF_NO_GRADIENT("LogicalOr");

}  // namespace actorflow
