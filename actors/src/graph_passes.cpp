#include "graph_passes.h"

#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>

#include "actorflow/kernel.h"
#include "actorflow/op_registry.h"
#include "actorflow/ops/cpu_device.h"

namespace actorflow::runtime {

Node& OptimizedPlan::rewrite(int id) {
  auto& slot = rewritten_[id];
  if (!slot) slot = std::make_unique<Node>(graph_->node(id));
  return *slot;
}

namespace {

// Above this a folded value would cost more memory than the step saves (TF's limit is
// 10 MiB too).
constexpr size_t kMaxFoldedBytes = size_t{10} << 20;

bool is_stateful(const Node& n) {
  const OpDef* def = OpRegistry::global().find(n.op);
  return !def || def->stateful;
}

bool is_const(const Node& n) { return n.op == "Const"; }

// The node's value computed now, or nothing when it cannot or should not be folded.
std::optional<Tensor> evaluate(const OptimizedPlan& p, const Node& n) {
  if (is_const(n) || is_stateful(n) || n.num_outputs() != 1 || !n.control_inputs.empty() || n.inputs.empty())
    return std::nullopt;
  if (!n.output_shapes[0].is_fully_defined()) return std::nullopt;
  if (n.output_shapes[0].num_elements() * static_cast<int64_t>(dtype_size(n.output_dtypes[0])) >
      static_cast<int64_t>(kMaxFoldedBytes))
    return std::nullopt;
  std::vector<Tensor> inputs;
  for (const Endpoint& e : n.inputs) {
    const Node& in = p.node(e.node);
    if (!is_const(in)) return std::nullopt;
    inputs.push_back(*in.attr_tensor("value"));
  }
  auto kernel = KernelRegistry::global().create(n, DeviceType::CPU);
  if (!kernel.ok() || (*kernel)->as_async()) return std::nullopt;
  OpKernelContext ctx(n, std::move(inputs), default_cpu_device(), nullptr, 0);
  try {
    (*kernel)->compute(ctx);
  } catch (...) {
    return std::nullopt;  // the step will meet (and report) the same failure
  }
  if (!ctx.ok() || !check_outputs(n, ctx.outputs()).ok()) return std::nullopt;
  return ctx.output(0);
}

// Plan nodes are never fed nodes (make_step_plan leaves those out), so every node here
// really runs.
void fold_constants(OptimizedPlan& p) {
  for (int id : p.plan().nodes) {
    auto value = evaluate(p, p.node(id));
    if (!value) continue;
    Node& n = p.rewrite(id);
    n.op = "Const";
    n.inputs.clear();
    n.attrs.clear();
    n.attrs["value"] = AttrValue(*value);
    n.attrs["dtype"] = AttrValue(value->dtype());
    ++p.mutable_stats().folded;
  }
}

// The identity of a stateless node's computation: op, attributes and inputs.
std::string signature(const Node& n) {
  std::string s = n.op + "|" + n.device + "|";
  for (auto& [k, v] : n.attrs) s += k + "=" + v.to_string() + ";";
  s += "|";
  for (const Endpoint& e : n.inputs) s += std::to_string(e.node) + ":" + std::to_string(e.index) + ",";
  s += "|";
  for (int c : n.control_inputs) s += std::to_string(c) + ",";
  return s;
}

void merge_duplicates(OptimizedPlan& p) {
  std::unordered_map<std::string, int> first;
  std::map<int, int> replaced;  // node -> the identical earlier node
  auto remap_inputs = [&](int id) {
    const Node& n = p.node(id);
    bool touched = false;
    for (const Endpoint& e : n.inputs) touched = touched || replaced.count(e.node);
    for (int c : n.control_inputs) touched = touched || replaced.count(c);
    if (!touched) return;
    Node& w = p.rewrite(id);
    for (Endpoint& e : w.inputs)
      if (auto it = replaced.find(e.node); it != replaced.end()) e.node = it->second;
    for (int& c : w.control_inputs)
      if (auto it = replaced.find(c); it != replaced.end()) c = it->second;
  };
  // Equal constants are one constant, so computations on them can match.
  std::unordered_map<std::string, std::vector<int>> consts;
  // Plan order is topological, so inputs are remapped before a node's signature is taken.
  for (int id : p.plan().nodes) {
    remap_inputs(id);
    const Node& n = p.node(id);
    if (is_stateful(n)) continue;
    if (is_const(n)) {
      const Tensor* v = n.attr_tensor("value");
      if (!v || v->dtype() == DType::string) continue;
      std::string key = std::string(dtype_name(v->dtype())) + v->shape().to_string() + "#" +
                        std::to_string(std::hash<std::string_view>{}(
                            std::string_view(static_cast<const char*>(v->raw_data()), v->bytes())));
      auto& same = consts[key];
      int match = -1;
      for (int other : same)
        if (p.node(other).attr_tensor("value")->equals(*v)) match = other;
      if (match >= 0) {
        replaced[id] = match;
        ++p.mutable_stats().deduplicated;
      } else {
        same.push_back(id);
      }
      continue;
    }
    auto [it, inserted] = first.emplace(signature(n), id);
    if (!inserted) {
      replaced[id] = it->second;
      ++p.mutable_stats().deduplicated;
    }
  }
  if (replaced.empty()) return;
  StepPlan& plan = p.mutable_plan();
  for (Endpoint& e : plan.fetches)
    if (auto it = replaced.find(e.node); e.node >= 0 && it != replaced.end()) e.node = it->second;
  for (int& id : plan.fetch_ops)
    if (auto it = replaced.find(id); it != replaced.end()) id = it->second;
}

void prune(OptimizedPlan& p) {
  StepPlan& plan = p.mutable_plan();
  std::set<int> in_plan(plan.nodes.begin(), plan.nodes.end());
  std::set<int> needed;
  std::vector<int> stack;
  for (const Endpoint& e : plan.fetches)
    if (e.node >= 0) stack.push_back(e.node);
  for (int id : plan.fetch_ops) stack.push_back(id);
  while (!stack.empty()) {
    int id = stack.back();
    stack.pop_back();
    if (!in_plan.count(id) || !needed.insert(id).second) continue;
    const Node& n = p.node(id);
    for (const Endpoint& e : n.inputs) stack.push_back(e.node);
    for (int c : n.control_inputs) stack.push_back(c);
  }
  std::vector<int> kept;
  for (int id : plan.nodes)
    if (needed.count(id)) kept.push_back(id);
  p.mutable_stats().pruned += static_cast<int>(plan.nodes.size() - kept.size());
  plan.nodes.swap(kept);
}

}  // namespace

Result<std::shared_ptr<OptimizedPlan>> optimize_plan(const Graph& g, StepPlan plan, const GraphOptimizerOptions& opts) {
  auto p = std::make_shared<OptimizedPlan>(g, std::move(plan));
  if (opts.constant_folding) fold_constants(*p);
  if (opts.common_subexpressions) merge_duplicates(*p);
  if (opts.prune) prune(*p);
  return p;
}

}  // namespace actorflow::runtime
