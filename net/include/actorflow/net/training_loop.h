// The training loops of a cluster's training tasks (training_task.h), with what TF1's
// MonitoredTrainingSession gives a chief: it initializes or restores the variables,
// checkpoints, writes summaries, waits for the others, evaluates and tells the serving
// tasks to stop; every task waits for a lost task to come back (a ps restarted empty is
// restored from the last checkpoint by the chief) instead of failing.
//
//   net::TrainableModel m = build(g);                     // under task->place(g)
//   net::TrainingLoopOptions o;  o.epochs = 5;  o.make_optimizer = ...;
//   auto r = net::train_in_cluster(g, m, data, o, *task);  // the chief's r has the test accuracy
//
// Three loops, chosen by the task (train_in_cluster):
//   parameter servers, between-graph: every training task builds the same graph, the
//     variables live on the ps tasks, each task trains on its shard of the data (worker i
//     of n: records i, i+n, ...), async, sync (a round averages the gradients of
//     replicas_to_aggregate workers) or ssp (no worker more than `staleness` clocks ahead);
//   parameter servers, in-graph: the chief alone is a client; each step feeds a tower on
//     every training task its slice of one global batch and applies the averaged
//     gradients once;
//   all-reduce: every training task holds the whole model and averages its gradients with
//     the others through Gloo, bucket by bucket as the backward pass makes them; a lost
//     worker fails every survivor's step, the group forms again when it is back, and the
//     chief's last checkpoint is broadcast.
// Training ends when the global step reaches `epochs` epochs of the whole data (or
// max_steps). Messages go to the options' streams; errors come back as Status.
#pragma once
#include "actorflow/api.h"
#include <cstdint>
#include <functional>
#include <iostream>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "actorflow/distributed.h"
#include "actorflow/dsl.h"
#include "actorflow/optimizers.h"
#include "actorflow/session.h"
#include "actorflow/net/collective.h"
#include "actorflow/net/training_task.h"

AF_PUBLIC_BEGIN

namespace actorflow::net {

// What a loop trains: a supervised model's placeholders and results.
struct TrainableModel {
  Output x;           // features placeholder [?, F]
  Output y;           // labels placeholder [?]
  Output training;    // bool placeholder_with_default(false) (batch norm, dropout), or invalid
  Output loss;        // scalar
  Output accuracy;    // scalar, or invalid
  Output prediction;  // what inference returns, one row per example (saved_model.h)
  // A model trained by several optimizers lists each with the variables it trains (the
  // optimizers live as long as the loop runs); otherwise the loop trains every variable
  // with one optimizer.
  std::vector<train::OptimizerVars> optimizers;

  // `optimizers`, or `fallback` over every trainable variable when it is empty.
  std::vector<train::OptimizerVars> optimizers_or(optim::Optimizer* fallback) const;
};

// The examples: rows of x (f32, or whatever `features` turns into the model's x) and
// labels y, as tensors whose first dimension is the example.
struct TrainingData {
  Tensor x_train, y_train, x_test, y_test;
  // A batch of x rows as the model's x placeholder takes them (e.g. u8 pixels scaled to
  // f32); the rows themselves when empty.
  std::function<Tensor(const Tensor&)> features;
};

// Makes the optimizer of a model without its own, once the loop knows the global step and
// the steps per epoch (a decaying learning rate needs both).
using OptimizerFactory =
    std::function<std::unique_ptr<optim::Optimizer>(Graph& g, const Output& global_step, int64_t steps_per_epoch)>;

enum class SyncMode {
  async,  // each update is applied on the ps as it arrives
  sync,   // a round averages replicas_to_aggregate gradients per variable, applied once
  ssp,    // async, but no worker runs more than `staleness` clocks ahead of the slowest
};
// "async", "sync", "ssp".
const char* sync_mode_name(SyncMode mode);

struct TrainingLoopOptions {
  int batch_size = 64;     // per worker (in-graph: per tower)
  int epochs = 10;         // of the whole data, counted in global steps
  int64_t max_steps = -1;  // > 0: stop at this global step if it comes first
  // Resume from the latest checkpoint in checkpoint_dir (TF's default), or start afresh.
  bool resume = true;
  std::string checkpoint_dir = "./checkpoint";
  std::string summary_dir = "./tensorboard";  // the chief's TensorBoard events
  int steps_to_validate = 100;  // the chief validates on 1000 test rows this often (0: never)
  bool shuffle = true;          // false: every epoch in the data's order
  int64_t seed = 1;             // the shuffles'
  int threads = 0;              // the session's intra-op threads (0: all cores)
  // A model without optimizers of its own trains with the caller's optimizer when one is
  // passed, else with this factory's (plain SGD at 0.01 when it is empty too).
  OptimizerFactory make_optimizer;

  // Parameter servers.
  SyncMode sync_mode = SyncMode::async;
  int replicas_to_aggregate = 0;  // sync: gradients per round (0: workers - backup_workers)
  int backup_workers = 0;         // sync: workers beyond those a round waits for
  int staleness = 2;              // ssp
  int64_t sync_timeout_ms = 60000;  // a round or clock wait gives up (and says so)
  std::string clock_log;            // ssp: the chief writes the ps's clock records here

  int64_t startup_timeout_ms = 120000;  // how long a task waits for the others (and a lost one)
  int64_t step_timeout_ms = 60000;      // a step across the cluster fails (and is retried)
  double save_checkpoint_secs = 600;    // the chief also checkpoints this often
  int64_t save_checkpoint_steps = 0;    // the chief checkpoints every N global steps (0: every epoch)

  // All-reduce.
  int64_t allreduce_bucket_bytes = 25 << 20;  // gradients per all-reduce (0: one each); DDP's 25 MB
  AllReduceAlgorithm allreduce_algorithm = AllReduceAlgorithm::automatic;  // the same on every worker
  std::string trace_path;  // a Chrome trace of this task's kernels (workers add ".worker<i>")

  int64_t slow_step_ms = 0;  // a test hook: sleep this long before every step

  std::ostream* out = &std::cout;  // progress ("global step 120/600 loss ..."), resumption
  std::ostream* log = &std::cerr;  // waits, recoveries, warnings
};

struct TrainResult {
  double test_accuracy = 0;  // the chief's, on the whole test split
  double test_loss = 0;
  double first_loss = 0;  // mean loss over the first steps: "does the loss fall"
  double last_loss = 0;   // mean loss over the last epoch's steps
  int epochs = 0;
  int64_t steps = 0;  // the global step reached
  double seconds = 0;
  // This task's examples per second; the chief's is the cluster's (every worker's examples).
  double examples_per_second = 0;
  // After the first kWarmupStepsPerWorker steps of each worker (steady_rate.h); 0 when the
  // run was not longer than that.
  double steady_examples_per_second = 0;
  // Tensor bytes this task's daemon sent to and received from the others per step, and the
  // trainable variables' bytes (a worker step moves about twice the model). All-reduce:
  // what this task's sockets sent per step.
  double wire_bytes_per_step = 0;
  int64_t model_bytes = 0;
  // Parameter servers: the TCP bytes this task's sockets sent (acknowledged) and received
  // per step, frames and heartbeats included (the kernel's counters, as ss -ti reads them).
  double socket_bytes_per_step = 0;
  // All-reduce: the bytes Gloo's all-reduce sent per step (2 (n - 1) / n of the model on
  // a ring).
  double allreduce_bytes_per_step = 0;
};

// Mean loss and accuracy (0 without one) of `m` over the rows (x, y), in batches of 1000,
// with m.training fed false.
Status evaluate(Session& sess, const TrainableModel& m, const Tensor& x, const Tensor& y, double* loss,
                double* accuracy);

// Each loop first checks its inputs: invalid_argument for a batch_size below 1, a null
// stream, or splits whose x and y differ in rows.

// Parameter servers, between-graph replication. `optimizer`, when given, trains a model
// without optimizers of its own.
Result<TrainResult> train_with_ps(Graph& g, TrainableModel& m, const TrainingData& data, const TrainingLoopOptions& o,
                                  TrainingTask& task, optim::Optimizer* optimizer = nullptr);

// Parameter servers, in-graph replication (task.in_graph, on the chief). `m` is the
// chief's tower; `build_tower` makes one more per other training task, under that task's
// device and a reusing variable scope, so all towers share the variables on the ps. The
// model must not list optimizers of its own.
Result<TrainResult> train_in_graph(Graph& g, TrainableModel& m, const std::function<TrainableModel(Graph&)>& build_tower,
                                   const TrainingData& data, const TrainingLoopOptions& o, TrainingTask& task);

// All-reduce (task.allreduce). `optimizer` as for train_with_ps.
Result<TrainResult> train_allreduce(Graph& g, TrainableModel& m, const TrainingData& data, const TrainingLoopOptions& o,
                                    TrainingTask& task, optim::Optimizer* optimizer = nullptr);

// The loop the task calls for: all-reduce, in-graph (with build_tower) or between-graph.
Result<TrainResult> train_in_cluster(Graph& g, TrainableModel& m, const TrainingData& data, const TrainingLoopOptions& o,
                                     TrainingTask& task, optim::Optimizer* optimizer = nullptr,
                                     const std::function<TrainableModel(Graph&)>& build_tower = {});

}  // namespace actorflow::net

AF_PUBLIC_END
