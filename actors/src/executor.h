// One prepared kind of step: the actors of one pruned graph, reused for every step that
// asks for the same fetches, feeds and targets. CAF stays behind this header.
#pragma once
#include <memory>
#include <set>
#include <string>

#include "actorflow/kernel.h"
#include "actorflow/resource_mgr.h"
#include "actorflow/runtime/step_plan.h"
#include "step_state.h"
#include "tracer.h"

namespace actorflow::runtime {

struct ExecutorEnv {
  DeviceContext* device = nullptr;
  ResourceMgr* resources = nullptr;
  Tracer* tracer = nullptr;  // null: tracing off
  int edge_capacity = 2;
  bool encode_all_edges = false;
  std::set<std::string> encode_nodes;  // edges touching these nodes are encoded
};

class Executor {
 public:
  virtual ~Executor() = default;
  // Starts one step (feeds already validated); the returned state completes when every
  // fetch and target has reported.
  virtual std::shared_ptr<StepState> start(const RunRequest& req, int64_t global_step) = 0;
  // Stops the actors and cancels steps in flight.
  virtual void shutdown() = 0;
  virtual int num_actors() const = 0;
};

// Creates the kernels (errors name the node) and spawns one actor per node.
Result<std::unique_ptr<Executor>> make_actor_executor(const Graph& g, const StepPlan& plan, const ExecutorEnv& env);

}  // namespace actorflow::runtime
