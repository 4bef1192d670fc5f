// Gradients of elementwise binary ops. Each reduces its broadcast result back to the
// shape of the input it flows into.
#include "actorflow/dsl.h"
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

Status pow_grad(GradContext& c) {
  Output g = c.grad(0), x = c.input(0), y = c.input(1), z = c.output(0);
  c.set_input_grad(0, c.reduce_to_input(g * y * pow(x, y - 1.0), 0));
  // d x^y / dy = x^y log x, taken as 0 where x <= 0 (as TF does) rather than NaN.
  Output zero = scalar_like(c.graph(), x.dtype(), 0.0, "zero");
  Output log_x = where(x > 0.0, log(where(x > 0.0, x, ones_like(x))), zero);
  c.set_input_grad(1, c.reduce_to_input(g * z * log_x, 1));
  return Status::OK();
}

// Maximum/Minimum: the gradient goes to the chosen side; ties go to the first input.
Status select_side_grad(GradContext& c, const Output& first_chosen) {
  Output g = c.grad(0);
  Output zero = scalar_like(c.graph(), g.dtype(), 0.0, "zero");
  c.set_input_grad(0, c.reduce_to_input(where(first_chosen, g, zero), 0));
  c.set_input_grad(1, c.reduce_to_input(where(first_chosen, zero, g), 1));
  return Status::OK();
}

Status maximum_grad(GradContext& c) { return select_side_grad(c, greater_equal(c.input(0), c.input(1))); }
Status minimum_grad(GradContext& c) { return select_side_grad(c, less_equal(c.input(0), c.input(1))); }

Status squared_difference_grad(GradContext& c) {
  Output d = c.grad(0) * ((c.input(0) - c.input(1)) * 2.0);
  c.set_input_grad(0, c.reduce_to_input(d, 0));
  c.set_input_grad(1, c.reduce_to_input(neg(d), 1));
  return Status::OK();
}

}  // namespace

AF_REGISTER_GRADIENT("Add", add_grad);
AF_REGISTER_GRADIENT("Sub", sub_grad);
AF_REGISTER_GRADIENT("Mul", mul_grad);
AF_REGISTER_GRADIENT("Div", div_grad);
AF_REGISTER_GRADIENT("AddN", add_n_grad);
AF_REGISTER_GRADIENT("Pow", pow_grad);
AF_REGISTER_GRADIENT("Maximum", maximum_grad);
AF_REGISTER_GRADIENT("Minimum", minimum_grad);
AF_REGISTER_GRADIENT("SquaredDifference", squared_difference_grad);
AF_NO_GRADIENT("Equal");
AF_NO_GRADIENT("NotEqual");
AF_NO_GRADIENT("Less");
AF_NO_GRADIENT("LessEqual");
AF_NO_GRADIENT("Greater");
AF_NO_GRADIENT("GreaterEqual");
AF_NO_GRADIENT("LogicalAnd");
AF_NO_GRADIENT("LogicalOr");

}  // namespace actorflow
