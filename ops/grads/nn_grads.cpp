// Gradients of the NN ops: convolution, pooling, batch normalization and dropout.
//
// The three convolution ops are bilinear and close under differentiation: with x the
// input, w the filter and dy the output gradient, Conv2D(x, w), BackpropInput(w, dy) and
// BackpropFilter(x, dy) are each other's transposes, so every gradient here is one of
// them again (second derivatives come for free). Likewise MaxPoolGrad and
// MaxPoolGradGrad are transposes of each other (for fixed argmax positions), and
// AvgPoolGrad is the transpose of AvgPool.
#include "actorflow/dsl.h"
#include "actorflow/gradients.h"
#include "../../engine/src/dsl/dsl_build.h"

namespace actorflow {
namespace {

std::map<std::string, AttrValue> attrs_of(const Node& n, std::initializer_list<const char*> keys) {
  std::map<std::string, AttrValue> a;
  for (const char* k : keys)
    if (const AttrValue* v = n.find_attr(k)) a[k] = *v;
  return a;
}

std::map<std::string, AttrValue> conv_attrs(GradContext& c) { return attrs_of(c.node(), {"strides", "padding"}); }
std::map<std::string, AttrValue> pool_attrs(GradContext& c) { return attrs_of(c.node(), {"ksize", "strides", "padding"}); }

Output conv2d_op(GradContext& c, const Output& x, const Output& w) {
  return dsl::add(c.graph(), "Conv2D", "Conv2D", {x, w}, conv_attrs(c));
}
Output backprop_input(GradContext& c, const Output& x_like, const Output& w, const Output& dy) {
  return dsl::add(c.graph(), "Conv2DBackpropInput", "Conv2DBackpropInput", {x_like, w, dy}, conv_attrs(c));
}
Output backprop_filter(GradContext& c, const Output& x, const Output& w_like, const Output& dy) {
  return dsl::add(c.graph(), "Conv2DBackpropFilter", "Conv2DBackpropFilter", {x, w_like, dy}, conv_attrs(c));
}

Status conv2d_grad(GradContext& c) {
  Output g = c.grad(0);
  Output x = c.input(0), w = c.input(1);
  c.set_input_grad(0, backprop_input(c, x, w, g));
  c.set_input_grad(1, backprop_filter(c, x, w, g));
  return Status::OK();
}

// dx = BackpropInput(x_like, w, dy): linear in w and dy; x_like lends only its shape.
Status conv2d_backprop_input_grad(GradContext& c) {
  Output g = c.grad(0);
  Output w = c.input(1), dy = c.input(2);
  c.set_input_grad(1, backprop_filter(c, g, w, dy));
  c.set_input_grad(2, conv2d_op(c, g, w));
  return Status::OK();
}

// dw = BackpropFilter(x, w_like, dy): linear in x and dy; w_like lends only its shape.
Status conv2d_backprop_filter_grad(GradContext& c) {
  Output g = c.grad(0);
  Output x = c.input(0), dy = c.input(2);
  c.set_input_grad(0, backprop_input(c, x, g, dy));
  c.set_input_grad(2, conv2d_op(c, x, g));
  return Status::OK();
}

Status max_pool_grad(GradContext& c) {
  c.set_input_grad(0, dsl::add(c.graph(), "MaxPoolGrad", "MaxPoolGrad", {c.input(0), c.output(0), c.grad(0)}, pool_attrs(c)));
  return Status::OK();
}

// Piecewise constant in orig_input/orig_output (the argmax moves only at ties), linear
// in grad.
Status max_pool_grad_grad(GradContext& c) {
  c.set_input_grad(2, dsl::add(c.graph(), "MaxPoolGradGrad", "MaxPoolGradGrad", {c.input(0), c.input(1), c.grad(0)},
                               pool_attrs(c)));
  return Status::OK();
}

Status max_pool_grad_grad_grad(GradContext& c) {
  c.set_input_grad(2, dsl::add(c.graph(), "MaxPoolGrad", "MaxPoolGrad", {c.input(0), c.input(1), c.grad(0)}, pool_attrs(c)));
  return Status::OK();
}

Status avg_pool_grad(GradContext& c) {
  c.set_input_grad(0, dsl::add(c.graph(), "AvgPoolGrad", "AvgPoolGrad", {c.input(0), c.grad(0)}, pool_attrs(c)));
  return Status::OK();
}

Status avg_pool_grad_grad(GradContext& c) {
  c.set_input_grad(1, dsl::add(c.graph(), "AvgPool", "AvgPool", {c.grad(0)}, pool_attrs(c)));
  return Status::OK();
}

// FusedBatchNormGrad gets the gradients of all three outputs (the statistics' only when
// something flows there) and the runtime training flag when the forward had one.
Status fused_batch_norm_grad(GradContext& c) {
  const bool runtime_flag = c.num_inputs() == 6;
  Output g_mean = c.grad(1), g_var = c.grad(2);
  NodeSpec spec;
  spec.op = "FusedBatchNormGrad";
  spec.name = "FusedBatchNormGrad";
  spec.inputs = {c.grad_or_zeros(0), c.input(0), c.input(1), c.input(3), c.input(4)};
  if (g_mean.valid() || g_var.valid() || runtime_flag) {
    spec.inputs.push_back(g_mean.valid() ? g_mean : zeros_like(c.output(1)));
    spec.inputs.push_back(g_var.valid() ? g_var : zeros_like(c.output(2)));
  }
  if (runtime_flag) spec.inputs.push_back(c.input(5));
  spec.attrs = attrs_of(c.node(), {"epsilon", "is_training"});
  Operation op = dsl::add_op(c.graph(), std::move(spec));
  c.set_input_grad(0, op.output(0));
  c.set_input_grad(1, op.output(1));
  c.set_input_grad(2, op.output(2));
  // In training (statically known) the given mean and variance are unused.
  if (runtime_flag || !c.node().attr_bool("is_training", true)) {
    c.set_input_grad(3, op.output(3));
    c.set_input_grad(4, op.output(4));
  }
  return Status::OK();
}

// The mask does not depend on x; y = x * mask.
Status dropout_grad(GradContext& c) {
  Output g = c.grad(0);
  if (g.valid()) c.set_input_grad(0, mul(g, c.output(1)));
  return Status::OK();
}

}  // namespace

AF_REGISTER_GRADIENT("Conv2D", conv2d_grad);
AF_REGISTER_GRADIENT("Conv2DBackpropInput", conv2d_backprop_input_grad);
AF_REGISTER_GRADIENT("Conv2DBackpropFilter", conv2d_backprop_filter_grad);
AF_REGISTER_GRADIENT("MaxPool", max_pool_grad);
AF_REGISTER_GRADIENT("MaxPoolGrad", max_pool_grad_grad);
AF_REGISTER_GRADIENT("MaxPoolGradGrad", max_pool_grad_grad_grad);
AF_REGISTER_GRADIENT("AvgPool", avg_pool_grad);
AF_REGISTER_GRADIENT("AvgPoolGrad", avg_pool_grad_grad);
AF_REGISTER_GRADIENT("FusedBatchNorm", fused_batch_norm_grad);
AF_REGISTER_GRADIENT("Dropout", dropout_grad);

}  // namespace actorflow
