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

inline Graph& graph_of(const Output& x) {
  if (!x.valid()) throw Error(invalid_argument("an empty Output was passed to an op"));
  return *x.graph();
}

}  // namespace actorflow::dsl
