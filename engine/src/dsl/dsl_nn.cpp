#include "actorflow/dsl_nn.h"

#include <cmath>

#include "actorflow/dsl_array.h"
#include "actorflow/dsl_core.h"
#include "actorflow/dsl_math.h"
#include "dsl/dsl_build.h"

namespace actorflow {

using dsl::add;
using dsl::graph_of;

namespace {

using dsl::seed_attrs;

AttrValue::Ints ints(std::vector<int64_t> v) { return AttrValue::Ints(std::move(v)); }

Operation add_multi(Graph& g, const std::string& op, const std::string& name, std::vector<Output> inputs,
                    std::map<std::string, AttrValue> attrs) {
  NodeSpec spec;
  spec.op = op;
  spec.name = name;
  spec.inputs = std::move(inputs);
  spec.attrs = std::move(attrs);
  return dsl::add_op(g, std::move(spec));
}

FusedBatchNormOutputs fused_impl(const Output& x, const Output& scale, const Output& offset, const Output& mean,
                                 const Output& variance, const Output* flag, double epsilon, bool is_training,
                                 const std::string& name) {
  std::vector<Output> in = {x, scale, offset, mean, variance};
  if (flag) in.push_back(*flag);
  Operation op = add_multi(graph_of(x), "FusedBatchNorm", name, std::move(in),
                           {{"epsilon", epsilon}, {"is_training", is_training}});
  return {op.output(0), op.output(1), op.output(2)};
}

Output batch_norm_impl(const Output& x, const Output* flag, bool training, const BatchNormOptions& o) {
  Graph& g = graph_of(x);
  const std::string what = "batch_norm '" + o.name + "': ";
  if (!is_floating(x.dtype())) throw Error(invalid_argument(what + "needs a float input, got " + x.name() + " of " + dtype_name(x.dtype())));
  const Shape& s = x.shape();
  if (!s.has_rank() || s.rank() < 2 || s.dim(s.rank() - 1) < 0)
    throw Error(invalid_argument(what + "input " + x.name() + " " + s.to_string() +
                                 " needs a known rank >= 2 and a known channel (last) dim"));
  if (!(o.decay >= 0 && o.decay <= 1)) throw Error(invalid_argument(what + "decay must be in [0, 1]"));
  const int64_t c = s.dim(s.rank() - 1);
  const DType t = x.dtype();
  // Through get_variable, so a reusing VariableScope shares the statistics too.
  VariableScope scope = VariableScope::unique(g, o.name);
  Output gamma = o.scale ? get_variable(g, "gamma", {c}, ones_initializer(t))
                         : constant(g, Tensor::filled(t, {c}, 1.0), "gamma");
  Output beta = o.center ? get_variable(g, "beta", {c}, zeros_initializer(t))
                         : constant(g, Tensor::filled(t, {c}, 0.0), "beta");
  Output moving_mean = get_variable(g, "moving_mean", {c}, zeros_initializer(t), false);
  Output moving_var = get_variable(g, "moving_variance", {c}, ones_initializer(t), false);
  FusedBatchNormOutputs bn = fused_impl(x, gamma, beta, moving_mean, moving_var, flag, o.epsilon, flag ? true : training,
                                        "FusedBatchNorm");
  if (!flag && !training) return bn.y;
  // TF's assign_moving_average: moving -= (moving - batch) * (1 - decay). When the op
  // passes the moving statistics through (inference), this subtracts exactly zero.
  Output rate = scalar_like(g, t, 1.0 - o.decay, "one_minus_decay");
  Operation upd_mean = assign_sub(moving_mean, (moving_mean - bn.batch_mean) * rate, "update_moving_mean");
  Operation upd_var = assign_sub(moving_var, (moving_var - bn.batch_variance) * rate, "update_moving_variance");
  g.add_to_collection("update_ops", upd_mean.node_id());
  g.add_to_collection("update_ops", upd_var.node_id());
  if (!o.attach_updates) return bn.y;
  ControlDependencies deps(g, {upd_mean, upd_var});
  return identity(bn.y, "output");
}

Output dropout_impl(const Output& x, double keep_prob, const Output* flag, int64_t seed, const std::string& name) {
  Graph& g = graph_of(x);
  if (!(keep_prob > 0 && keep_prob <= 1))
    throw Error(invalid_argument("dropout '" + name + "': keep_prob must be in (0, 1], got " + std::to_string(keep_prob)));
  auto attrs = seed_attrs(g, seed);
  attrs["keep_prob"] = keep_prob;
  std::vector<Output> in = {x};
  if (flag) in.push_back(*flag);
  return add_multi(g, "Dropout", name, std::move(in), std::move(attrs)).output(0);
}

}  // namespace

Output conv2d(const Output& x, const Output& filter, std::vector<int64_t> strides, const std::string& padding,
              const std::string& name) {
  return add(graph_of(x), "Conv2D", name, {x, filter}, {{"strides", ints(std::move(strides))}, {"padding", padding}});
}

Output max_pool2d(const Output& x, std::vector<int64_t> ksize, std::vector<int64_t> strides, const std::string& padding,
                  const std::string& name) {
  return add(graph_of(x), "MaxPool", name, {x},
             {{"ksize", ints(std::move(ksize))}, {"strides", ints(std::move(strides))}, {"padding", padding}});
}

Output avg_pool2d(const Output& x, std::vector<int64_t> ksize, std::vector<int64_t> strides, const std::string& padding,
                  const std::string& name) {
  return add(graph_of(x), "AvgPool", name, {x},
             {{"ksize", ints(std::move(ksize))}, {"strides", ints(std::move(strides))}, {"padding", padding}});
}

FusedBatchNormOutputs fused_batch_norm(const Output& x, const Output& scale, const Output& offset, const Output& mean,
                                       const Output& variance, double epsilon, bool is_training, const std::string& name) {
  return fused_impl(x, scale, offset, mean, variance, nullptr, epsilon, is_training, name);
}

FusedBatchNormOutputs fused_batch_norm(const Output& x, const Output& scale, const Output& offset, const Output& mean,
                                       const Output& variance, const Output& is_training, double epsilon,
                                       const std::string& name) {
  return fused_impl(x, scale, offset, mean, variance, &is_training, epsilon, true, name);
}

Output batch_norm(const Output& x, bool training, const BatchNormOptions& opts) {
  return batch_norm_impl(x, nullptr, training, opts);
}

Output batch_norm(const Output& x, const Output& training, const BatchNormOptions& opts) {
  return batch_norm_impl(x, &training, true, opts);
}

Output dropout(const Output& x, double keep_prob, bool training, int64_t seed, const std::string& name) {
  if (!training) {
    graph_of(x);
    return x;
  }
  return dropout_impl(x, keep_prob, nullptr, seed, name);
}

Output dropout(const Output& x, double keep_prob, const Output& training, int64_t seed, const std::string& name) {
  return dropout_impl(x, keep_prob, &training, seed, name);
}

Output flatten(const Output& x, const std::string& name) {
  graph_of(x);
  const Shape& shape = x.shape();
  if (!shape.has_rank() || shape.rank() < 1)
    throw Error(invalid_argument("flatten '" + name + "': input " + x.name() + " " + shape.to_string() +
                                 " needs a known rank >= 1"));
  int64_t rest = 1;
  bool rest_known = true;
  for (int i = 1; i < shape.rank(); ++i) {
    if (shape.dim(i) < 0) rest_known = false;
    else rest *= shape.dim(i);
  }
  // [?, 0] cannot infer its -1; a known batch dim can say it.
  if (rest_known && (rest > 0 || shape.dim(0) < 0)) return reshape(x, Shape{-1, rest}, name);
  if (shape.dim(0) >= 0) return reshape(x, Shape{shape.dim(0), rest_known ? rest : -1}, name);
  throw Error(invalid_argument("flatten '" + name + "': input " + x.name() + " " + shape.to_string() +
                               " has an unknown batch dim and unknown trailing dims; one of them must be known"));
}

Output embedding_lookup(const Output& params, const Output& ids, const std::string& name) {
  return gather(params, ids, 0, name);
}

}  // namespace actorflow
