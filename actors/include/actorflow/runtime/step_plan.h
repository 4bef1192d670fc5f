// What one kind of Session::run needs: the pruned set of nodes (feeds cut the graph),
// their order, and where fetches come from. Shared by every executor.
#pragma once
#include <string>
#include <vector>

#include "actorflow/session.h"

namespace actorflow {

struct StepPlan {
  std::vector<int> nodes;              // nodes to execute, topologically ordered
  std::vector<Endpoint> feeds;         // fed endpoints, in request order
  std::vector<Endpoint> fetches;       // one per request fetch (node -1 for op fetches)
  std::vector<int> fetch_ops;          // nodes fetched for their effect, and targets
  std::string key;                     // identifies the plan for caching
};

// A cache key for a request against a graph version.
std::string step_plan_key(const Graph& g, const RunRequest& req);
Result<StepPlan> make_step_plan(const Graph& g, const RunRequest& req);
// Dtype and shape of a fed tensor against the fed output's declared ones.
Status validate_feed(const Output& out, const Tensor& value);
// Verifies every node in `nodes` (all nodes if empty) has a kernel for the device.
Status check_kernels(const Graph& g, DeviceType device, const std::vector<int>& nodes = {});
// Verifies a kernel's outputs against the node's declared dtypes and shapes.
Status check_outputs(const Node& node, const std::vector<Tensor>& outputs);

}  // namespace actorflow
