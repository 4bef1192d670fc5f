// The C++ DSL: evaluation metrics. accuracy is a plain op on one batch; auc is a
// streaming metric (tf.metrics.auc): local variables accumulate over batches until reset.
#pragma once
#include "actorflow/api.h"
#include <cstdint>
#include <string>
#include <vector>

#include "actorflow/graph.h"

AF_PUBLIC_BEGIN

namespace actorflow {

// The fraction of examples classified correctly, an f32 scalar. With floating
// predictions of rank r and labels of rank r - 1 (or unknown ranks), the predicted class
// is argmax over the last axis of the predictions (logits or probabilities); with
// predictions of the labels' rank (or integer predictions) the two are compared
// elementwise. Labels are class indices of any numeric dtype.
Output accuracy(const Output& predictions, const Output& labels, const std::string& name = "accuracy");

// A metric accumulated across steps.
struct StreamingMetric {
  // The metric over everything accumulated since the last reset. Fetching it in the same
  // step as `update` may see the counts before or after that step's batch (as TF).
  Output value;
  // Adds one batch; yields the metric including that batch.
  Output update;
  // Zeroes the accumulators (they start at zero after Session::run_init()).
  Operation reset;
  // The VariableV2 nodes holding the state. They are in the "local_variables" and
  // "metric_variables" collections and "init_ops", not in "variables": they are neither
  // trained nor saved in checkpoints.
  std::vector<Output> variables;
};

// Streaming ROC AUC of `predictions` (probabilities in [0, 1], f32 or f64; a value
// outside fails the update step) against binary `labels` (bool or numeric, nonzero =
// positive) of the same shape, as tf.metrics.auc: true/false positive/negative counts
// (f64, variables "<name>/true_positives", "false_negatives", "true_negatives",
// "false_positives") at num_thresholds thresholds evenly spaced over [0, 1], and the
// area under the (false positive rate, true positive rate) curve by the trapezoidal rule.
// The value is an f32 scalar. Optional `weights`: a scalar or one per prediction.
StreamingMetric auc(const Output& labels, const Output& predictions, int64_t num_thresholds = 200,
                    const std::string& name = "auc");
StreamingMetric auc(const Output& labels, const Output& predictions, const Output& weights,
                    int64_t num_thresholds = 200, const std::string& name = "auc");

}  // namespace actorflow

AF_PUBLIC_END
