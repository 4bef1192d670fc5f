#include "graph_passes.h"
#include "actorflow/environment.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "actorflow/denormal.h"
#include "actorflow/kernel.h"
#include "actorflow/op_registry.h"
#include "actorflow/ops/cpu_device.h"
#include "elementwise_fusion.h"
#include "pool_grad_fusion.h"

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
    ScopedFlushDenormal flush;  // folded as the step would compute it
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

// MatMul -> BiasAdd (-> Relu) chains become one _FusedMatMul node, and Conv2D -> BiasAdd
// (-> Relu) one _FusedConv2D node (oneDNN's post-ops; ops/cpu/fused_matmul_kernels.cpp and
// conv_kernels.cpp), as Grappler's remapper does; `matmul` and `conv` say which. A link
// of the chain is fused only when the tensor it passes on is read by nothing else in the
// plan and is neither fetched nor fed, and the node it drops is no target; so in a
// training graph, where Relu's gradient reads the BiasAdd output, MatMul + BiasAdd fuse
// and the Relu stays. The fused node is a rewrite of the last node it replaces (same id,
// name, device and outputs), so fetches of that node and its consumers are untouched;
// it waits for the control inputs of every node it replaces, and nodes that waited for a
// replaced node wait for it instead (unless the fused node would then wait for them
// itself: a chain whose bias waits for its MatMul stays unfused). f32 and f64 only.
void fuse_bias_relu(OptimizedPlan& p, bool matmul, bool conv) {
  StepPlan& plan = p.mutable_plan();
  std::unordered_set<int> in_plan(plan.nodes.begin(), plan.nodes.end());
  std::unordered_map<int, std::vector<int>> readers;        // node -> plan nodes reading any output (once per input)
  std::unordered_map<int, std::vector<int>> control_users;  // node -> plan nodes waiting for it
  for (int id : plan.nodes) {
    const Node& n = p.node(id);
    for (const Endpoint& e : n.inputs) readers[e.node].push_back(id);
    for (int c : n.control_inputs) control_users[c].push_back(id);
  }
  const std::unordered_set<int> pinned = pinned_nodes(plan);

  auto fusable_dtype = [](const Node& n) {
    return n.num_outputs() == 1 && (n.output_dtypes[0] == DType::f32 || n.output_dtypes[0] == DType::f64);
  };
  // `mid`'s one output goes to `next` alone, and nothing needs `mid` to run as itself.
  auto only_feeds = [&](int mid, int next) {
    if (pinned.count(mid)) return false;
    auto r = readers.find(mid);
    return r != readers.end() && r->second.size() == 1 && r->second[0] == next;
  };
  // Whether any node waiting for one of `replaced` is an ancestor (in the plan as
  // rewritten so far) of one of `extra`, the inputs the fused node adds after the product:
  // it would then wait for the fused node that waits for it.
  auto waiters_would_cycle = [&](const std::vector<int>& replaced, const std::vector<int>& extra) {
    std::unordered_set<int> waiters;
    for (int r : replaced)
      if (auto c = control_users.find(r); c != control_users.end()) waiters.insert(c->second.begin(), c->second.end());
    for (int r : replaced) waiters.erase(r);
    if (waiters.empty()) return false;
    std::unordered_set<int> seen;
    std::vector<int> stack(extra.begin(), extra.end());
    while (!stack.empty()) {
      int id = stack.back();
      stack.pop_back();
      if (!in_plan.count(id) || !seen.insert(id).second) continue;
      if (waiters.count(id)) return true;
      const Node& n = p.node(id);
      for (const Endpoint& e : n.inputs) stack.push_back(e.node);
      for (int c : n.control_inputs) stack.push_back(c);
    }
    return false;
  };

  std::unordered_set<int> removed;
  bool redirected = false;  // some node's inputs changed producer: sort the plan again
  // `Greater(x, 0)` readers of x (node `x_id`, one output) move to the output of x's
  // Relu when x's readers are that Relu (with no control inputs, so the move makes no
  // cycle) and such tests only.
  auto redirect_sign_tests = [&](int x_id, bool& moved) {
    auto r = readers.find(x_id);
    if (r == readers.end() || r->second.size() < 2) return;
    int relu = -1;
    std::vector<int> tests;
    for (int u : r->second) {
      const Node& n = p.node(u);
      if (n.op == "Relu" && relu < 0 && n.control_inputs.empty() && n.inputs.size() == 1) {
        relu = u;
        continue;
      }
      if (n.op != "Greater" || n.inputs.size() != 2 || !(n.inputs[0] == Endpoint{x_id, 0}) ||
          n.inputs[1].node == x_id)
        return;
      if (!in_plan.count(n.inputs[1].node)) return;  // a fed constant holds the feed
      const Node& zero = p.node(n.inputs[1].node);
      const Tensor* v = is_const(zero) ? zero.attr_tensor("value") : nullptr;
      if (!v || v->num_elements() > 64 || (v->dtype() != DType::f32 && v->dtype() != DType::f64)) return;
      for (int64_t i = 0; i < v->num_elements(); ++i)
        if (v->element_as_double(i) != 0.0) return;
      tests.push_back(u);
    }
    if (relu < 0 || tests.empty() || p.node(relu).device != p.node(x_id).device) return;
    for (int u : tests) p.rewrite(u).inputs[0] = Endpoint{relu, 0};
    r->second = {relu};
    readers[relu].insert(readers[relu].end(), tests.begin(), tests.end());
    moved = true;
  };
  for (int id : plan.nodes) {
    const Node& ba = p.node(id);
    if (ba.op != "BiasAdd" || ba.inputs.size() != 2 || !fusable_dtype(ba)) continue;
    if (ba.attr_string("data_format", "NHWC") != "NHWC") continue;
    const int mm_id = ba.inputs[0].node;
    if (!in_plan.count(mm_id) || removed.count(mm_id)) continue;
    const Node& mm = p.node(mm_id);
    const bool is_matmul = matmul && mm.op == "MatMul", is_conv = conv && mm.op == "Conv2D";
    if (!(is_matmul || is_conv) || mm.inputs.size() != 2 || !fusable_dtype(mm) ||
        mm.output_dtypes[0] != ba.output_dtypes[0] || mm.device != ba.device || !only_feeds(mm_id, id))
      continue;
    std::vector<int> extra{ba.inputs[1].node};
    extra.insert(extra.end(), ba.control_inputs.begin(), ba.control_inputs.end());
    // Relu's gradient reads the BiasAdd output x as `x > 0`; relu(x) > 0 is the same
    // test for every x (NaN and -0 included), so such readers read the Relu's output
    // instead, which leaves the Relu as BiasAdd's only reader (training graphs then
    // fuse the whole chain).
    if (!pinned.count(id)) redirect_sign_tests(id, redirected);
    // The Relu, when BiasAdd's output goes to it alone.
    int relu_id = -1;
    if (auto r = readers.find(id); r != readers.end() && r->second.size() == 1) {
      const int cand = r->second[0];
      const Node& rn = p.node(cand);
      std::vector<int> with_relu = extra;
      with_relu.insert(with_relu.end(), rn.control_inputs.begin(), rn.control_inputs.end());
      if (rn.op == "Relu" && rn.device == ba.device && in_plan.count(cand) && only_feeds(id, cand) &&
          !waiters_would_cycle({mm_id, id, cand}, with_relu))
        relu_id = cand;
    }
    if (relu_id < 0 && waiters_would_cycle({mm_id, id}, extra)) continue;
    const int last = relu_id >= 0 ? relu_id : id;
    std::vector<int> replaced{mm_id};
    if (relu_id >= 0) replaced.push_back(id);
    auto is_chain = [&](int n) { return n == last || std::find(replaced.begin(), replaced.end(), n) != replaced.end(); };

    std::vector<Endpoint> inputs{mm.inputs[0], mm.inputs[1], ba.inputs[1]};
    // The product's own attributes (transposes, or strides and padding) carry over.
    std::map<std::string, AttrValue> attrs = mm.attrs;
    attrs["relu"] = AttrValue(relu_id >= 0);
    std::vector<int> control;
    auto add_control = [&](const std::vector<int>& cs) {
      for (int c : cs)
        if (!is_chain(c) && std::find(control.begin(), control.end(), c) == control.end()) control.push_back(c);
    };
    add_control(mm.control_inputs);
    add_control(ba.control_inputs);
    if (relu_id >= 0) add_control(p.node(relu_id).control_inputs);

    Node& f = p.rewrite(last);
    f.op = is_matmul ? "_FusedMatMul" : "_FusedConv2D";
    f.inputs = std::move(inputs);
    f.attrs = std::move(attrs);
    f.control_inputs = std::move(control);
    // a, b and bias keep their reader counts: the fused node reads each once in place of
    // MatMul and BiasAdd. Nodes that waited for a replaced node wait for the fused one.
    for (int gone : replaced) {
      removed.insert(gone);
      auto c = control_users.find(gone);
      if (c == control_users.end()) continue;
      for (int u : c->second) {
        if (is_chain(u)) continue;
        Node& w = p.rewrite(u);
        std::vector<int> deps;
        for (int d : w.control_inputs) {
          const int to = d == gone ? last : d;
          if (std::find(deps.begin(), deps.end(), to) == deps.end()) deps.push_back(to);
        }
        w.control_inputs = std::move(deps);
        control_users[last].push_back(u);
        redirected = true;
      }
    }
    ++p.mutable_stats().fused;
  }
  if (removed.empty()) return;
  std::vector<int> kept;
  for (int id : plan.nodes)
    if (!removed.count(id)) kept.push_back(id);
  if (redirected) {
    // A moved waiter or sign test may stand before its new producer: sort again (depth first over the
    // old order, so an already ordered plan keeps its order).
    std::unordered_set<int> live(kept.begin(), kept.end()), done;
    std::vector<int> order;
    order.reserve(kept.size());
    std::vector<std::pair<int, size_t>> stack;  // node, next dependency to visit
    for (int root : kept) {
      if (done.count(root)) continue;
      stack.push_back({root, 0});
      done.insert(root);
      while (!stack.empty()) {
        auto& [id, next] = stack.back();
        const Node& n = p.node(id);
        const size_t num_deps = n.inputs.size() + n.control_inputs.size();
        bool pushed = false;
        while (!pushed && next < num_deps) {
          const int dep = next < n.inputs.size() ? n.inputs[next].node : n.control_inputs[next - n.inputs.size()];
          ++next;
          if (live.count(dep) && done.insert(dep).second) {
            stack.push_back({dep, 0});
            pushed = true;
          }
        }
        if (!pushed) {
          order.push_back(id);
          stack.pop_back();
        }
      }
    }
    kept.swap(order);
  }
  plan.nodes.swap(kept);
}

// AF_FUSE_MATMUL_BIAS_RELU=0 and AF_FUSE_CONV_BIAS_RELU=0 switch a fusion off for a
// whole process, for A/B runs of programs that do not expose SessionOptions (bench/run
// mlp_training with each), as AF_MATMUL_BACKEND does for the matmul kernel.
bool fusion_allowed_by_env(EnvironmentSwitch which) {
  const char* e = environment_switch(which);
  return !(e && std::string_view(e) == "0");
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

std::unordered_set<int> pinned_nodes(const StepPlan& plan) {
  std::unordered_set<int> pinned;
  for (const Endpoint& e : plan.fetches)
    if (e.node >= 0) pinned.insert(e.node);
  for (const Endpoint& e : plan.feeds) pinned.insert(e.node);
  for (int id : plan.fetch_ops) pinned.insert(id);
  return pinned;
}

Result<std::shared_ptr<OptimizedPlan>> optimize_plan(const Graph& g, StepPlan plan, const GraphOptimizerOptions& opts) {
  auto p = std::make_shared<OptimizedPlan>(g, std::move(plan));
  if (opts.constant_folding) fold_constants(*p);
  if (opts.common_subexpressions) merge_duplicates(*p);
  const bool matmul = opts.fuse_matmul_bias_relu && fusion_allowed_by_env(EnvironmentSwitch::fuse_matmul_bias_relu);
  const bool conv = opts.fuse_conv_bias_relu && fusion_allowed_by_env(EnvironmentSwitch::fuse_conv_bias_relu);
  if (matmul || conv) fuse_bias_relu(*p, matmul, conv);
  // After it: the Relu gradient's test then reads the Relu's output, as the pooling does.
  if (conv) fuse_max_pool_relu_grad(*p);
  // After the MatMul and Conv2D fusion, which takes BiasAdd's Relu when it can.
  if (opts.fuse_elementwise && elementwise_fusion_allowed_by_env()) fuse_elementwise(*p);
  if (opts.prune) prune(*p);
  return p;
}

}  // namespace actorflow::runtime
