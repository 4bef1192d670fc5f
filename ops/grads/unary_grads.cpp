// Gradients of elementwise unary math, activations, Softmax/LogSoftmax, Cast and the
// pass-through ops. Where the derivative is cheaper from the output (exp, sigmoid, tanh,
// sqrt) it is built from the output, as TF does.
#include "actorflow/dsl.h"
#include "actorflow/gradients.h"

namespace actorflow {
namespace {

Output zero_of(GradContext& c, const Output& like) { return scalar_like(c.graph(), like.dtype(), 0.0, "zero"); }

Status neg_grad(GradContext& c) {
  c.set_input_grad(0, neg(c.grad(0)));
  return Status::OK();
}

Status abs_grad(GradContext& c) {
  c.set_input_grad(0, c.grad(0) * sign(c.input(0)));
  return Status::OK();
}

Status exp_grad(GradContext& c) {
  c.set_input_grad(0, c.grad(0) * c.output(0));
  return Status::OK();
}

Status log_grad(GradContext& c) {
  c.set_input_grad(0, c.grad(0) / c.input(0));
  return Status::OK();
}

Status sqrt_grad(GradContext& c) {
  // d sqrt(x) = 1 / (2 sqrt(x))
  c.set_input_grad(0, c.grad(0) * 0.5 / c.output(0));
  return Status::OK();
}

Status rsqrt_grad(GradContext& c) {
  // d x^-1/2 = -1/2 x^-3/2 = -1/2 y^3
  Output y = c.output(0);
  c.set_input_grad(0, c.grad(0) * (-0.5) * (y * square(y)));
  return Status::OK();
}

Status square_grad(GradContext& c) {
  c.set_input_grad(0, c.grad(0) * (c.input(0) * 2.0));
  return Status::OK();
}

Status relu_grad(GradContext& c) {
  Output g = c.grad(0);
  c.set_input_grad(0, where(c.input(0) > 0.0, g, zero_of(c, g)));
  return Status::OK();
}

Status sigmoid_grad(GradContext& c) {
  Output y = c.output(0);
  c.set_input_grad(0, c.grad(0) * (y * (1.0 - y)));
  return Status::OK();
}

Status tanh_grad(GradContext& c) {
  Output y = c.output(0);
  c.set_input_grad(0, c.grad(0) * (1.0 - square(y)));
  return Status::OK();
}

Status softplus_grad(GradContext& c) {
  c.set_input_grad(0, c.grad(0) * sigmoid(c.input(0)));
  return Status::OK();
}

Status softmax_grad(GradContext& c) {
  // dx = y * (g - sum(g * y)) over the last axis.
  Output g = c.grad(0), y = c.output(0);
  c.set_input_grad(0, y * (g - reduce_sum(g * y, {-1}, true)));
  return Status::OK();
}

Status log_softmax_grad(GradContext& c) {
  // dx = g - softmax(x) * sum(g) over the last axis; softmax(x) = exp(y).
  Output g = c.grad(0);
  c.set_input_grad(0, g - exp(c.output(0)) * reduce_sum(g, {-1}, true));
  return Status::OK();
}

Status cast_grad(GradContext& c) {
  // Only float-to-float casts carry a gradient; through an integer the value is a step
  // function of its input.
  const DType from = c.input(0).dtype();
  if (!is_floating(from) || !is_floating(c.output(0).dtype())) return Status::OK();
  Output g = c.grad(0);
  c.set_input_grad(0, g.dtype() == from ? g : cast(g, from));
  return Status::OK();
}

Status pass_through_grad(GradContext& c) {
  c.set_input_grad(0, c.grad(0));
  return Status::OK();
}

}  // namespace

AF_REGISTER_GRADIENT("Neg", neg_grad);
AF_REGISTER_GRADIENT("Abs", abs_grad);
AF_REGISTER_GRADIENT("Exp", exp_grad);
AF_REGISTER_GRADIENT("Log", log_grad);
AF_REGISTER_GRADIENT("Sqrt", sqrt_grad);
AF_REGISTER_GRADIENT("Rsqrt", rsqrt_grad);
AF_REGISTER_GRADIENT("Square", square_grad);
AF_REGISTER_GRADIENT("Relu", relu_grad);
AF_REGISTER_GRADIENT("Sigmoid", sigmoid_grad);
AF_REGISTER_GRADIENT("Tanh", tanh_grad);
AF_REGISTER_GRADIENT("Softplus", softplus_grad);
AF_REGISTER_GRADIENT("Softmax", softmax_grad);
AF_REGISTER_GRADIENT("LogSoftmax", log_softmax_grad);
AF_REGISTER_GRADIENT("Cast", cast_grad);
AF_REGISTER_GRADIENT("Identity", pass_through_grad);
AF_REGISTER_GRADIENT("PlaceholderWithDefault", pass_through_grad);
AF_NO_GRADIENT("Sign");
AF_NO_GRADIENT("LogicalNot");

}  // namespace actorflow
