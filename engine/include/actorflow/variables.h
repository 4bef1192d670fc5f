// Variables, TF1-style: tf.Variable from an initial value, initializers, and
// get_variable with variable scopes, so that a model built twice under a reusing scope
// shares its weights.
#pragma once
#include "actorflow/api.h"
#include <optional>
#include <string>
#include <vector>

#include "actorflow/graph.h"

AF_PUBLIC_BEGIN

namespace actorflow {

// How a variable gets its first value (TF1's tf.*_initializer). The shape comes from
// the variable: get_variable's or variable()'s shape argument.
struct Initializer {
  enum class Kind { zeros, ones, constant, random_normal, random_uniform, truncated_normal, glorot_uniform, glorot_normal, tensor };
  Kind kind = Kind::zeros;
  DType dtype = DType::f32;
  double a = 0;  // value / mean / minval
  double b = 1;  // stddev / maxval
  int64_t seed = -1;
  Tensor value;  // for Kind::tensor
};
Initializer zeros_initializer(DType dtype = DType::f32);
Initializer ones_initializer(DType dtype = DType::f32);
Initializer constant_initializer(double value, DType dtype = DType::f32);
// A fixed value; the variable's shape must hold as many elements.
Initializer constant_initializer(const Tensor& value);
Initializer random_normal_initializer(double mean = 0, double stddev = 1, int64_t seed = -1, DType dtype = DType::f32);
Initializer random_uniform_initializer(double minval = 0, double maxval = 1, int64_t seed = -1, DType dtype = DType::f32);
Initializer truncated_normal_initializer(double mean = 0, double stddev = 1, int64_t seed = -1,
                                         DType dtype = DType::f32);
// Xavier/Glorot: uniform in ±sqrt(6 / (fan_in + fan_out)), or a truncated normal of the
// same variance. glorot_uniform / glorot_normal are the Keras names of the same things.
Initializer glorot_uniform_initializer(int64_t seed = -1, DType dtype = DType::f32);
Initializer glorot_normal_initializer(int64_t seed = -1, DType dtype = DType::f32);
inline Initializer glorot_uniform(int64_t seed = -1, DType dtype = DType::f32) { return glorot_uniform_initializer(seed, dtype); }
inline Initializer glorot_normal(int64_t seed = -1, DType dtype = DType::f32) { return glorot_normal_initializer(seed, dtype); }

// Builds the initializer's value for `shape` as graph nodes under the name scope `name`.
Output initial_value(Graph& g, const Initializer& init, Shape shape, const std::string& name = "Initializer");

// tf.Variable(initial_value): a VariableV2 node (its output is the variable's value) and
// an "<name>/Assign" init op from `initial_value`, which must have a fully defined shape.
// Recorded in the "variables" (and "trainable_variables") and "init_ops" collections.
// The name follows the name scope, made unique like any node's.
Output variable(Graph& g, const Output& initial_value, const std::string& name = "Variable", bool trainable = true);
// tf.Variable(numpy_value): the initial value is a constant "<name>/initial_value".
Output variable(Graph& g, const Tensor& initial_value, const std::string& name = "Variable", bool trainable = true);
// A variable of `shape` whose initializer is built under "<name>/Initializer".
Output variable(Graph& g, Shape shape, const Initializer& init, const std::string& name = "Variable",
                bool trainable = true);

// tf.is_variable_initialized: a bool scalar, true once `var` holds a value. It runs where
// the variable lives, so in a cluster only the bool crosses the wire.
Output is_variable_initialized(const Output& var, const std::string& name = "IsVariableInitialized");
// tf.report_uninitialized_variables: a 1-D string tensor of the names of the variables in
// `vars` (default: the "variables" collection) that hold no value yet, in their order;
// empty once all are initialized. What a worker polls while the chief initializes or
// restores the ps tasks, without fetching any variable's value.
Output report_uninitialized_variables(Graph& g, const std::vector<Output>& vars = {},
                                      const std::string& name = "report_uninitialized_variables");

// tf.get_variable: the variable "<variable scope>/<name>" (name scopes do not count, as
// in TF1). Outside a reusing scope it is created, and a second get_variable of the same
// name fails; in a scope opened with reuse it is the existing variable (its shape and
// dtype must match), and a missing one fails; VarReuse::auto_reuse creates what is
// missing and shares what exists. The dtype is the initializer's.
Output get_variable(Graph& g, const std::string& name, Shape shape,
                    const Initializer& init = glorot_uniform_initializer(), bool trainable = true);

// tf.variable_scope: prefixes the names get_variable uses with `name` and opens a name
// scope of the same name for ops. reuse = true shares the variables get_variable asks
// for (see there); false inherits the enclosing scope's mode. An empty name re-enters
// the current scope, as TF's variable_scope(get_variable_scope(), reuse=True) does.
class VariableScope {
 public:
  VariableScope(Graph& g, const std::string& name, bool reuse = false)
      : VariableScope(g, name, reuse ? VarReuse::reuse : VarReuse::inherit) {}
  VariableScope(Graph& g, const std::string& name, VarReuse reuse) : VariableScope(g, name, reuse, false) {}
  // The scope a layer opens: `base` made unique among the scopes opened under the
  // current one since it was entered ("dense", "dense_1", ...), so building a model again
  // under a reusing scope finds the same names.
  static VariableScope unique(Graph& g, const std::string& base) { return VariableScope(g, base, VarReuse::inherit, true); }
  ~VariableScope() { g_.pop_variable_scope(); }
  VariableScope(const VariableScope&) = delete;
  VariableScope& operator=(const VariableScope&) = delete;

  // The full name, e.g. "model/dense_1"; "" at the root.
  const std::string& name() const { return full_; }

 private:
  VariableScope(Graph& g, const std::string& name, VarReuse reuse, bool unique);
  Graph& g_;
  std::string full_;
  std::optional<NameScope> names_;
};

}  // namespace actorflow

AF_PUBLIC_END
