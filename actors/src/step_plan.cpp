#include "actorflow/runtime/step_plan.h"

#include <algorithm>
#include <set>

#include "actorflow/kernel.h"
#include "actorflow/op_registry.h"

namespace actorflow {

std::string step_plan_key(const Graph& g, const RunRequest& req) {
  std::string key = std::to_string(g.version()) + "|f";
  for (auto& f : req.fetches) key += (f.is_op ? "^" : "") + std::to_string(f.output.node_id()) + ":" + std::to_string(f.output.index()) + ",";
  key += "|d";
  for (auto& [o, t] : req.feeds) key += std::to_string(o.node_id()) + ":" + std::to_string(o.index()) + ",";
  key += "|t";
  for (auto& t : req.targets) key += std::to_string(t.node_id()) + ",";
  return key;
}

Result<StepPlan> make_step_plan(const Graph& g, const RunRequest& req) {
  StepPlan plan;
  plan.key = step_plan_key(g, req);
  std::set<int> fed_nodes;
  std::set<Endpoint> fed;
  for (auto& [o, t] : req.feeds) {
    if (!o.valid()) return invalid_argument("a feed key is an empty Output");
    if (o.index() >= o.node().num_outputs()) return invalid_argument("feed of '" + o.name() + "': no such output");
    if (!fed.insert(o.endpoint()).second) return invalid_argument("'" + o.name() + "' is fed twice");
    fed_nodes.insert(o.node_id());
    plan.feeds.push_back(o.endpoint());
  }
  std::vector<int> roots;
  for (auto& f : req.fetches) {
    if (!f.output.valid()) return invalid_argument("a fetch is an empty Output");
    if (f.is_op) {
      plan.fetch_ops.push_back(f.output.node_id());
      plan.fetches.push_back({-1, 0});
    } else {
      if (f.output.index() >= f.output.node().num_outputs())
        return invalid_argument("fetch of '" + f.output.name() + "': no such output");
      plan.fetches.push_back(f.output.endpoint());
    }
    roots.push_back(f.output.node_id());
  }
  for (auto& t : req.targets) {
    if (!t.valid()) return invalid_argument("a target is an empty Operation");
    plan.fetch_ops.push_back(t.node_id());
    roots.push_back(t.node_id());
  }
  // Walk back from the roots; a fed node is not run and its inputs are not needed.
  std::vector<char> needed(static_cast<size_t>(g.num_nodes()), 0);
  std::vector<int> stack = roots;
  while (!stack.empty()) {
    int id = stack.back();
    stack.pop_back();
    if (needed[static_cast<size_t>(id)]) continue;
    needed[static_cast<size_t>(id)] = 1;
    if (fed_nodes.count(id)) continue;
    const Node& n = g.node(id);
    for (auto& e : n.inputs) {
      if (fed_nodes.count(e.node) && !fed.count(e)) {
        return invalid_argument("node '" + n.name + "' needs '" + g.node(e.node).name + ":" + std::to_string(e.index) +
                                "', but only other outputs of that node are fed");
      }
      stack.push_back(e.node);
    }
    for (int c : n.control_inputs) stack.push_back(c);
  }
  for (auto& e : plan.fetches)
    if (e.node >= 0 && fed_nodes.count(e.node) && !fed.count(e))
      return invalid_argument("fetch of '" + g.node(e.node).name + ":" + std::to_string(e.index) +
                              "': the node is fed, but not this output");
  // Node ids already respect data edges; control edges added later may not, so sort.
  auto order = g.topological_order();
  if (!order.ok()) return order.status();
  for (int id : *order)
    if (needed[static_cast<size_t>(id)] && !fed_nodes.count(id)) plan.nodes.push_back(id);
  return plan;
}

Status validate_feed(const Output& out, const Tensor& value) {
  if (!value.valid()) return invalid_argument("feed for '" + out.name() + "' is an empty tensor");
  if (value.dtype() != out.dtype())
    return invalid_argument("feed for '" + out.name() + "' has dtype " + dtype_name(value.dtype()) + ", expected " +
                            dtype_name(out.dtype()));
  if (!out.shape().compatible_with(value.shape()))
    return invalid_argument("feed for '" + out.name() + "' has shape " + value.shape().to_string() + ", expected " +
                            out.shape().to_string());
  return Status::OK();
}

Status check_kernels(const Graph& g, DeviceType device, const std::vector<int>& nodes) {
  auto check = [&](int id) -> Status {
    const Node& n = g.node(id);
    if (!OpRegistry::global().find(n.op)) return not_found("node '" + n.name + "': unknown op '" + n.op + "'");
    if (!KernelRegistry::global().has(n.op, device))
      return not_found("node '" + n.name + "': no " + std::string(device_type_name(device)) + " kernel for op '" + n.op + "'");
    return Status::OK();
  };
  if (nodes.empty()) {
    for (int i = 0; i < g.num_nodes(); ++i) AF_RETURN_IF_ERROR(check(i));
  } else {
    for (int i : nodes) AF_RETURN_IF_ERROR(check(i));
  }
  return Status::OK();
}

Status check_outputs(const Node& node, const std::vector<Tensor>& outputs) {
  for (int i = 0; i < node.num_outputs(); ++i) {
    const Tensor& t = outputs[static_cast<size_t>(i)];
    if (!t.valid()) return internal_error(node.op + " '" + node.name + "': kernel produced no output " + std::to_string(i));
    if (t.dtype() != node.output_dtypes[static_cast<size_t>(i)])
      return internal_error(node.op + " '" + node.name + "': kernel produced " + dtype_name(t.dtype()) + " for output " +
                            std::to_string(i) + ", declared " + dtype_name(node.output_dtypes[static_cast<size_t>(i)]));
    if (!node.output_shapes[static_cast<size_t>(i)].compatible_with(t.shape()))
      return internal_error(node.op + " '" + node.name + "': kernel produced shape " + t.shape().to_string() +
                            " for output " + std::to_string(i) + ", declared " +
                            node.output_shapes[static_cast<size_t>(i)].to_string());
  }
  return Status::OK();
}

}  // namespace actorflow
