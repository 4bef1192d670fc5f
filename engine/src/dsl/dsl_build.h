// Internal to the DSL: add a node or throw af::Error (graph building is user code).
#pragma once
#include "actorflow/graph.h"

namespace actorflow::dsl {

inline Operation add_op(Graph& g, NodeSpec spec) {
  auto r = g.add_node(std::move(spec));
  if (!r.ok()) throw Error(r.status());
  return *r;
}

inline Output add(Graph& g, const std::string& op, const std::string& name, std::vector<Output> inputs,
                  std::map<std::string, AttrValue> attrs = {}) {
  NodeSpec spec;
  spec.op = op;
  spec.name = name;
  spec.inputs = std::move(inputs);
  spec.attrs = std::move(attrs);
  return add_op(g, std::move(spec)).output(0);
}

// Throws unless `var` is a variable's own output (VariableV2), as the ops that name a
// variable need; `what` is the op and its name ("assign 'w/Assign'"), `arg` the argument.
inline void require_variable(const Output& var, const std::string& what, const std::string& arg = "the argument") {
  if (!var.valid() || var.node().op != "VariableV2")
    throw Error(invalid_argument(what + ": " + arg + " must be a variable, got '" +
                                 (var.valid() ? var.node().name + "' (" + var.node().op + ")" : std::string("<empty>'"))));
}

inline Graph& graph_of(const Output& x) {
  if (!x.valid())
    throw Error(invalid_argument("an invalid Output was passed to an op: it was default-constructed and names no node"));
  return *x.graph();
}

// TF's rule for random ops: an op seed alone is combined with the graph seed (or a fixed
// default); a graph seed alone gives each op its own counter; neither means (0, 0), which
// the kernels read as "nondeterministic".
inline std::map<std::string, AttrValue> seed_attrs(Graph& g, int64_t seed) {
  int64_t s1 = 0, s2 = 0;
  if (seed >= 0) {
    s1 = g.seed() >= 0 ? g.seed() : 87654321;
    s2 = seed;
  } else if (g.seed() >= 0) {
    s1 = g.seed();
    s2 = g.next_op_seed();
  }
  return {{"seed", s1}, {"seed2", s2}};
}

// A RandomNormal / RandomUniform / TruncatedNormal node with its two parameters.
inline Output random_op(Graph& g, const std::string& op, Shape shape, const std::string& ka, double a,
                        const std::string& kb, double b, int64_t seed, DType dtype, const std::string& name) {
  auto attrs = seed_attrs(g, seed);
  attrs["shape"] = std::move(shape);
  attrs["dtype"] = dtype;
  attrs[ka] = a;
  attrs[kb] = b;
  return add(g, op, name, {}, std::move(attrs));
}

}  // namespace actorflow::dsl
