// The C++ DSL: dense-layer bias, losses (TF 1.x tf.nn / tf.losses semantics).
#pragma once
#include "actorflow/api.h"
#include <string>

#include "actorflow/graph.h"

AF_PUBLIC_BEGIN

namespace actorflow {

// x [..., C] + b [C]. data_format "NCHW" adds b along axis 1 instead of the last axis.
// The gradient for b is a fused sum over every other axis (BiasAddGrad).
Output bias_add(const Output& x, const Output& b, const std::string& name = "BiasAdd",
                const std::string& data_format = "NHWC");

// sum(x^2) / 2, a scalar (tf.nn.l2_loss).
Output l2_loss(const Output& x, const std::string& name = "L2Loss");

// mean((predictions - labels)^2) over every element, a scalar (tf.losses.mean_squared_error).
// labels are cast to the predictions' dtype; the shapes must be compatible.
Output mean_squared_error(const Output& labels, const Output& predictions, const std::string& name = "mean_squared_error");

// Per-row cross-entropy between softmax(logits) and the distribution `labels`, both
// [..., C]: returns the loss [...]. Computed with log-sum-exp, so large logits stay finite;
// the gradient (softmax - labels) comes out of the same kernel.
Output softmax_cross_entropy_with_logits(const Output& logits, const Output& labels,
                                         const std::string& name = "SoftmaxCrossEntropyWithLogits");

// The same with labels given as class indices (i32 or i64) of shape [...], each in [0, C)
// (an index out of range fails the step naming it). Returns the per-example loss [...];
// take af::mean of it for a scalar training loss.
Output sparse_softmax_cross_entropy(const Output& logits, const Output& labels,
                                    const std::string& name = "SparseSoftmaxCrossEntropyWithLogits");

// Elementwise max(x,0) - x*z + log(1 + exp(-|x|)) for logits x and labels z in [0, 1] of the
// same shape (tf.nn.sigmoid_cross_entropy_with_logits).
Output sigmoid_cross_entropy_with_logits(const Output& logits, const Output& labels,
                                         const std::string& name = "SigmoidCrossEntropyWithLogits");

}  // namespace actorflow

AF_PUBLIC_END
