#include "actorflow/layers.h"

#include "actorflow/dsl_core.h"
#include "actorflow/dsl_math.h"
#include "actorflow/losses.h"
#include "dsl/dsl_build.h"

namespace actorflow::layers {

Output Activation::operator()(const Output& x) const {
  if (fn_) return fn_(x);
  switch (act_) {
    case Act::none: return x;
    case Act::relu: return actorflow::relu(x);
    case Act::sigmoid: return actorflow::sigmoid(x);
    case Act::tanh: return actorflow::tanh(x);
    case Act::softmax: return actorflow::softmax(x);
  }
  return x;
}

namespace {

// The size of x's last dim, which sizes a layer's variables; must be known.
int64_t last_dim(const Output& x, const std::string& layer, const char* what) {
  dsl::graph_of(x);
  if (!is_floating(x.dtype()))
    throw Error(invalid_argument(layer + ": needs a float input, got " + x.name() + " of " + dtype_name(x.dtype())));
  const Shape& s = x.shape();
  if (!s.has_rank() || s.rank() < 1 || s.dim(s.rank() - 1) < 0)
    throw Error(invalid_argument(layer + ": the " + what + " (last dim) of input " + x.name() + " " + s.to_string() +
                                 " must be known"));
  return s.dim(s.rank() - 1);
}

}  // namespace

Output dense(const Output& x, int64_t units, Activation activation, const std::string& name, bool use_bias) {
  const int64_t in = last_dim(x, "dense '" + name + "'", "feature size");
  if (units < 1) throw Error(invalid_argument("dense '" + name + "': units must be positive, got " + std::to_string(units)));
  Graph& g = *x.graph();
  VariableScope scope = VariableScope::unique(g, name);
  Output kernel = get_variable(g, "kernel", {in, units}, glorot_uniform_initializer(-1, x.dtype()));
  Output y = matmul(x, kernel, false, false, "MatMul");
  if (use_bias) y = bias_add(y, get_variable(g, "bias", {units}, zeros_initializer(x.dtype())));
  return activation(y);
}

Output conv2d(const Output& x, int64_t filters, std::vector<int64_t> kernel_size, std::vector<int64_t> strides,
              const std::string& padding, Activation activation, const std::string& name, bool use_bias) {
  const std::string what = "conv2d '" + name + "'";
  const int64_t c = last_dim(x, what, "channel count");
  if (filters < 1) throw Error(invalid_argument(what + ": filters must be positive, got " + std::to_string(filters)));
  if (kernel_size.size() != 2 || kernel_size[0] < 1 || kernel_size[1] < 1)
    throw Error(invalid_argument(what + ": kernel_size must be two positive sizes {kh, kw}"));
  Graph& g = *x.graph();
  VariableScope scope = VariableScope::unique(g, name);
  Output kernel = get_variable(g, "kernel", {kernel_size[0], kernel_size[1], c, filters},
                               glorot_uniform_initializer(-1, x.dtype()));
  Output y = actorflow::conv2d(x, kernel, std::move(strides), padding, "Conv2D");
  if (use_bias) y = bias_add(y, get_variable(g, "bias", {filters}, zeros_initializer(x.dtype())));
  return activation(y);
}

Output max_pool2d(const Output& x, std::vector<int64_t> pool_size, std::vector<int64_t> strides, const std::string& padding,
                  const std::string& name) {
  return actorflow::max_pool2d(x, std::move(pool_size), std::move(strides), padding, name);
}

namespace {
BatchNormOptions bn_options(double momentum, double epsilon, const std::string& name) {
  BatchNormOptions o;
  o.decay = momentum;
  o.epsilon = epsilon;
  o.name = name;
  return o;
}
}  // namespace

Output batch_norm(const Output& x, bool training, double momentum, double epsilon, const std::string& name) {
  return actorflow::batch_norm(x, training, bn_options(momentum, epsilon, name));
}

Output batch_norm(const Output& x, const Output& training, double momentum, double epsilon, const std::string& name) {
  return actorflow::batch_norm(x, training, bn_options(momentum, epsilon, name));
}

Output dropout(const Output& x, double rate, bool training, int64_t seed, const std::string& name) {
  if (!(rate >= 0 && rate < 1))
    throw Error(invalid_argument("dropout '" + name + "': rate must be in [0, 1), got " + std::to_string(rate)));
  return actorflow::dropout(x, 1.0 - rate, training, seed, name);
}

Output dropout(const Output& x, double rate, const Output& training, int64_t seed, const std::string& name) {
  if (!(rate >= 0 && rate < 1))
    throw Error(invalid_argument("dropout '" + name + "': rate must be in [0, 1), got " + std::to_string(rate)));
  return actorflow::dropout(x, 1.0 - rate, training, seed, name);
}

}  // namespace actorflow::layers
