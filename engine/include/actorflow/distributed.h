// Distributed training in the graph, as TF1 writes it: where the variables live
// (replica_device_setter) and how the updates of several workers meet on the parameter
// servers (sync replicas with a gradient accumulator per variable, bounded staleness,
// the end of training). The state these ops share lives on the ps tasks; the workers'
// sessions meet in it through SessionOptions::shared_container.
//
//   af::DeviceScope placement(g, af::train::replica_device_setter(2, "/job:worker/task:1"));
//   ... build the model: variables go to /job:ps/task:0 and 1, the rest to the worker ...
//   auto sync = af::train::sync_replicas_minimize(opt, loss, step, /*worker=*/1, {.replicas_to_aggregate = 2});
//   // chief: run sync.chief_step, others sync.worker_step, feeding sync.local_step
#pragma once
#include "actorflow/api.h"
#include <functional>
#include <string>
#include <vector>

#include "actorflow/graph.h"
#include "actorflow/optimizers.h"

AF_PUBLIC_BEGIN

namespace actorflow::train {

enum class PsStrategy {
  round_robin,      // variables to ps tasks 0, 1, 2, ... in the order they are made (TF's default)
  greedy_by_bytes,  // each variable to the ps task holding the fewest bytes so far
};

// TF's tf.train.replica_device_setter, for DeviceScope: every variable goes to a task of
// `ps_job` ("/job:ps/task:k/cpu:0"), with its slots and its initializer; the ops that
// read or update it by name get no device, so the partitioner runs them where it lives;
// every other op goes to `worker_device` unless a scope outside gave it a device. One setter remembers its placements: use one per graph.
std::function<std::string(const Node&)> replica_device_setter(int num_ps_tasks, const std::string& worker_device,
                                                              PsStrategy strategy = PsStrategy::round_robin,
                                                              const std::string& ps_job = "ps");

struct SyncReplicasOptions {
  // Gradients averaged per round; with backup workers, fewer than the workers.
  int replicas_to_aggregate = 1;
  // A round goes on with the gradients that have arrived after this long (and says so),
  // so a dead worker never strands the others; a worker waiting for a round fails after it.
  int64_t timeout_ms = 60000;
};

// TF's SyncReplicasOptimizer without its token queue. A worker computes its gradients at
// round `local_step` (the global step it read) and adds them to each variable's
// accumulator on that variable's ps; a gradient of a round already applied is dropped
// and counted. The chief then takes the mean of `replicas_to_aggregate` gradients per
// variable, applies it once with `opt`, increments `global_step` and opens the next
// round; the other workers wait for that round. Both steps yield the next round to feed.
struct SyncReplicasOps {
  Output local_step;    // int64 scalar placeholder
  Output chief_step;    // the chief's step: the new global step
  Output worker_step;   // another worker's step: the round it waited for
  Output num_stale;     // int64: gradients dropped as stale, over all variables
};
// A gradient of a gather (an embedding lookup) stays sparse: the worker sends the rows it
// touched with their indices, the accumulator sums them row by row (TF's
// SparseConditionalAccumulator), and the optimizer's sparse apply updates those rows only.
SyncReplicasOps sync_replicas_minimize(optim::Optimizer& opt, const Output& loss, const Output& global_step,
                                       int worker_index, const SyncReplicasOptions& options,
                                       const std::vector<Output>& var_list = {});

// An optimizer and the variables it trains (empty: every trainable variable).
struct OptimizerVars {
  optim::Optimizer* optimizer = nullptr;
  std::vector<Output> var_list;
};
// Each part's gradients applied by its optimizer; `global_step` (when valid) moves once,
// after every part's update, as TF's wide & deep estimators group their optimizers. With
// one part, its optimizer's apply_gradients as minimize() builds it. An empty `name`
// keeps each optimizer's own. With a global step, output 0 is the step after the update.
Operation apply_gradients(const std::vector<OptimizerVars>& parts, const std::vector<optim::GradsAndVars>& grads,
                          const Output& global_step, const std::string& name);
// compute_gradients of each part, then apply_gradients above: one training step's update.
Operation minimize(const std::vector<OptimizerVars>& parts, const Output& loss, const Output& global_step);

// The same with one optimizer per group of variables (wide & deep: FTRL for the wide
// part, Adagrad for the deep part); the global step moves once per round, after every
// group's update.
SyncReplicasOps sync_replicas_minimize(const std::vector<OptimizerVars>& parts, const Output& loss, const Output& global_step,
                                       int worker_index, const SyncReplicasOptions& options);

// The workers' clocks, kept on one task: bounded staleness (SSP) and the end of training.
struct WorkerTable {
  std::string device = "/job:ps/task:0/cpu:0";
  int num_workers = 1;
  std::string name = "workers";
};
// Worker `worker` has finished clock `clock` (int64 scalar): waits until every worker still
// training has reached clock - staleness, then yields the slowest clock. staleness 0 is
// lock-step; fails after timeout_ms naming the slowest worker.
Output worker_clock(Graph& g, const WorkerTable& table, int worker, const Output& clock, int64_t staleness,
                    int64_t timeout_ms = 60000);
// Worker `worker` is finished: no clock waits for it any more.
Operation worker_done(Graph& g, const WorkerTable& table, int worker);
// How many workers are finished, once all are or after timeout_ms.
Output wait_workers_done(Graph& g, const WorkerTable& table, int64_t timeout_ms);
// Every clock reported so far, int64 [n, 3]: (worker, clock, slowest clock when it went on).
Output worker_clock_log(Graph& g, const WorkerTable& table);

}  // namespace actorflow::train

AF_PUBLIC_END
