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
#include "actorflow/environment.h"

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
    const char* e = environment_switch(EnvironmentSwitch::fuse_elementwise);
    return !(e && std::string_view(e) == "0");
  }();
  return allowed;
}

namespace {

// The plan as the pass sees it, and the two steps of fusing one group.
class Fuser {
 public:
  explicit Fuser(OptimizedPlan& p) : p_(p) {
    const StepPlan& plan = p.plan();
    in_plan_.insert(plan.nodes.begin(), plan.nodes.end());
    for (size_t i = 0; i < plan.nodes.size(); ++i) {
      const int id = plan.nodes[i];
      position_[id] = static_cast<int>(i);
      const Node& n = p.node(id);
      for (const Endpoint& e : n.inputs) readers_[e.node].push_back(id);
      for (int c : n.control_inputs) awaited_.insert(c);
    }
    pinned_ = pinned_nodes(plan);
  }

  // The group whose output is `root`'s, in plan order (root last); just the root when
  // nothing fuses with it. `readers_` is not updated as groups fuse: a fused root reads
  // what its members read, and a reader outside this group it stays either way.
  std::vector<int> group_of(int root) const {
    const Node& rn = p_.node(root);
    if (removed_.count(root) || rn.output_shapes.size() != 1 || !rn.output_shapes[0].has_rank() ||
        !fusable(root, rn.output_shapes[0]))
      return {root};
    const Shape& shape = rn.output_shapes[0];
    std::vector<int> group{root};
    std::unordered_set<int> members{root};
    // Producers whose readers are all members join; repeat until none does (a producer
    // read twice in a diamond joins once both of its readers have).
    for (bool grew = true; grew;) {
      grew = false;
      for (size_t gi = 0; gi < group.size(); ++gi) {
        for (const Endpoint& e : p_.node(group[gi]).inputs) {
          const int q = e.node;
          if (group.size() >= kMaxGroup) return sorted(std::move(group));
          if (members.count(q) || !in_plan_.count(q) || removed_.count(q) || pinned_.count(q) || awaited_.count(q))
            continue;
          if (p_.node(q).device != rn.device || !fusable(q, shape)) continue;
          auto rs = readers_.find(q);
          if (!std::all_of(rs->second.begin(), rs->second.end(), [&](int r) { return members.count(r) != 0; })) continue;
          group.push_back(q);
          members.insert(q);
          grew = true;
        }
      }
    }
    return sorted(std::move(group));
  }

  // Rewrites the group's last node into the _FusedElementwise node that runs them all.
  void fuse(const std::vector<int>& group) {
    const int root = group.back();
    std::unordered_map<int, int> result_of;  // member -> its instruction
    for (size_t i = 0; i < group.size(); ++i) result_of[group[i]] = static_cast<int>(i);
    std::vector<Endpoint> inputs;  // what the members read from outside the group
    for (int m : group)
      for (const Endpoint& e : p_.node(m).inputs)
        if (!result_of.count(e.node) && std::find(inputs.begin(), inputs.end(), e) == inputs.end()) inputs.push_back(e);
    const int64_t num_inputs = static_cast<int64_t>(inputs.size());
    AttrValue::Strings ops, names;
    AttrValue::Ints args;
    std::vector<int> control;
    for (int m : group) {
      const Node& n = p_.node(m);
      ops.push_back(n.op);
      names.push_back(n.name);
      for (size_t k = 0; k < 2; ++k) {
        if (k >= n.inputs.size()) {
          args.push_back(-1);
          continue;
        }
        const Endpoint& e = n.inputs[k];
        auto r = result_of.find(e.node);
        args.push_back(r != result_of.end() ? num_inputs + r->second
                                            : std::find(inputs.begin(), inputs.end(), e) - inputs.begin());
      }
      for (int c : n.control_inputs)
        if (!result_of.count(c) && std::find(control.begin(), control.end(), c) == control.end()) control.push_back(c);
    }
    Node& f = p_.rewrite(root);
    f.op = "_FusedElementwise";
    f.inputs = std::move(inputs);
    f.attrs = {{"ops", AttrValue(std::move(ops))}, {"args", AttrValue(std::move(args))}, {"names", AttrValue(std::move(names))}};
    f.control_inputs = std::move(control);
    for (int m : group)
      if (m != root) removed_.insert(m);
    ++p_.mutable_stats().fused_elementwise;
    p_.mutable_stats().elementwise_nodes_replaced += static_cast<int>(group.size());
  }

  // Drops the nodes fused into others. The plan stays topological: a fused node sits
  // where its root was, after every member and so after every input.
  void drop_fused() {
    if (removed_.empty()) return;
    StepPlan& plan = p_.mutable_plan();
    std::vector<int> kept;
    for (int id : plan.nodes)
      if (!removed_.count(id)) kept.push_back(id);
    plan.nodes.swap(kept);
  }

 private:
  // Whether node `id` can be an instruction of a group whose output has `shape`.
  bool fusable(int id, const Shape& shape) const {
    const Node& n = p_.node(id);
    const fe::OpInfo* info = fe::find_op(n.op);
    if (!info || n.num_outputs() != 1 || n.output_shapes.size() != 1 || n.output_dtypes[0] != DType::f32 ||
        n.output_shapes[0] != shape || static_cast<int>(n.inputs.size()) != info->arity)
      return false;
    for (const Endpoint& e : n.inputs) {
      const Node& in = p_.node(e.node);
      if (e.index >= in.num_outputs() || in.output_dtypes[static_cast<size_t>(e.index)] != DType::f32) return false;
      const Shape& s = in.output_shapes[static_cast<size_t>(e.index)];
      if (s != shape && !is_scalar_for(s, shape)) return false;
    }
    return true;
  }

  std::vector<int> sorted(std::vector<int> group) const {
    std::sort(group.begin(), group.end(), [&](int a, int b) { return position_.at(a) < position_.at(b); });
    return group;
  }

  OptimizedPlan& p_;
  std::unordered_set<int> in_plan_;
  std::unordered_map<int, int> position_;             // plan order
  std::unordered_map<int, std::vector<int>> readers_;  // node -> plan nodes reading it (once per input)
  std::unordered_set<int> awaited_;                    // nodes some plan node waits for
  std::unordered_set<int> pinned_;                     // fetched, fed or run as a target
  std::unordered_set<int> removed_;                    // members fused into a later root
};

}  // namespace

void fuse_elementwise(OptimizedPlan& p) {
  Fuser fuser(p);
  // From the plan's end, so each group grows from the last node of its chain.
  const std::vector<int> order = p.plan().nodes;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    std::vector<int> group = fuser.group_of(*it);
    if (group.size() >= 2) fuser.fuse(group);
  }
  fuser.drop_fused();
}

}  // namespace actorflow::runtime
