// Gradients of BiasAdd, BiasAddGrad, L2Loss and the cross-entropy losses.
#include "actorflow/dsl.h"
#include "actorflow/gradients.h"
#include "../../engine/src/dsl/dsl_build.h"

namespace actorflow {
namespace {

std::string format_of(GradContext& c) { return c.node().attr_string("data_format", "NHWC"); }

Status bias_add_grad(GradContext& c) {
  Output g = c.grad(0);
  c.set_input_grad(0, g);
  c.set_input_grad(1, dsl::add(c.graph(), "BiasAddGrad", "BiasAddGrad", {g}, {{"data_format", format_of(c)}}));
  return Status::OK();
}

// BiasAddGrad sums over all but the channel axis, so its gradient broadcasts the
// incoming [C] gradient back over those axes: a BiasAdd onto zeros.
Status bias_add_grad_grad(GradContext& c) {
  Output g = c.grad(0);
  c.set_input_grad(0, dsl::add(c.graph(), "BiasAdd", "BiasAdd", {zeros_like(c.input(0)), g},
                               {{"data_format", format_of(c)}}));
  return Status::OK();
}

Status l2_loss_grad(GradContext& c) {
  c.set_input_grad(0, c.input(0) * c.grad(0));
  return Status::OK();
}

// Through output 1 (backprop = softmax(x) - labels): the softmax Jacobian applied to its
// gradient gg, (gg - sum(gg * softmax)) * softmax, as TF does for second derivatives.
Output through_backprop(GradContext& c, const Output& gg) {
  Output sm = softmax(c.input(0));
  return (gg - reduce_sum(gg * sm, {-1}, true)) * sm;
}

Output add_opt(const Output& a, const Output& b) { return a.valid() ? add(a, b) : b; }

Status softmax_xent_grad(GradContext& c) {
  Output g_loss = c.grad(0), g_bp = c.grad(1);
  Output d_logits, d_labels;
  if (g_loss.valid()) {
    Output gl = expand_dims(g_loss, -1);
    d_logits = gl * c.output(1);
    d_labels = gl * neg(log_softmax(c.input(0)));
  }
  if (g_bp.valid()) {
    d_logits = add_opt(d_logits, through_backprop(c, g_bp));
    d_labels = add_opt(d_labels, neg(g_bp));
  }
  if (d_logits.valid()) c.set_input_grad(0, d_logits);
  if (d_labels.valid()) c.set_input_grad(1, d_labels);
  return Status::OK();
}

Status sparse_softmax_xent_grad(GradContext& c) {
  Output g_loss = c.grad(0), g_bp = c.grad(1);
  Output d_logits;
  if (g_loss.valid()) d_logits = expand_dims(g_loss, -1) * c.output(1);
  if (g_bp.valid()) d_logits = add_opt(d_logits, through_backprop(c, g_bp));
  if (d_logits.valid()) c.set_input_grad(0, d_logits);
  return Status::OK();
}

// d/dx = sigmoid(x) - z, d/dz = -x.
Status sigmoid_xent_grad(GradContext& c) {
  Output g = c.grad(0);
  Output x = c.input(0), z = c.input(1);
  c.set_input_grad(0, g * (sigmoid(x) - z));
  c.set_input_grad(1, g * neg(x));
  return Status::OK();
}

}  // namespace

AF_REGISTER_GRADIENT("BiasAdd", bias_add_grad);
AF_REGISTER_GRADIENT("BiasAddGrad", bias_add_grad_grad);
AF_REGISTER_GRADIENT("L2Loss", l2_loss_grad);
AF_REGISTER_GRADIENT("SoftmaxCrossEntropyWithLogits", softmax_xent_grad);
AF_REGISTER_GRADIENT("SparseSoftmaxCrossEntropyWithLogits", sparse_softmax_xent_grad);
AF_REGISTER_GRADIENT("SigmoidCrossEntropyWithLogits", sigmoid_xent_grad);
AF_NO_GRADIENT("AucAccumulate");

}  // namespace actorflow
