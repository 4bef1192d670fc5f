// Runs one partition of a graph (graph_partition.h) in this process, step by step, with
// step ids chosen by the caller so that the partitions of one step on several hosts meet
// at the same rendezvous keys (TF's GraphMgr::ExecuteAsync). Every _Send runs each step;
// fetches and feeds are by tensor name ("node" or "node:1").
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actorflow/graph.h"
#include "actorflow/resource_mgr.h"
#include "actorflow/session.h"
#include "actorflow/runtime/remote_edges.h"

namespace actorflow::runtime {

// A step started on a partition, to be finished (waited for) later.
class StartedStep {
 public:
  explicit StartedStep(int64_t step_id) : step_id_(step_id) {}
  virtual ~StartedStep() = default;
  int64_t step_id() const { return step_id_; }
  // True when the step has already ended (it ran to its end on the thread that started
  // it, with cheap kernels only, or had nothing to do): finish_step returns at once, so
  // a daemon answers it from the thread that started it, with no hop to a worker.
  virtual bool ended() const { return false; }

 private:
  int64_t step_id_;
};

class PartitionExecutor {
 public:
  virtual ~PartitionExecutor() = default;
  // Starts step `step_id` without waiting for it. Node actors fire steps in the order
  // they started, so every partition of a graph must start its steps in one order (a
  // daemon starts them in the order its connection delivers them).
  virtual Result<std::shared_ptr<StartedStep>> start_step(int64_t step_id,
                                                          const std::vector<std::pair<std::string, Tensor>>& feeds,
                                                          const std::vector<std::string>& fetches,
                                                          const std::vector<std::string>& targets, int64_t timeout_ms) = 0;
  // Waits for a started step, within the timeout it was started with.
  virtual Result<std::vector<Tensor>> finish_step(StartedStep& step) = 0;
  // start_step then finish_step. On failure or after `timeout_ms` (0: none) the step is aborted
  // at this partition's rendezvous, so its waiting _Send/_Recv nodes fail too.
  virtual Result<std::vector<Tensor>> run_step(int64_t step_id, const std::vector<std::pair<std::string, Tensor>>& feeds,
                                               const std::vector<std::string>& fetches,
                                               const std::vector<std::string>& targets, int64_t timeout_ms) = 0;
  // Fails this partition's steps at its rendezvous (another partition of them failed).
  virtual void abort_step(int64_t step_id, const Status& why) = 0;
  virtual const Graph& graph() const = 0;
  virtual const std::string& location() const = 0;
};

// `graph`: one partition; its _Send/_Recv nodes go through `rendezvous`. `opts` gives the
// thread count, edge capacity and the optimizer settings, as for a local session.
// `resources` holds the variables; partitions of one location that share it (cut for
// different kinds of step) share their variables. Null: a fresh one.
Result<std::unique_ptr<PartitionExecutor>> make_partition_executor(std::unique_ptr<Graph> graph,
                                                                   std::shared_ptr<EdgeRendezvous> rendezvous,
                                                                   const SessionOptions& opts,
                                                                   std::shared_ptr<ResourceMgr> resources = nullptr);

}  // namespace actorflow::runtime
