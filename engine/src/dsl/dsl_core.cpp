#include <cmath>

#include "actorflow/dsl_core.h"
#include "dsl/dsl_build.h"

namespace actorflow {

using dsl::add;
using dsl::graph_of;
using dsl::seed_attrs;

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
Output constant(Graph& g, double v, const std::string& name) { return constant(g, Tensor::scalar(v), name); }
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
  return constant(g, Tensor::filled(dtype, Shape{}, value), name);
}

// ---- initializers ----

Initializer zeros(Shape shape, DType dtype) { Initializer i; i.kind = Initializer::Kind::zeros; i.shape = std::move(shape); i.dtype = dtype; return i; }
Initializer ones(Shape shape, DType dtype) { Initializer i; i.kind = Initializer::Kind::ones; i.shape = std::move(shape); i.dtype = dtype; return i; }
Initializer constant_init(double value, Shape shape, DType dtype) {
  Initializer i; i.kind = Initializer::Kind::constant; i.shape = std::move(shape); i.dtype = dtype; i.a = value; return i;
}
Initializer tensor_init(const Tensor& value) {
  Initializer i; i.kind = Initializer::Kind::tensor; i.shape = value.shape(); i.dtype = value.dtype(); i.value = value; return i;
}
Initializer random_normal(Shape shape, double mean, double stddev, int64_t seed) {
  Initializer i; i.kind = Initializer::Kind::random_normal; i.shape = std::move(shape); i.a = mean; i.b = stddev; i.seed = seed; return i;
}
Initializer random_uniform(Shape shape, double minval, double maxval, int64_t seed) {
  Initializer i; i.kind = Initializer::Kind::random_uniform; i.shape = std::move(shape); i.a = minval; i.b = maxval; i.seed = seed; return i;
}
Initializer truncated_normal(Shape shape, double mean, double stddev, int64_t seed) {
  Initializer i; i.kind = Initializer::Kind::truncated_normal; i.shape = std::move(shape); i.a = mean; i.b = stddev; i.seed = seed; return i;
}
Initializer glorot_uniform(Shape shape, int64_t seed) {
  Initializer i; i.kind = Initializer::Kind::glorot_uniform; i.shape = std::move(shape); i.seed = seed; return i;
}
Initializer glorot_normal(Shape shape, int64_t seed) {
  Initializer i; i.kind = Initializer::Kind::glorot_normal; i.shape = std::move(shape); i.seed = seed; return i;
}

namespace {

std::pair<double, double> fans(const Shape& s) {
  if (s.rank() < 1) return {1, 1};
  if (s.rank() == 1) return {static_cast<double>(s.dim(0)), static_cast<double>(s.dim(0))};
  double receptive = 1;
  for (int i = 0; i + 2 < s.rank(); ++i) receptive *= static_cast<double>(s.dim(i));
  return {receptive * static_cast<double>(s.dim(s.rank() - 2)), receptive * static_cast<double>(s.dim(s.rank() - 1))};
}

Output random_op(Graph& g, const std::string& op, Shape shape, const std::string& ka, double a, const std::string& kb,
                 double b, int64_t seed, DType dtype, const std::string& name) {
  auto attrs = seed_attrs(g, seed);
  attrs["shape"] = std::move(shape);
  attrs["dtype"] = dtype;
  attrs[ka] = a;
  attrs[kb] = b;
  return add(g, op, name, {}, std::move(attrs));
}

}  // namespace

Output random_normal_op(Graph& g, Shape shape, double mean, double stddev, int64_t seed, DType dtype) {
  return random_op(g, "RandomNormal", std::move(shape), "mean", mean, "stddev", stddev, seed, dtype, "RandomNormal");
}
Output random_uniform_op(Graph& g, Shape shape, double minval, double maxval, int64_t seed, DType dtype) {
  return random_op(g, "RandomUniform", std::move(shape), "minval", minval, "maxval", maxval, seed, dtype, "RandomUniform");
}
Output truncated_normal_op(Graph& g, Shape shape, double mean, double stddev, int64_t seed, DType dtype) {
  return random_op(g, "TruncatedNormal", std::move(shape), "mean", mean, "stddev", stddev, seed, dtype, "TruncatedNormal");
}

Output initial_value(Graph& g, const Initializer& init, const std::string& name) {
  if (!init.shape.is_fully_defined())
    throw Error(invalid_argument("initializer '" + name + "': shape " + init.shape.to_string() + " is not fully defined"));
  NameScope scope(g, name);
  using K = Initializer::Kind;
  switch (init.kind) {
    case K::zeros: return fill(g, init.shape, 0.0, init.dtype, "zeros");
    case K::ones: return fill(g, init.shape, 1.0, init.dtype, "ones");
    case K::constant: return fill(g, init.shape, init.a, init.dtype, "value");
    case K::tensor: return constant(g, init.value, "value");
    case K::random_normal: return random_op(g, "RandomNormal", init.shape, "mean", init.a, "stddev", init.b, init.seed, init.dtype, "random_normal");
    case K::random_uniform: return random_op(g, "RandomUniform", init.shape, "minval", init.a, "maxval", init.b, init.seed, init.dtype, "random_uniform");
    case K::truncated_normal: return random_op(g, "TruncatedNormal", init.shape, "mean", init.a, "stddev", init.b, init.seed, init.dtype, "truncated_normal");
    case K::glorot_uniform: {
      auto [fi, fo] = fans(init.shape);
      double limit = std::sqrt(6.0 / (fi + fo));
      return random_op(g, "RandomUniform", init.shape, "minval", -limit, "maxval", limit, init.seed, init.dtype, "glorot_uniform");
    }
    case K::glorot_normal: {
      auto [fi, fo] = fans(init.shape);
      // Keras: a normal truncated at 2 sigma, rescaled so the variance stays 2/(fi+fo).
      double stddev = std::sqrt(2.0 / (fi + fo)) / 0.87962566103423978;
      return random_op(g, "TruncatedNormal", init.shape, "mean", 0.0, "stddev", stddev, init.seed, init.dtype, "glorot_normal");
    }
  }
  throw Error(internal_error("unknown initializer kind"));
}

Output variable(Graph& g, const Initializer& init, const std::string& name, bool trainable) {
  if (!init.shape.is_fully_defined())
    throw Error(invalid_argument("variable '" + name + "': shape " + init.shape.to_string() + " is not fully defined"));
  Output var = add(g, "VariableV2", name, {}, {{"dtype", init.dtype}, {"shape", init.shape}});
  const std::string full = var.node().name;
  // The initializer and its assign live in a scope named like the variable.
  Output init_op;
  {
    NameScope s(g, full.substr(g.current_name_scope().size()));
    Output value = initial_value(g, init, "Initializer");
    init_op = add(g, "Assign", "Assign", {value}, {{"variable", full}});
  }
  g.add_to_collection("variables", var.node_id());
  if (trainable) g.add_to_collection("trainable_variables", var.node_id());
  g.add_to_collection("init_ops", init_op.node_id());
  return var;
}

namespace {
Output update(const std::string& op, const Output& var, const Output& value, const std::string& name) {
  if (!var.valid() || var.node().op != "VariableV2")
    throw Error(invalid_argument(op + " '" + name + "': the first argument must be a variable, got '" +
                                 (var.valid() ? var.node().name + "' (" + var.node().op + ")" : std::string("<empty>'"))));
  return add(graph_of(var), op, name, {value}, {{"variable", var.node().name}});
}
}  // namespace

Output read_variable(const Output& var, const std::string& name) {
  if (!var.valid() || var.node().op != "VariableV2")
    throw Error(invalid_argument("read_variable '" + name + "': the argument must be a variable"));
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
