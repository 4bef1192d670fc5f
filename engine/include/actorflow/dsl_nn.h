// The C++ DSL, part 4: neural-network ops on NHWC tensors (convolution, pooling, batch
// normalization, dropout) and a few shape helpers. TF semantics: "SAME" padding gives
// ceil(in / stride) outputs with the padding split evenly (extra after), "VALID" gives
// floor((in - k) / stride) + 1; strides and window sizes are {h, w} (TF's 4-element
// {1, h, w, 1} is accepted too).
#pragma once
#include "actorflow/api.h"
#include <string>
#include <vector>

#include "actorflow/graph.h"

AF_PUBLIC_BEGIN

namespace actorflow {

// x [N,H,W,C] convolved with filter [KH,KW,C,O] -> [N,OH,OW,O] (cross-correlation, as TF).
Output conv2d(const Output& x, const Output& filter, std::vector<int64_t> strides = {1, 1},
              const std::string& padding = "SAME", const std::string& name = "Conv2D");

// Max / average over ksize {kh, kw} windows of x [N,H,W,C]. The average counts only the
// window elements inside the input (SAME padding is not averaged in). A max-pool
// gradient goes to the first maximum of each window.
Output max_pool2d(const Output& x, std::vector<int64_t> ksize, std::vector<int64_t> strides,
                  const std::string& padding = "VALID", const std::string& name = "MaxPool");
Output avg_pool2d(const Output& x, std::vector<int64_t> ksize, std::vector<int64_t> strides,
                  const std::string& padding = "VALID", const std::string& name = "AvgPool");

// The FusedBatchNorm op over x [..., C] (channels last, rank >= 2) with per-channel
// scale, offset, mean and variance vectors [C]. In training it normalizes with the batch
// statistics and ignores mean/variance; batch_mean is the batch mean and batch_variance
// the Bessel-corrected M/(M-1) batch variance (for moving averages), as TF. In inference
// it normalizes with mean/variance and passes them through as batch_mean/batch_variance.
struct FusedBatchNormOutputs {
  Output y, batch_mean, batch_variance;
};
FusedBatchNormOutputs fused_batch_norm(const Output& x, const Output& scale, const Output& offset, const Output& mean,
                                const Output& variance, double epsilon = 1e-3, bool is_training = true,
                                const std::string& name = "FusedBatchNorm");
// The same with the mode chosen at run time by a bool scalar (e.g. a placeholder).
FusedBatchNormOutputs fused_batch_norm(const Output& x, const Output& scale, const Output& offset, const Output& mean,
                                const Output& variance, const Output& is_training, double epsilon = 1e-3,
                                const std::string& name = "FusedBatchNorm");

struct BatchNormOptions {
  double decay = 0.99;     // moving = moving * decay + batch * (1 - decay)
  double epsilon = 1e-3;
  bool center = true;      // learn an offset ("beta", zeros)
  bool scale = true;       // learn a scale ("gamma", ones)
  // true: the returned output carries the moving-average updates as control
  // dependencies, so fetching it (or anything computed from it) updates them.
  // false: run the ops of the "update_ops" collection yourself, as in TF 1.x.
  bool attach_updates = true;
  std::string name = "batch_norm";
};

// Batch normalization with learned gamma/beta and moving statistics, all made by
// get_variable under the variable scope opts.name (made unique as a layer's):
// "<scope>/gamma", "<scope>/beta" (trainable), "<scope>/moving_mean" (zeros),
// "<scope>/moving_variance" (ones) (not trainable).
// training = true: normalizes with the batch statistics, and builds the updates
// moving -= (moving - batch) * (1 - decay) (AssignSub ops, added to the "update_ops"
// collection and, with attach_updates, attached to the output).
// training = false: normalizes with the moving statistics; no updates are built.
Output batch_norm(const Output& x, bool training, const BatchNormOptions& opts = {});
// The mode is a bool scalar fed at run time. The updates run on every step that
// evaluates the output; in inference they subtract exactly zero (the op passes the
// moving statistics through), so the moving statistics stay unchanged.
Output batch_norm(const Output& x, const Output& training, const BatchNormOptions& opts = {});

// Keeps each element with probability keep_prob, scaled by 1/keep_prob, else 0 (TF 1.x
// tf.nn.dropout). The mask is drawn like a RandomUniform op with the same seed (seed -1:
// the graph-seed rule of the random ops): kept where uniform >= 1 - keep_prob.
// training = false returns x itself (no node), so dropout is off at inference.
Output dropout(const Output& x, double keep_prob, bool training = true, int64_t seed = -1,
               const std::string& name = "Dropout");
// The mode is a bool scalar fed at run time: false passes x through unchanged.
Output dropout(const Output& x, double keep_prob, const Output& training, int64_t seed = -1,
               const std::string& name = "Dropout");

// [N, d1, d2, ...] -> [N, d1*d2*...] (a Reshape). Either N or the trailing dims must be
// known at graph-building time.
Output flatten(const Output& x, const std::string& name = "Flatten");

// Rows of params at ids: gather along axis 0. ids of any shape; result ids.shape + [D].
Output embedding_lookup(const Output& params, const Output& ids, const std::string& name = "embedding_lookup");

}  // namespace actorflow

AF_PUBLIC_END
