// What the cluster training loops (ps_loop.cpp, in_graph_loop.cpp, allreduce_loop.cpp)
// share: waiting for the cluster, recovering lost variables, the schedule, the data
// shard, the tally of steps and losses, going on after a failed step and the traffic
// counters.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actorflow/net/daemon.h"
#include "actorflow/net/tcp_bytes.h"
#include "actorflow/net/training_loop.h"
#include "actorflow/saver.h"
#include "actorflow/summary.h"

namespace actorflow::net::training {

using Clock = std::chrono::steady_clock;

// invalid_argument for options or data no loop can train with: a batch of no rows, a
// missing stream, or x and y splits whose rows do not pair up.
Status check_inputs(const TrainingData& data, const TrainingLoopOptions& o);

// What a lost or restarted task looks like from a step: waiting (and restoring) cures it.
bool retryable(const Status& s);

// Runs `attempt` until it succeeds, fails with an error that waiting cannot cure, or the
// deadline passes; says on `log` once (then every 10 s) what it waits for.
Status wait_for(std::ostream& log, const std::string& what, Clock::time_point deadline,
                const std::function<Status()>& attempt);

// The global step, waited for like the cluster itself: reading it is a new kind of step
// whose partitions a loaded ps may register late.
Result<int64_t> read_global_step(Session& sess, const Output& step, const TrainingLoopOptions& o);

// OK once no variable is missing from its ps; failed_precondition (which wait_for retries)
// naming the first missing ones while some are. `report`: report_uninitialized_variables.
Status all_initialized(Session& sess, const Output& report);

// Waits until every variable holds a value again (and `also`, when given, succeeds): the
// chief (`saver` set) restores the last checkpoint, or initializes afresh, when a ps came
// back without its share.
Status recover_cluster(Session& sess, const Output& uninitialized, Saver* saver, const TrainingLoopOptions& o,
                       const std::string& self, const std::function<Status()>& also = {});

// How long training runs: o.epochs epochs of `n_train` examples (or o.max_steps), when
// one global step consumes `examples_per_step` examples.
struct Schedule {
  int64_t steps_per_epoch = 1;
  int64_t target = 0;  // the global step that ends training
};
Schedule schedule(const TrainingLoopOptions& o, int64_t n_train, int64_t examples_per_step);

// The optimizer a model without its own trains with: the caller's, or one made by the
// options' factory (kept alive in `owned`), or SGD at 0.01.
optim::Optimizer* loop_optimizer(const TrainableModel& m, optim::Optimizer* given, const TrainingLoopOptions& o,
                                 Graph& g, const Output& step, int64_t steps_per_epoch,
                                 std::unique_ptr<optim::Optimizer>& owned);

// Rows `order[b..e)` of t, as one tensor.
Tensor gather_rows(const Tensor& t, const std::vector<int64_t>& order, size_t b, size_t e);

// A batch of x rows as the model's x takes them (TrainingData::features).
Tensor batch_features(const TrainingData& data, Tensor rows);

// This worker's shard of the training rows: every num_workers-th record from `worker`.
struct Shard {
  Tensor x, y;
};
Shard shard_of(const TrainingData& data, int worker, int num_workers);

// The mean loss over this task's latest steps (TrainResult::last_loss: the last epoch's),
// for the progress lines too: a mean since the process started says little once a
// restarted task has trained a while.
class RecentLoss {
 public:
  explicit RecentLoss(int64_t steps) : cap_(static_cast<size_t>(std::max<int64_t>(1, steps))) {}
  void add(double loss);
  double mean() const { return window_.empty() ? 0 : sum_ / static_cast<double>(window_.size()); }

 private:
  size_t cap_;
  std::deque<double> window_;
  double sum_ = 0;
};

// What a loop counts of its own steps, for its TrainResult.
class StepTally {
 public:
  // `recent_steps`: the window of RecentLoss.
  explicit StepTally(int64_t recent_steps) : recent_(recent_steps) {}
  // A step done: its fetches begin {loss, the global step after it}, and it trained on
  // `rows` examples. Returns the loss and sets `gstep`.
  double add(const std::vector<Tensor>& fetched, size_t rows, int64_t& gstep);
  int64_t local_steps() const { return local_steps_; }
  int64_t examples() const { return examples_; }
  double recent_loss() const { return recent_.mean(); }
  // steps, epochs, first_loss, last_loss and this task's examples_per_second (r.seconds
  // set before).
  void finish(TrainResult& r, int64_t gstep, int64_t steps_per_epoch) const;

 private:
  int64_t local_steps_ = 0, examples_ = 0, first_count_ = 0;
  double first_sum_ = 0;  // of the first 20 losses
  RecentLoss recent_;
};

// How a loop carries on after a step failed because a task was lost: it says so on the
// log, waits (`rejoin`, which returns the global step to go on from), and says so again.
struct StepRecovery {
  std::ostream* log = nullptr;
  std::string self;      // who says it: the task's name
  std::string context;   // who failed, for an error waiting cannot cure
  std::string awaited;   // "the cluster to recover": what the loop waits for
  std::string back;      // "the cluster": what "is back at global step N"
  std::function<Result<int64_t>()> rejoin;
  std::function<std::string()> note = {};  // said after the global step it is back at

  // The step at `gstep` failed with `failed`: OK, with `gstep` where training goes on,
  // once a retryable failure is waited out; the error otherwise.
  Status after(const Status& failed, int64_t& gstep) const;
};

// The trainable variables' bytes.
int64_t model_bytes(const Graph& g);

// The GPU that the graph's collective ops are placed on (the first one's), or -1 when
// they are left to the host.
int collective_gpu(const Graph& g);

// What the edges and the sockets of this process had moved at one moment.
struct TrafficMark {
  EdgeTraffic edges = edge_traffic();
  std::map<uint64_t, TcpSocketBytes> sockets = tcp_socket_bytes();
};
// The wire and socket bytes per step since `before`, and the model's bytes, into r.
void note_traffic(TrainResult& r, const TrafficMark& before, int64_t steps, const Graph& g);

// The chief's summary writer (and its graph), or none, said on o.log, when the folder
// cannot be written.
std::optional<SummaryWriter> chief_summaries(const Graph& g, const TrainingLoopOptions& o);

// "global step 120/600  loss 0.31  (4.20 s)" on o.out.
void report_progress(const TrainingLoopOptions& o, int64_t gstep, int64_t target, double loss, Clock::time_point started);

// Whether save_checkpoint_secs have passed since the chief's last checkpoint.
bool save_period_passed(const TrainingLoopOptions& o, Clock::time_point last_save);

// The chief's last words: test evaluation, the final checkpoint and summary, and the
// Shutdown that lets every serving task (ps, and the workers of in-graph replication) exit 0.
Status chief_finish(Session& sess, const TrainableModel& m, const TrainingData& data, const TrainingLoopOptions& o,
                    const TrainingTask& task, Saver& saver, std::optional<SummaryWriter>& writer, int64_t gstep,
                    TrainResult& r);

}  // namespace actorflow::net::training
