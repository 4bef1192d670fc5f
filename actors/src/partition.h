// One graph run in this process, step by step: a local session's whole graph, or one
// partition of a cluster session's graph on a daemon. A local session is a partition
// without a rendezvous; a daemon's partition has the rendezvous its _Send and _Recv nodes
// exchange edges through, handed to every kernel in its context.
//
// It owns what every kind of step of the graph shares: the device view (with the
// session's allocator when it has a memory limit), the variables, one kernel per node,
// the tracer, and the one executor manager (executor_cache.h).
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>

#include "actorflow/ops/cpu_device.h"
#include "actorflow/session.h"
#include "executor_cache.h"

namespace actorflow::runtime {

class Partition {
 public:
  // `resources` holds the variables: partitions of one location that share it (cut for
  // different kinds of step) share their variables; null: a fresh one. `rendezvous`
  // outlives the partition; null for a local session.
  Partition(const Graph& g, const SessionOptions& opts, std::shared_ptr<ResourceMgr> resources = nullptr,
            Rendezvous* rendezvous = nullptr);
  ~Partition();
  Partition(const Partition&) = delete;
  Partition& operator=(const Partition&) = delete;

  // The executor of `req`'s kind of step, prepared on first use.
  Result<std::shared_ptr<Executor>> executor(const RunRequest& req) { return executors_.get(req); }

  // Starts one step on `ex` (one tensor per planned feed, validated) and waits for it by
  // its deadline (`timeout_ms` 0: none), polling first while the executor's steps are
  // short. A late step fails, naming the kernels still running.
  Result<std::vector<Tensor>> run_step(Executor& ex, const std::vector<Tensor>& feeds, int64_t global_step,
                                       int64_t timeout_ms);

  // Stops the executors (steps in flight are cancelled) and writes the trace, if asked.
  Status close();

  const Graph& graph() const { return graph_; }
  const SessionOptions& options() const { return opts_; }
  ResourceMgr& resources() { return *resources_; }

 private:
  const Graph& graph_;
  SessionOptions opts_;
  AllocatorHandle allocator_;
  CpuDevice device_;
  std::shared_ptr<ResourceMgr> resources_;
  KernelCache kernels_;
  std::unique_ptr<Tracer> tracer_;
  ExecutorEnv env_;
  ExecutorCache executors_;
  std::mutex mu_;
  bool closed_ = false;
};

}  // namespace actorflow::runtime
