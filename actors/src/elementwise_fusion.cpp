// Elementwise fusion, as Grappler's and XLA's loop fusion: a group of f32 elementwise
// nodes (the ops actorflow/ops/fused_elementwise.h lists) becomes one _FusedElementwise
// node that evaluates them in one pass over the data, so a chain of k ops costs one actor
// firing and one output instead of k of each.
//
// A group grows from its last node (its root) up through its inputs. A producer joins
// when every plan node that reads it is already in the group, it is neither fetched, fed
// nor a target, nothing waits for it by a control edge, it runs on the root's device,
// and its output has the root's static shape. So no result that anyone else reads
// (fetches, other nodes, gradients) is fused away, and since only the root is read from
// outside, the group is a single-output DAG whose external inputs all precede it: the
// rewrite makes no cycle. Every input of every member must have the root's static shape
// or be a single element of no higher rank (a scalar constant, say); other broadcasts
// stay unfused. Static shapes with unknown dims may still meet other shapes at run time;
// the kernel then runs the program op by op (ops/cpu/fused_elementwise_kernels.cpp).
//
// The fused node is a rewrite of the root (same id, name, device, output), so fetches of
// the root and its readers are untouched; it takes over the members' control inputs.
// Plan order stays topological: the fused node sits where the root was, after every
// member and so after every input.
#include "elementwise_fusion.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "actorflow/ops/fused_elementwise.h"

namespace actorflow::runtime {
namespace {

namespace fe = fused_elementwise;

// Bounds the program (its attributes and the kernel's registers); a longer chain becomes
// several fused nodes.
constexpr size_t kMaxGroup = 64;

// A single element that broadcasts against `shape` without changing it.
bool is_scalar_for(const Shape& s, const Shape& shape) {
  return s.is_fully_defined() && s.num_elements() == 1 && s.rank() <= shape.rank();
}

}  // namespace

bool elementwise_fusion_allowed_by_env() {
  static const bool allowed = [] {
    const char* e = std::getenv("AF_FUSE_ELEMENTWISE");
    return !(e && std::string_view(e) == "0");
  }();
  return allowed;
}

void fuse_elementwise(OptimizedPlan& p) {
  StepPlan& plan = p.mutable_plan();
  std::unordered_set<int> in_plan(plan.nodes.begin(), plan.nodes.end());
  std::unordered_map<int, int> position;  // plan order
  std::unordered_map<int, std::vector<int>> readers;  // node -> plan nodes reading it (once per input)
  std::unordered_set<int> awaited;                    // nodes some plan node waits for
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    const int id = plan.nodes[i];
    position[id] = static_cast<int>(i);
    const Node& n = p.node(id);
    for (const Endpoint& e : n.inputs) readers[e.node].push_back(id);
    for (int c : n.control_inputs) awaited.insert(c);
  }
  std::unordered_set<int> pinned;  // fetched, fed or run as a target: must run as itself
  for (const Endpoint& e : plan.fetches)
    if (e.node >= 0) pinned.insert(e.node);
  for (const Endpoint& e : plan.feeds) pinned.insert(e.node);
  for (int id : plan.fetch_ops) pinned.insert(id);

  // Whether node `id` can be an instruction of a group whose output has `shape`.
  auto fusable = [&](int id, const Shape& shape) {
    const Node& n = p.node(id);
    const fe::OpInfo* info = fe::find_op(n.op);
    if (!info || n.num_outputs() != 1 || n.output_dtypes[0] != DType::f32 || n.output_shapes[0] != shape ||
        static_cast<int>(n.inputs.size()) != info->arity)
      return false;
    for (const Endpoint& e : n.inputs) {
      const Node& in = p.node(e.node);
      if (e.index >= in.num_outputs() || in.output_dtypes[static_cast<size_t>(e.index)] != DType::f32) return false;
      const Shape& s = in.output_shapes[static_cast<size_t>(e.index)];
      if (s != shape && !is_scalar_for(s, shape)) return false;
    }
    return true;
  };

  std::unordered_set<int> removed;
  for (size_t ri = plan.nodes.size(); ri-- > 0;) {
    const int root = plan.nodes[ri];
    if (removed.count(root)) continue;
    const Node& rn = p.node(root);
    if (rn.output_shapes.size() != 1 || !rn.output_shapes[0].has_rank() || !fusable(root, rn.output_shapes[0])) continue;
    const Shape shape = rn.output_shapes[0];
    std::vector<int> group{root};
    std::unordered_set<int> members{root};
    // Producers whose readers are all members join; repeat until none does (a producer
    // read twice in a diamond joins once both of its readers have).
    for (bool grew = true; grew && group.size() < kMaxGroup;) {
      grew = false;
      for (size_t gi = 0; gi < group.size() && group.size() < kMaxGroup; ++gi) {
        for (const Endpoint& e : p.node(group[gi]).inputs) {
          const int q = e.node;
          if (members.count(q) || !in_plan.count(q) || removed.count(q) || pinned.count(q) || awaited.count(q)) continue;
          const Node& qn = p.node(q);
          if (qn.device != rn.device || !fusable(q, shape)) continue;
          const auto& rs = readers[q];
          if (!std::all_of(rs.begin(), rs.end(), [&](int r) { return members.count(r) != 0; })) continue;
          group.push_back(q);
          members.insert(q);
          grew = true;
          if (group.size() >= kMaxGroup) break;
        }
      }
    }
    if (group.size() < 2) continue;
    std::sort(group.begin(), group.end(), [&](int a, int b) { return position[a] < position[b]; });

    std::vector<Endpoint> inputs;
    std::unordered_map<int, int> result_slot;  // member -> its instruction's result slot (offset later)
    for (size_t i = 0; i < group.size(); ++i) result_slot[group[i]] = static_cast<int>(i);
    // Slots are written as inputs first, then results: inputs must all be known before
    // a result's slot number (num_inputs + j) can be, so operands are recorded as
    // (is_result, index) and numbered after.
    std::vector<std::pair<bool, int>> operands;
    AttrValue::Strings ops, names;
    for (int m : group) {
      const Node& n = p.node(m);
      ops.push_back(n.op);
      names.push_back(n.name);
      for (size_t k = 0; k < 2; ++k) {
        if (k >= n.inputs.size()) {
          operands.push_back({false, -1});
          continue;
        }
        const Endpoint& e = n.inputs[k];
        if (members.count(e.node)) {
          operands.push_back({true, result_slot[e.node]});
          continue;
        }
        auto it = std::find(inputs.begin(), inputs.end(), e);
        if (it == inputs.end()) it = inputs.insert(inputs.end(), e);
        operands.push_back({false, static_cast<int>(it - inputs.begin())});
      }
    }
    AttrValue::Ints args;
    for (auto [is_result, k] : operands) args.push_back(k < 0 ? -1 : is_result ? static_cast<int64_t>(inputs.size()) + k : k);

    std::vector<int> control;
    for (int m : group)
      for (int c : p.node(m).control_inputs)
        if (!members.count(c) && std::find(control.begin(), control.end(), c) == control.end()) control.push_back(c);

    Node& f = p.rewrite(root);
    f.op = "_FusedElementwise";
    f.inputs = std::move(inputs);
    f.attrs = {{"ops", AttrValue(std::move(ops))}, {"args", AttrValue(std::move(args))}, {"names", AttrValue(std::move(names))}};
    f.control_inputs = std::move(control);
    for (int m : group)
      if (m != root) removed.insert(m);
    ++p.mutable_stats().fused_elementwise;
    p.mutable_stats().elementwise_nodes_replaced += static_cast<int>(group.size());
  }
  if (removed.empty()) return;
  std::vector<int> kept;
  for (int id : plan.nodes)
    if (!removed.count(id)) kept.push_back(id);
  plan.nodes.swap(kept);
}

}  // namespace actorflow::runtime
