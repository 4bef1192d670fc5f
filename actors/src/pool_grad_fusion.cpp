#include "pool_grad_fusion.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace actorflow::runtime {
namespace {

// A Const of at most one element whose value is 0 (with `positive_only`, +0 alone: the
// Select's else-value is copied into the result, sign and all).
bool is_zero_const(const Node& n, bool positive_only) {
  if (n.op != "Const") return false;
  const Tensor* v = n.attr_tensor("value");
  if (!v || v->num_elements() != 1 || v->rank() > 1 || (v->dtype() != DType::f32 && v->dtype() != DType::f64))
    return false;
  const double d = v->element_as_double(0);
  return d == 0.0 && !(positive_only && std::signbit(d));
}

}  // namespace

void fuse_max_pool_relu_grad(OptimizedPlan& p) {
  StepPlan& plan = p.mutable_plan();
  std::unordered_set<int> in_plan(plan.nodes.begin(), plan.nodes.end());
  std::unordered_map<int, int> reads;  // node -> how many plan-node inputs read it
  std::unordered_set<int> waited_for;  // nodes some plan node has a control edge from
  for (int id : plan.nodes) {
    const Node& n = p.node(id);
    for (const Endpoint& e : n.inputs) ++reads[e.node];
    for (int c : n.control_inputs) waited_for.insert(c);
  }
  const std::unordered_set<int> pinned = pinned_nodes(plan);
  // Read by one input of one plan node, and free to disappear.
  auto only_read_by_one = [&](int id) {
    auto r = reads.find(id);
    return in_plan.count(id) && !pinned.count(id) && !waited_for.count(id) && r != reads.end() && r->second == 1;
  };

  std::unordered_set<int> removed;
  for (int id : plan.nodes) {
    const Node& sel = p.node(id);
    if (sel.op != "Select" || sel.inputs.size() != 3 || sel.num_outputs() != 1) continue;
    const int test_id = sel.inputs[0].node, grad_id = sel.inputs[1].node, zero_id = sel.inputs[2].node;
    if (test_id == grad_id || !only_read_by_one(test_id) || !only_read_by_one(grad_id) || !in_plan.count(zero_id))
      continue;
    const Node& test = p.node(test_id);
    const Node& grad = p.node(grad_id);
    if (test.op != "Greater" || test.inputs.size() != 2 || grad.op != "MaxPoolGrad" || grad.inputs.size() != 3) continue;
    if (!(test.inputs[0] == grad.inputs[0]) || !in_plan.count(test.inputs[1].node) ||
        !is_zero_const(p.node(test.inputs[1].node), false) || !is_zero_const(p.node(zero_id), true))
      continue;
    const DType dt = grad.output_dtypes[0];
    if ((dt != DType::f32 && dt != DType::f64) || sel.output_dtypes[0] != dt || p.node(zero_id).output_dtypes[0] != dt)
      continue;
    if (test.device != sel.device || grad.device != sel.device) continue;

    // The Select keeps its own control inputs and takes those of the two nodes it
    // replaces: they ran before it already, through its inputs.
    std::vector<int> control = sel.control_inputs;
    for (const Node* gone : {&test, &grad})
      for (int c : gone->control_inputs)
        if (std::find(control.begin(), control.end(), c) == control.end()) control.push_back(c);
    std::vector<Endpoint> inputs = grad.inputs;
    std::map<std::string, AttrValue> attrs = grad.attrs;
    // The plan is in topological order and the Select stands after both nodes it
    // replaces, so after their inputs too: no sorting needed.
    Node& f = p.rewrite(id);
    f.op = "_FusedMaxPoolGrad";
    f.inputs = std::move(inputs);
    f.attrs = std::move(attrs);
    f.control_inputs = std::move(control);
    removed.insert(test_id);
    removed.insert(grad_id);
    ++p.mutable_stats().fused;
  }
  if (removed.empty()) return;
  std::vector<int> kept;
  for (int id : plan.nodes)
    if (!removed.count(id)) kept.push_back(id);
  plan.nodes.swap(kept);
}

}  // namespace actorflow::runtime
