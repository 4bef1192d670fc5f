#include "actorflow/losses.h"

#include "actorflow/dsl_core.h"
#include "actorflow/dsl_math.h"
#include "dsl/dsl_build.h"

namespace actorflow {

using dsl::graph_of;

Output bias_add(const Output& x, const Output& b, const std::string& name, const std::string& data_format) {
  return dsl::add(graph_of(x), "BiasAdd", name, {x, b}, {{"data_format", data_format}});
}

Output l2_loss(const Output& x, const std::string& name) { return dsl::add(graph_of(x), "L2Loss", name, {x}); }

Output mean_squared_error(const Output& labels, const Output& predictions, const std::string& name) {
  Graph& g = graph_of(predictions);
  graph_of(labels);
  if (!labels.shape().compatible_with(predictions.shape()))
    throw Error(invalid_argument("mean_squared_error '" + name + "': labels '" + labels.name() + "' (" +
                                 labels.shape().to_string() + ") and predictions '" + predictions.name() + "' (" +
                                 predictions.shape().to_string() + ") have incompatible shapes"));
  NameScope scope(g, name);
  Output y = labels.dtype() == predictions.dtype() ? labels : cast(labels, predictions.dtype());
  Output d = sub(predictions, y, "error");
  return reduce_mean(mul(d, d, "squared_error"), {}, false, "value");
}

Output softmax_cross_entropy_with_logits(const Output& logits, const Output& labels, const std::string& name) {
  return dsl::add(graph_of(logits), "SoftmaxCrossEntropyWithLogits", name, {logits, labels});
}

Output sparse_softmax_cross_entropy(const Output& logits, const Output& labels, const std::string& name) {
  return dsl::add(graph_of(logits), "SparseSoftmaxCrossEntropyWithLogits", name, {logits, labels});
}

Output sigmoid_cross_entropy_with_logits(const Output& logits, const Output& labels, const std::string& name) {
  return dsl::add(graph_of(logits), "SigmoidCrossEntropyWithLogits", name, {logits, labels});
}

}  // namespace actorflow
