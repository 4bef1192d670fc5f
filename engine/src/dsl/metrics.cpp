#include "actorflow/metrics.h"

#include "actorflow/dsl_array.h"
#include "actorflow/dsl_core.h"
#include "actorflow/dsl_math.h"
#include "dsl/dsl_build.h"

namespace actorflow {

using dsl::graph_of;

Output accuracy(const Output& predictions, const Output& labels, const std::string& name) {
  Graph& g = graph_of(predictions);
  graph_of(labels);
  const Shape& ps = predictions.shape();
  const Shape& ls = labels.shape();
  if (!is_numeric(predictions.dtype()) || !is_numeric(labels.dtype()))
    throw Error(invalid_argument("accuracy '" + name + "': predictions '" + predictions.name() + "' (" +
                                 dtype_name(predictions.dtype()) + ") and labels '" + labels.name() + "' (" +
                                 dtype_name(labels.dtype()) + ") must be numeric"));
  const bool by_argmax = is_floating(predictions.dtype()) &&
                         (!ps.has_rank() || !ls.has_rank() || ps.rank() == ls.rank() + 1);
  NameScope scope(g, name);
  Output pred, y;
  if (by_argmax) {
    pred = argmax(predictions, -1, "predicted_class");
    y = labels.dtype() == DType::i64 ? labels : cast(labels, DType::i64);
  } else {
    pred = predictions;
    y = labels.dtype() == predictions.dtype() ? labels : cast(labels, predictions.dtype());
  }
  if (!pred.shape().compatible_with(y.shape()))
    throw Error(invalid_argument("accuracy '" + name + "': predictions '" + predictions.name() + "' (" +
                                 ps.to_string() + ") do not match labels '" + labels.name() + "' (" + ls.to_string() +
                                 ")" + (by_argmax ? " once the class axis is reduced by argmax" : "")));
  Output correct = cast(equal(pred, y, "correct"), DType::f32);
  return reduce_mean(correct, {}, false, "value");
}

namespace {

const char* const kCountNames[] = {"true_positives", "false_negatives", "true_negatives", "false_positives"};

// A zero-initialized f64 [n] variable outside the "variables" collection (TF's local
// variables), so checkpoints and optimizers leave it alone.
Output local_counts(Graph& g, int64_t n, const std::string& name) {
  Output var = dsl::add(g, "VariableV2", name, {}, {{"dtype", DType::f64}, {"shape", Shape{n}}});
  const std::string full = var.node().name;
  Output init;
  {
    NameScope s(g, full.substr(g.current_name_scope().size()));
    Output zeros = constant(g, Tensor::zeros(DType::f64, Shape{n}), "zeros");
    init = dsl::add(g, "Assign", "Assign", {zeros}, {{"variable", full}});
  }
  g.add_to_collection("local_variables", var.node_id());
  g.add_to_collection("metric_variables", var.node_id());
  g.add_to_collection("init_ops", init.node_id());
  return var;
}

// The trapezoidal ROC area from the counts [tp, fn, tn, fp] (as tf.metrics.auc: epsilon
// keeps empty classes finite).
Output auc_from_counts(const std::vector<Output>& c, int64_t n, const std::string& name) {
  Graph& g = graph_of(c[0]);
  NameScope scope(g, name);
  const double eps = 1e-7;
  Output tpr = div(c[0] + eps, c[0] + c[1] + eps, "true_positive_rate");
  Output fpr = div(c[3], c[3] + c[2] + eps, "false_positive_rate");
  auto head = [&](const Output& x) { return slice(x, {0}, {n - 1}); };
  auto tail = [&](const Output& x) { return slice(x, {1}, {n - 1}); };
  Output area = reduce_sum((head(fpr) - tail(fpr)) * (head(tpr) + tail(tpr)) * 0.5, {}, false, "area");
  return cast(area, DType::f32, "value");
}

}  // namespace

StreamingMetric auc(const Output& labels, const Output& predictions, int64_t num_thresholds, const std::string& name) {
  return auc(labels, predictions, Output(), num_thresholds, name);
}

StreamingMetric auc(const Output& labels, const Output& predictions, const Output& weights, int64_t num_thresholds,
                    const std::string& name) {
  Graph& g = graph_of(predictions);
  graph_of(labels);
  if (num_thresholds < 2)
    throw Error(invalid_argument("auc '" + name + "': num_thresholds must be at least 2, got " +
                                 std::to_string(num_thresholds)));
  NameScope scope(g, name);
  StreamingMetric m;
  for (const char* count : kCountNames) m.variables.push_back(local_counts(g, num_thresholds, count));

  NodeSpec spec;
  spec.op = "AucAccumulate";
  spec.name = "accumulate";
  spec.inputs = {predictions, labels};
  if (weights.valid()) spec.inputs.push_back(weights);
  spec.attrs["num_thresholds"] = num_thresholds;
  for (int i = 0; i < 4; ++i) spec.attrs[kCountNames[i]] = m.variables[static_cast<size_t>(i)].node().name;
  Operation acc = dsl::add_op(g, std::move(spec));

  std::vector<Output> updated;
  for (int i = 0; i < 4; ++i) updated.push_back(acc.output(i));
  m.update = auc_from_counts(updated, num_thresholds, "update_op");
  m.value = auc_from_counts(m.variables, num_thresholds, "value");

  std::vector<Operation> zeroed;
  {
    NameScope s(g, "reset");
    for (auto& v : m.variables)
      zeroed.push_back(assign(v, constant(g, Tensor::zeros(DType::f64, Shape{num_thresholds}), "zeros")));
  }
  m.reset = group(g, zeroed, "reset");
  return m;
}

}  // namespace actorflow
