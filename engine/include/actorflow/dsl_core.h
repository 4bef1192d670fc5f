// The C++ DSL, part 1: sources (placeholders, constants, filled and random tensors;
// variables are in variables.h), state updates and grouping. Building a node that fails
// shape or dtype inference throws af::Error naming the node and its inputs.
#pragma once
#include "actorflow/api.h"
#include <string>
#include <vector>

#include "actorflow/graph.h"
#include "actorflow/variables.h"

AF_PUBLIC_BEGIN

namespace actorflow {

// A feedable input; unknown dims are -1.
Output placeholder(Graph& g, DType dtype, Shape shape = Shape::unknown_rank(), const std::string& name = "Placeholder");
// Like placeholder, but yields `dflt` when not fed.
Output placeholder_with_default(const Output& dflt, Shape shape, const std::string& name = "PlaceholderWithDefault");

Output constant(Graph& g, const Tensor& value, const std::string& name = "Const");
// Scalars by TF1's rule: a floating literal is float32, an int int32, a string a string.
// Other dtypes are asked for by name: constant(g, 0.5, f64) or constant<double>(g, 0.5).
Output constant(Graph& g, float value, const std::string& name = "Const");
Output constant(Graph& g, double value, const std::string& name = "Const");
Output constant(Graph& g, double value, DType dtype, const std::string& name = "Const");
Output constant(Graph& g, int value, const std::string& name = "Const");
Output constant(Graph& g, int64_t value, const std::string& name = "Const");
Output constant(Graph& g, const char* value, const std::string& name = "Const");
Output constant(Graph& g, const std::string& value, const std::string& name = "Const");
template <typename T>
  requires requires { DTypeOf<T>::value; }
Output constant(Graph& g, T value, const std::string& name = "Const") {
  return constant(g, Tensor::scalar<T>(value), name);
}
Output constant(Graph& g, const std::vector<float>& values, Shape shape, const std::string& name = "Const");
Output constant(Graph& g, const std::vector<int64_t>& values, Shape shape, const std::string& name = "Const");
// A scalar constant of `dtype` holding `value`.
Output scalar_like(Graph& g, DType dtype, double value, const std::string& name = "Const");

// Filled tensors (tf.zeros, tf.ones, tf.fill); the shape must be fully defined.
Output zeros(Graph& g, Shape shape, DType dtype = DType::f32, const std::string& name = "zeros");
Output ones(Graph& g, Shape shape, DType dtype = DType::f32, const std::string& name = "ones");
Output fill(Graph& g, Shape shape, double value, DType dtype = DType::f32, const std::string& name = "Fill");

// Random tensors (seed -1: derived from the graph seed and an op counter).
Output random_normal(Graph& g, Shape shape, double mean = 0, double stddev = 1, int64_t seed = -1,
                     DType dtype = DType::f32, const std::string& name = "RandomNormal");
Output random_uniform(Graph& g, Shape shape, double minval = 0, double maxval = 1, int64_t seed = -1,
                      DType dtype = DType::f32, const std::string& name = "RandomUniform");
Output truncated_normal(Graph& g, Shape shape, double mean = 0, double stddev = 1, int64_t seed = -1,
                        DType dtype = DType::f32, const std::string& name = "TruncatedNormal");

// The variable's value at the moment this op runs (after its control dependencies),
// where the variable's own output is its value when the step reached it.
Output read_variable(const Output& var, const std::string& name = "read");

// State updates on a variable output; each returns the new value.
Output assign(const Output& var, const Output& value, const std::string& name = "Assign");
Output assign_add(const Output& var, const Output& value, const std::string& name = "AssignAdd");
Output assign_sub(const Output& var, const Output& value, const std::string& name = "AssignSub");

Output identity(const Output& x, const std::string& name = "Identity");
Output stop_gradient(const Output& x, const std::string& name = "StopGradient");
Operation no_op(Graph& g, const std::string& name = "NoOp");
// A NoOp with control inputs on every given op: run it to run them all.
Operation group(Graph& g, const std::vector<Operation>& ops, const std::string& name = "group");

Output cast(const Output& x, DType dtype, const std::string& name = "Cast");
Output zeros_like(const Output& x, const std::string& name = "ZerosLike");
Output ones_like(const Output& x, const std::string& name = "OnesLike");
// The runtime shape of x as an i64 vector.
Output shape_of(const Output& x, const std::string& name = "Shape");

// The op of the "init_ops" collection, grouped: run it to initialize every variable.
Operation global_variables_initializer(Graph& g);

}  // namespace actorflow

AF_PUBLIC_END
