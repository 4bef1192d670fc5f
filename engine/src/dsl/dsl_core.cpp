#include "actorflow/dsl_core.h"
#include "dsl/dsl_build.h"

namespace actorflow {

using dsl::add;
using dsl::graph_of;

Output placeholder(Graph& g, DType dtype, Shape shape, const std::string& name) {
  return add(g, "Placeholder", name, {}, {{"dtype", dtype}, {"shape", std::move(shape)}});
}

Output placeholder_with_default(const Output& dflt, Shape shape, const std::string& name) {
  return add(graph_of(dflt), "PlaceholderWithDefault", name, {dflt}, {{"shape", std::move(shape)}});
}

Output constant(Graph& g, const Tensor& value, const std::string& name) {
  if (!value.valid()) throw Error(invalid_argument("constant '" + name + "': the value is an empty tensor"));
  return add(g, "Const", name, {}, {{"value", value}, {"dtype", value.dtype()}});
}
Output constant(Graph& g, float v, const std::string& name) { return constant(g, Tensor::scalar(v), name); }
Output constant(Graph& g, double v, const std::string& name) { return constant(g, Tensor::scalar(static_cast<float>(v)), name); }
Output constant(Graph& g, double v, DType dtype, const std::string& name) { return scalar_like(g, dtype, v, name); }
Output constant(Graph& g, int v, const std::string& name) { return constant(g, Tensor::scalar(int32_t{v}), name); }
Output constant(Graph& g, int64_t v, const std::string& name) { return constant(g, Tensor::scalar(v), name); }
Output constant(Graph& g, const char* v, const std::string& name) { return constant(g, Tensor::scalar(std::string(v)), name); }
Output constant(Graph& g, const std::string& v, const std::string& name) { return constant(g, Tensor::scalar(v), name); }
Output constant(Graph& g, const std::vector<float>& v, Shape shape, const std::string& name) {
  return constant(g, Tensor::from_vector(v, std::move(shape)), name);
}
Output constant(Graph& g, const std::vector<int64_t>& v, Shape shape, const std::string& name) {
  return constant(g, Tensor::from_vector(v, std::move(shape)), name);
}
Output scalar_like(Graph& g, DType dtype, double value, const std::string& name) {
  if (dtype == DType::string || dtype == DType::invalid)
    throw Error(invalid_argument("constant '" + name + "': a number cannot be a " + dtype_name(dtype)));
  return constant(g, Tensor::filled(dtype, Shape{}, value), name);
}

Output zeros(Graph& g, Shape shape, DType dtype, const std::string& name) { return fill(g, std::move(shape), 0.0, dtype, name); }
Output ones(Graph& g, Shape shape, DType dtype, const std::string& name) { return fill(g, std::move(shape), 1.0, dtype, name); }

Output random_normal(Graph& g, Shape shape, double mean, double stddev, int64_t seed, DType dtype, const std::string& name) {
  return dsl::random_op(g, "RandomNormal", std::move(shape), "mean", mean, "stddev", stddev, seed, dtype, name);
}
Output random_uniform(Graph& g, Shape shape, double minval, double maxval, int64_t seed, DType dtype,
                      const std::string& name) {
  return dsl::random_op(g, "RandomUniform", std::move(shape), "minval", minval, "maxval", maxval, seed, dtype, name);
}
Output truncated_normal(Graph& g, Shape shape, double mean, double stddev, int64_t seed, DType dtype,
                        const std::string& name) {
  return dsl::random_op(g, "TruncatedNormal", std::move(shape), "mean", mean, "stddev", stddev, seed, dtype, name);
}

namespace {
Output update(const std::string& op, const Output& var, const Output& value, const std::string& name) {
  dsl::require_variable(var, op + " '" + name + "'", "the first argument");
  return add(graph_of(var), op, name, {value}, {{"variable", var.node().name}});
}
}  // namespace

Output read_variable(const Output& var, const std::string& name) {
  dsl::require_variable(var, "read_variable '" + name + "'");
  return add(graph_of(var), "ReadVariable", name, {}, {{"variable", var.node().name}});
}

Output assign(const Output& var, const Output& value, const std::string& name) { return update("Assign", var, value, name); }
Output assign_add(const Output& var, const Output& value, const std::string& name) { return update("AssignAdd", var, value, name); }
Output assign_sub(const Output& var, const Output& value, const std::string& name) { return update("AssignSub", var, value, name); }

Output identity(const Output& x, const std::string& name) { return add(graph_of(x), "Identity", name, {x}); }
Output stop_gradient(const Output& x, const std::string& name) { return add(graph_of(x), "StopGradient", name, {x}); }

Operation no_op(Graph& g, const std::string& name) {
  NodeSpec spec;
  spec.op = "NoOp";
  spec.name = name;
  return dsl::add_op(g, std::move(spec));
}

Operation group(Graph& g, const std::vector<Operation>& ops, const std::string& name) {
  NodeSpec spec;
  spec.op = "NoOp";
  spec.name = name;
  spec.control_inputs = ops;
  return dsl::add_op(g, std::move(spec));
}

Output cast(const Output& x, DType dtype, const std::string& name) { return add(graph_of(x), "Cast", name, {x}, {{"dtype", dtype}}); }
Output fill(Graph& g, Shape shape, double value, DType dtype, const std::string& name) {
  return add(g, "Fill", name, {}, {{"shape", std::move(shape)}, {"value", value}, {"dtype", dtype}});
}
Output zeros_like(const Output& x, const std::string& name) { return add(graph_of(x), "ZerosLike", name, {x}); }
Output ones_like(const Output& x, const std::string& name) { return add(graph_of(x), "OnesLike", name, {x}); }
Output shape_of(const Output& x, const std::string& name) { return add(graph_of(x), "Shape", name, {x}); }

Operation global_variables_initializer(Graph& g) {
  std::vector<Operation> ops;
  for (int id : g.collection("init_ops")) ops.emplace_back(&g, id);
  return group(g, ops, "init");
}

}  // namespace actorflow
