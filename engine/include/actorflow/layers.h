// Layers in the style of tf.layers: each call opens a variable scope (made unique:
// "dense", "dense_1", ...; see VariableScope::unique) and creates its variables with
// get_variable under it, e.g. "dense/kernel" and "dense/bias". As in TF1, the enclosing
// variable scopes name the variables and name scopes do not, and a model built again
// under a reusing VariableScope shares the first build's variables. Weights start
// glorot-uniform (seeded by the graph-seed rule), biases at zero; variables take the
// input's dtype.
#pragma once
#include "actorflow/api.h"
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "actorflow/dsl_nn.h"
#include "actorflow/graph.h"

AF_PUBLIC_BEGIN

namespace actorflow::layers {

enum class Act { none, relu, sigmoid, tanh, softmax };

// What follows a layer's affine part: a named activation or any Output -> Output callable.
class Activation {
 public:
  Activation() = default;
  Activation(Act a) : act_(a) {}  // NOLINT: implicit by design
  template <typename F, typename = std::enable_if_t<std::is_invocable_r_v<Output, F, const Output&> &&
                                                    !std::is_same_v<std::decay_t<F>, Activation>>>
  Activation(F f) : fn_(std::move(f)) {}  // NOLINT: implicit by design
  Output operator()(const Output& x) const;

 private:
  Act act_ = Act::none;
  std::function<Output(const Output&)> fn_;
};

// activation(x · kernel + bias) with kernel [in, units] over x's last dim (leading dims
// are batch dims); the bias goes through bias_add (losses.h), as in tf.layers.
// Variables "<scope>/kernel" and "<scope>/bias".
Output dense(const Output& x, int64_t units, Activation activation = {}, const std::string& name = "dense",
             bool use_bias = true);

// activation(conv2d(x, kernel) + bias), x NHWC with known channels, kernel
// [kh, kw, C, filters]. Variables "<scope>/kernel" and "<scope>/bias".
Output conv2d(const Output& x, int64_t filters, std::vector<int64_t> kernel_size, std::vector<int64_t> strides = {1, 1},
              const std::string& padding = "VALID", Activation activation = {}, const std::string& name = "conv2d",
              bool use_bias = true);

Output max_pool2d(const Output& x, std::vector<int64_t> pool_size, std::vector<int64_t> strides,
                  const std::string& padding = "VALID", const std::string& name = "max_pooling2d");

// Batch normalization over the last axis (tf.layers.batch_normalization): variables
// "<scope>/gamma", "<scope>/beta", "<scope>/moving_mean", "<scope>/moving_variance".
// momentum is the moving averages' decay. The moving-average updates are attached to the
// output as control dependencies (and listed in the "update_ops" collection); see
// af::batch_norm for the details of both modes.
Output batch_norm(const Output& x, bool training, double momentum = 0.99, double epsilon = 1e-3,
                  const std::string& name = "batch_normalization");
Output batch_norm(const Output& x, const Output& training, double momentum = 0.99, double epsilon = 1e-3,
                  const std::string& name = "batch_normalization");

// tf.layers.dropout: drops a fraction `rate` (= 1 - keep_prob) of the elements, only when
// training (a bool, or a bool scalar fed at run time). Note tf.layers' default: off.
Output dropout(const Output& x, double rate = 0.5, bool training = false, int64_t seed = -1,
               const std::string& name = "dropout");
Output dropout(const Output& x, double rate, const Output& training, int64_t seed = -1,
               const std::string& name = "dropout");

}  // namespace actorflow::layers

AF_PUBLIC_END
