#include "actorflow/variables.h"

#include <optional>

#include <cmath>

#include "actorflow/dsl_core.h"
#include "core/tensor_slices.h"
#include "dsl/dsl_build.h"
#include "dsl/variable_build.h"

namespace actorflow {

using dsl::add;

// ---- initializers ----

namespace {
Initializer make_init(Initializer::Kind kind, DType dtype, double a = 0, double b = 1, int64_t seed = -1) {
  Initializer i;
  i.kind = kind;
  i.dtype = dtype;
  i.a = a;
  i.b = b;
  i.seed = seed;
  return i;
}
using K = Initializer::Kind;
}  // namespace

Initializer zeros_initializer(DType dtype) { return make_init(K::zeros, dtype); }
Initializer ones_initializer(DType dtype) { return make_init(K::ones, dtype); }
Initializer constant_initializer(double value, DType dtype) { return make_init(K::constant, dtype, value); }
Initializer constant_initializer(const Tensor& value) {
  if (!value.valid()) throw Error(invalid_argument("constant_initializer: the value is an empty tensor"));
  Initializer i = make_init(K::tensor, value.dtype());
  i.value = value;
  return i;
}
Initializer random_normal_initializer(double mean, double stddev, int64_t seed, DType dtype) {
  return make_init(K::random_normal, dtype, mean, stddev, seed);
}
Initializer random_uniform_initializer(double minval, double maxval, int64_t seed, DType dtype) {
  return make_init(K::random_uniform, dtype, minval, maxval, seed);
}
Initializer truncated_normal_initializer(double mean, double stddev, int64_t seed, DType dtype) {
  return make_init(K::truncated_normal, dtype, mean, stddev, seed);
}
Initializer glorot_uniform_initializer(int64_t seed, DType dtype) { return make_init(K::glorot_uniform, dtype, 0, 1, seed); }
Initializer glorot_normal_initializer(int64_t seed, DType dtype) { return make_init(K::glorot_normal, dtype, 0, 1, seed); }

namespace {

std::pair<double, double> fans(const Shape& s) {
  if (s.rank() < 1) return {1, 1};
  if (s.rank() == 1) return {static_cast<double>(s.dim(0)), static_cast<double>(s.dim(0))};
  double receptive = 1;
  for (int i = 0; i + 2 < s.rank(); ++i) receptive *= static_cast<double>(s.dim(i));
  return {receptive * static_cast<double>(s.dim(s.rank() - 2)), receptive * static_cast<double>(s.dim(s.rank() - 1))};
}

void require_defined(const Shape& shape, const std::string& what) {
  if (!shape.is_fully_defined())
    throw Error(invalid_argument(what + ": shape " + shape.to_string() + " is not fully defined"));
}

}  // namespace

namespace {

// The value for `shape`, with Glorot's scale taken from `fan_shape`: the whole variable's
// shape when `shape` is one shard of it, as TF scales by partition_info's full shape.
Output initial_value_scaled(Graph& g, const Initializer& init, const Shape& shape, const Shape& fan_shape,
                            const std::string& name) {
  require_defined(shape, "initializer '" + name + "'");
  NameScope scope(g, name);
  switch (init.kind) {
    case K::zeros: return fill(g, shape, 0.0, init.dtype, "zeros");
    case K::ones: return fill(g, shape, 1.0, init.dtype, "ones");
    case K::constant: return fill(g, shape, init.a, init.dtype, "value");
    case K::tensor: {
      auto value = init.value.reshaped(shape);
      if (!value.ok())
        throw Error(invalid_argument("constant_initializer '" + name + "': a " + init.value.type_string() +
                                     " value cannot fill shape " + shape.to_string()));
      return constant(g, *value, "value");
    }
    case K::random_normal: return random_normal(g, shape, init.a, init.b, init.seed, init.dtype, "random_normal");
    case K::random_uniform: return random_uniform(g, shape, init.a, init.b, init.seed, init.dtype, "random_uniform");
    case K::truncated_normal:
      return truncated_normal(g, shape, init.a, init.b, init.seed, init.dtype, "truncated_normal");
    case K::glorot_uniform: {
      auto [fi, fo] = fans(fan_shape);
      double limit = std::sqrt(6.0 / (fi + fo));
      return random_uniform(g, shape, -limit, limit, init.seed, init.dtype, "glorot_uniform");
    }
    case K::glorot_normal: {
      auto [fi, fo] = fans(fan_shape);
      // Keras: a normal truncated at 2 sigma, rescaled so the variance stays 2/(fi+fo).
      double stddev = std::sqrt(2.0 / (fi + fo)) / 0.87962566103423978;
      return truncated_normal(g, shape, 0.0, stddev, init.seed, init.dtype, "glorot_normal");
    }
  }
  throw Error(internal_error("unknown initializer kind"));
}

}  // namespace

Output initial_value(Graph& g, const Initializer& init, Shape shape, const std::string& name) {
  return initial_value_scaled(g, init, shape, shape, name);
}

Output initial_value_slice(Graph& g, const Initializer& init, const Shape& full, int axis, int64_t offset,
                           const Shape& part, const std::string& name) {
  if (init.kind != K::tensor) return initial_value_scaled(g, init, part, full, name);
  auto whole = init.value.reshaped(full);
  if (!whole.ok())
    throw Error(invalid_argument("constant_initializer '" + name + "': a " + init.value.type_string() +
                                 " value cannot fill shape " + full.to_string()));
  Initializer slice = init;
  slice.value = slice_along(*whole, axis, offset, part.dim(axis));
  return initial_value_scaled(g, slice, part, part, name);
}

// ---- variables ----

namespace {

Output variable_node(Graph& g, DType dtype, const Shape& shape, const std::string& name,
                     std::map<std::string, AttrValue> attrs = {}) {
  attrs["dtype"] = dtype;
  attrs["shape"] = shape;
  return add(g, "VariableV2", name, {}, std::move(attrs));
}

// The variable's "<full name>/Assign" init op from the value `make_value` builds in that
// scope, and its collections.
template <typename F>
Output attach_init(Graph& g, const Output& var, F make_value, bool trainable) {
  const std::string full = var.node().name;
  Output init_op;
  {
    // The initializer runs where the variable lives (TF colocates it): a variable on a
    // ps is initialized there, not computed on a worker and sent.
    std::optional<DeviceScope> on_var;
    if (!var.node().device.empty()) on_var.emplace(g, var.node().device);
    NameScope s(g, full + "/");
    init_op = add(g, "Assign", "Assign", {make_value()}, {{"variable", full}});
  }
  g.add_to_collection("variables", var.node_id());
  if (trainable) g.add_to_collection("trainable_variables", var.node_id());
  g.add_to_collection("init_ops", init_op.node_id());
  return var;
}

}  // namespace

Output add_variable(Graph& g, DType dtype, const Shape& shape, const std::string& name,
                    const std::function<Output()>& make_value, bool trainable,
                    std::map<std::string, AttrValue> extra_attrs) {
  Output var = variable_node(g, dtype, shape, name, std::move(extra_attrs));
  return attach_init(g, var, make_value, trainable);
}

Output variable(Graph& g, const Output& initial_value, const std::string& name, bool trainable) {
  throw_if_error(g.check_owns(initial_value, "variable '" + name + "': the initial value"));
  require_defined(initial_value.shape(), "variable '" + name + "': the initial value " + initial_value.name());
  Output var = variable_node(g, initial_value.dtype(), initial_value.shape(), name);
  return attach_init(g, var, [&] { return initial_value; }, trainable);
}

Output variable(Graph& g, const Tensor& initial_value, const std::string& name, bool trainable) {
  if (!initial_value.valid()) throw Error(invalid_argument("variable '" + name + "': the initial value is an empty tensor"));
  Output var = variable_node(g, initial_value.dtype(), initial_value.shape(), name);
  return attach_init(g, var, [&] { return constant(g, initial_value, "initial_value"); }, trainable);
}

Output variable(Graph& g, Shape shape, const Initializer& init, const std::string& name, bool trainable) {
  require_defined(shape, "variable '" + name + "'");
  Output var = variable_node(g, init.dtype, shape, name);
  return attach_init(g, var, [&] { return initial_value(g, init, shape, "Initializer"); }, trainable);
}

Output get_variable(Graph& g, const std::string& name, Shape shape, const Initializer& init, bool trainable) {
  const Graph::VarScope& scope = g.variable_scope();
  const std::string full = scope.name.empty() ? name : scope.name + "/" + name;
  const std::string what = "get_variable '" + full + "': ";
  if (g.stored_variable(full + "/part_0") >= 0)
    throw Error(Status(Code::already_exists,
                       what + "a partitioned variable of that name exists; get it with its partitioner"));
  if (int id = g.stored_variable(full); id >= 0) {
    if (scope.reuse != VarReuse::reuse && scope.reuse != VarReuse::auto_reuse)
      throw Error(Status(Code::already_exists,
                         what + "the variable already exists; open its VariableScope with reuse = true (or "
                                "VarReuse::auto_reuse) to share it"));
    Output var(&g, id);
    if (var.shape() != shape || var.dtype() != init.dtype)
      throw Error(invalid_argument(what + "trying to share the variable of " + dtype_name(var.dtype()) +
                                   var.shape().to_string() + " as " + dtype_name(init.dtype) + shape.to_string()));
    return var;
  }
  if (scope.reuse == VarReuse::reuse)
    throw Error(not_found(what + "the variable does not exist, or was not made by get_variable; a VariableScope "
                                 "with reuse = true only shares existing variables (VarReuse::auto_reuse also "
                                 "creates missing ones)"));
  require_defined(shape, what.substr(0, what.size() - 2));
  if (g.peek_unique_name(full) != full)
    throw Error(Status(Code::already_exists, what + "the name is taken by a node get_variable did not make"));
  Output var;
  {
    // Variable scopes alone name the variable: the enclosing name scopes do not count.
    NameScope root(g, "/");
    var = variable_node(g, init.dtype, shape, full);
  }
  attach_init(g, var, [&] { return initial_value(g, init, shape, "Initializer"); }, trainable);
  g.store_variable(full, var.node_id());
  return var;
}

VariableScope::VariableScope(Graph& g, const std::string& name, VarReuse reuse, bool unique) : g_(g) {
  const std::string& parent = g.variable_scope().name;
  const size_t prefix = parent.empty() ? 0 : parent.size() + 1;
  full_ = g.push_variable_scope(name, reuse, unique);
  if (!name.empty()) names_.emplace(g, full_.substr(prefix));
}


Output is_variable_initialized(const Output& var, const std::string& name) {
  dsl::require_variable(var, "is_variable_initialized '" + name + "'");
  Graph& g = dsl::graph_of(var);
  // Asked where the variable lives, also inside another task's DeviceScope.
  std::optional<DeviceScope> on_var;
  if (!var.node().device.empty()) on_var.emplace(g, var.node().device);
  return add(g, "IsVariableInitialized", name, {}, {{"variable", var.node().name}});
}

Output report_uninitialized_variables(Graph& g, const std::vector<Output>& vars, const std::string& name) {
  std::vector<Output> list = vars;
  if (vars.empty())
    for (int id : g.collection("variables")) list.emplace_back(&g, id);
  if (list.empty()) return constant(g, Tensor(DType::string, Shape{0}), name);
  std::vector<Output> flags;
  AttrValue::Strings names;
  {
    NameScope scope(g, name + "/");
    for (const Output& v : list) {
      throw_if_error(g.check_owns(v, "report_uninitialized_variables '" + name + "'"));
      flags.push_back(is_variable_initialized(v, "is_initialized"));
      names.push_back(v.node().name);
    }
  }
  return add(g, "ReportUninitialized", name, std::move(flags), {{"names", std::move(names)}});
}

}  // namespace actorflow
