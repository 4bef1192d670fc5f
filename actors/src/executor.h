// One prepared kind of step: the actors of one pruned graph, reused for every step that
// asks for the same fetches, feeds and targets. CAF stays behind this header.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>

#include "actorflow/kernel.h"
#include "actorflow/resource_mgr.h"
#include "actorflow/runtime/step_plan.h"
#include "step_state.h"
#include "tracer.h"

namespace actorflow::runtime {

// One kernel object per node for the whole session, shared by every executor (every
// distinct fetch list), so stateful kernels (random ops, dropout) continue their streams
// whatever is fetched. Stateful kernels come with a mutex: two executors may fire the same
// node concurrently.
class KernelCache {
 public:
  struct Entry {
    std::shared_ptr<OpKernel> kernel;
    std::shared_ptr<std::mutex> mu;  // set for stateful ops
  };
  // The kernel of `node` for `device` (a GPU kernel for nodes placed on a GPU).
  Result<Entry> get(const Node& node, DeviceId device = {});

 private:
  std::mutex mu_;
  // By node id, op and device: a node constant-folded for one plan runs a Const kernel
  // there and its own kernel in plans that feed its inputs.
  std::map<std::tuple<int, std::string, int>, Entry> entries_;
};

struct ExecutorEnv {
  DeviceContext* device = nullptr;
  ResourceMgr* resources = nullptr;
  Tracer* tracer = nullptr;  // null: tracing off
  KernelCache* kernels = nullptr;
  int edge_capacity = 2;
  bool encode_all_edges = false;
  std::set<std::string> encode_nodes;  // edges touching these nodes are encoded
  // The session's half of the run path's switches (GraphOptimizerOptions); the
  // process-wide RunPath can still turn each off.
  bool colocate_cheap_ops = true;
  bool caller_runs_small_steps = true;
  // A partition's rendezvous, handed to every kernel context (null in a local session).
  Rendezvous* rendezvous = nullptr;
};

class Executor {
 public:
  virtual ~Executor() = default;
  // Starts one step with one tensor per planned feed (already validated); the returned
  // state completes when every fetch and target has reported. A step may run to its end
  // on the calling thread (see run_path.h); `has_deadline` keeps a plan of heavy
  // kernels on the actors, so that the caller can stop waiting at the deadline.
  virtual std::shared_ptr<StepState> start(const std::vector<Tensor>& feeds, int64_t global_step, bool has_deadline) = 0;
  std::shared_ptr<StepState> start(const std::vector<Tensor>& feeds, int64_t global_step) {
    return start(feeds, global_step, true);
  }
  // Stops the actors and cancels steps in flight.
  virtual void shutdown() = 0;
  virtual int num_actors() const = 0;
  // Not OK once the executor can run no more steps (one of its actors died); the session
  // then drops it and prepares the plan afresh.
  virtual Status health() const = 0;

  // How long the caller should busy-wait for a step of this executor: only while its
  // waits are short (a moving average of how long callers waited for a step that was not
  // done when start() returned).
  std::chrono::microseconds spin_budget() const {
    // Twice the typical wait, within [20, 200] us; long ones get the 20 us floor (a step
    // measured slow once, e.g. while cold, must not lock the caller into sleeping).
    int64_t avg_us = avg_step_ns_.load(std::memory_order_relaxed) / 1000;
    if (avg_us > 1000) return std::chrono::microseconds(20);
    return std::chrono::microseconds(std::clamp<int64_t>(2 * avg_us, 20, 200));
  }
  void record_step(std::chrono::nanoseconds d) {
    int64_t old = avg_step_ns_.load(std::memory_order_relaxed);
    avg_step_ns_.store(old == 0 ? d.count() : (old * 7 + d.count()) / 8, std::memory_order_relaxed);
  }

 private:
  std::atomic<int64_t> avg_step_ns_{0};
};

class OptimizedPlan;

// Creates the kernels (errors name the node) and spawns one actor per node of the plan
// (after its graph passes).
Result<std::unique_ptr<Executor>> make_actor_executor(std::shared_ptr<const OptimizedPlan> plan, const ExecutorEnv& env);

}  // namespace actorflow::runtime
