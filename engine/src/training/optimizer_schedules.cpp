// The global step, learning-rate decay and gradient clipping (af::train).
#include <string>

#include "actorflow/dsl_array.h"
#include "actorflow/dsl_core.h"
#include "actorflow/dsl_math.h"
#include "actorflow/optimizers.h"
#include "dsl/dsl_build.h"

namespace actorflow::train {

Output global_step(Graph& g) {
  const auto& found = g.collection("global_step");
  if (!found.empty()) return Output(&g, found.front(), 0);
  if (const Node* n = g.find_node("global_step")) {
    if (n->op != "VariableV2" || n->output_dtypes[0] != DType::i64 || !n->output_shapes[0].is_scalar())
      throw Error(invalid_argument("global_step: the graph already has a node 'global_step' that is not an int64 scalar variable"));
    g.add_to_collection("global_step", n->id);
    return Output(&g, n->id, 0);
  }
  const int first = g.num_nodes();
  Output step = variable(g, Shape{}, zeros_initializer(DType::i64), "global_step", /*trainable=*/false);
  // Created outside any control scope the caller is in, as TF's init_scope.
  for (int id = first; id < g.num_nodes(); ++id) g.mutable_node(id).control_inputs.clear();
  g.add_to_collection("global_step", step.node_id());
  return step;
}

Output exponential_decay(optim::Hyper learning_rate, const Output& global_step, int64_t decay_steps, double decay_rate,
                         bool staircase, const std::string& name) {
  if (!global_step.valid()) throw Error(invalid_argument(name + ": global_step is an empty Output"));
  if (decay_steps <= 0) throw Error(invalid_argument(name + ": decay_steps must be positive, got " + std::to_string(decay_steps)));
  Graph& g = *global_step.graph();
  NameScope scope(g, name);
  DType t = learning_rate.is_tensor() ? learning_rate.tensor().dtype() : DType::f32;
  if (!is_floating(t)) throw Error(invalid_argument(name + ": the learning rate must be float32 or float64"));
  Output lr = learning_rate.is_tensor() ? learning_rate.tensor() : scalar_like(g, t, learning_rate.value(), "learning_rate");
  Output p;
  if (staircase && is_integer(global_step.dtype())) {
    // Integer division truncates, which is floor for the non-negative step.
    p = cast(global_step / scalar_like(g, global_step.dtype(), static_cast<double>(decay_steps), "decay_steps"), t, "p");
  } else {
    p = cast(global_step, t) / scalar_like(g, t, static_cast<double>(decay_steps), "decay_steps");
    if (staircase) p = cast(cast(p, DType::i64), t, "p");
  }
  return mul(lr, pow(scalar_like(g, t, decay_rate, "decay_rate"), p), "decayed");
}

namespace {

// sqrt(sum over tensors of sum(t^2)) in `t`'s dtype.
Output global_norm(Graph& g, const std::vector<Output>& ts, DType t) {
  std::vector<Output> sums;
  for (auto& x : ts) {
    Output xt = x.dtype() == t ? x : cast(x, t);
    sums.push_back(reduce_sum(square(xt)));
  }
  return sqrt(sums.size() == 1 ? sums[0] : add_n(sums), "global_norm");
}

}  // namespace

std::pair<std::vector<Output>, Output> clip_by_global_norm(const std::vector<Output>& grads, optim::Hyper clip_norm,
                                                           const std::string& name) {
  std::vector<Output> present;
  for (auto& x : grads)
    if (x.valid()) present.push_back(x);
  if (present.empty()) throw Error(invalid_argument(name + ": no gradients given"));
  for (auto& x : present)
    if (!is_floating(x.dtype()))
      throw Error(invalid_argument(name + ": gradient '" + x.node().name + "' is not float32 or float64"));
  Graph& g = *present[0].graph();
  NameScope scope(g, name);
  DType t = present[0].dtype();
  Output norm = global_norm(g, present, t);
  Output c = clip_norm.is_tensor() ? (clip_norm.tensor().dtype() == t ? clip_norm.tensor() : cast(clip_norm.tensor(), t))
                                   : scalar_like(g, t, clip_norm.value(), "clip_norm");
  // TF's form: clip * min(1/norm, 1/clip) is 1 for a zero norm (1/0 = inf) and NaN for a
  // NaN norm, so a poisoned step shows up instead of being scaled to nothing.
  Output one = scalar_like(g, t, 1.0, "one");
  Output scale = mul(c, minimum(one / norm, one / c), "scale");
  std::vector<Output> out;
  for (auto& x : grads) {
    if (!x.valid()) {
      out.emplace_back();
      continue;
    }
    out.push_back(x * (x.dtype() == t ? scale : cast(scale, x.dtype())));
  }
  return {out, norm};
}

std::pair<optim::GradsAndVars, Output> clip_by_global_norm(const optim::GradsAndVars& grads_and_vars,
                                                           optim::Hyper clip_norm, const std::string& name) {
  std::vector<Output> ts;
  for (auto& [gr, v] : grads_and_vars) ts.push_back(gr.sparse() ? gr.values : gr.dense);
  auto [clipped, norm] = clip_by_global_norm(ts, std::move(clip_norm), name);
  optim::GradsAndVars out;
  for (size_t i = 0; i < grads_and_vars.size(); ++i) {
    Gradient gr = grads_and_vars[i].first;
    if (gr.sparse()) gr.values = clipped[i];
    else gr.dense = clipped[i];
    out.emplace_back(gr, grads_and_vars[i].second);
  }
  return {out, norm};
}

}  // namespace actorflow::train
