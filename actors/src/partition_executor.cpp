// A partition executor: a Partition (partition.h, what a local session runs too) with
// the rendezvous of its _Send and _Recv nodes, whose steps start with the caller's step
// id and name their feeds and fetches.
#include "actorflow/runtime/partition_executor.h"

#include <atomic>
#include <map>
#include <mutex>

#include "partition.h"

namespace actorflow::runtime {
namespace {

class PartitionExecutorImpl final : public PartitionExecutor {
 public:
  PartitionExecutorImpl(std::unique_ptr<Graph> graph, std::shared_ptr<EdgeRendezvous> rendezvous, const SessionOptions& opts,
                        std::shared_ptr<ResourceMgr> resources)
      : graph_(std::move(graph)), rendezvous_(std::move(rendezvous)),
        partition_(*graph_, opts, std::move(resources), rendezvous_.get()) {}

  ~PartitionExecutorImpl() override {
    rendezvous_->abort_all(cancelled("the partition at " + rendezvous_->location() + " is closing"));
    std::lock_guard<std::mutex> lock(mu_);
    (void)partition_.close();
  }

  Status init() {
    // The kernels find this partition's rendezvous in their context.
    for (int i = 0; i < graph_->num_nodes(); ++i) {
      const Node& n = graph_->node(i);
      if (n.op == "_Recv") rendezvous_->expect_edge(n.attr_int("edge_id"), n.attr_string("send_task"));
      if (n.op == "_Send" || n.op == "_Recv") {
        rendezvous_->name_edge(n.attr_int("edge_id"), n.attr_string("tensor_name"));
        sends_.push_back(i);
      }
    }
    return check_kernels(*graph_, DeviceType::CPU);
  }

  Result<std::vector<Tensor>> run_step(int64_t step_id, const std::vector<std::pair<std::string, Tensor>>& feeds,
                                       const std::vector<std::string>& fetches, const std::vector<std::string>& targets,
                                       int64_t timeout_ms) override {
    auto started = start_step(step_id, feeds, fetches, targets, timeout_ms);
    if (!started.ok()) return started.status();
    return finish_step(**started);
  }

  Result<std::shared_ptr<StartedStep>> start_step(int64_t step_id, const std::vector<std::pair<std::string, Tensor>>& feeds,
                                                  const std::vector<std::string>& fetches,
                                                  const std::vector<std::string>& targets, int64_t timeout_ms) override {
    auto r = start(step_id, feeds, fetches, targets, timeout_ms);
    if (!r.ok()) rendezvous_->abort_step(step_id, r.status());
    return r;
  }

  Result<std::vector<Tensor>> finish_step(StartedStep& started) override {
    auto r = wait(static_cast<Started&>(started));
    if (!r.ok()) rendezvous_->abort_step(started.step_id(), r.status());
    return r;
  }

  void abort_step(int64_t step_id, const Status& why) override { rendezvous_->abort_step(step_id, why); }
  const Graph& graph() const override { return *graph_; }
  const std::string& location() const override { return rendezvous_->location(); }

 private:
  struct Started final : StartedStep {
    Started(int64_t id) : StartedStep(id) {}
    bool ended() const override { return !ex || state->done(); }
    std::shared_ptr<Executor> ex;
    std::shared_ptr<StepState> state;
    int64_t timeout_ms = 0;
    std::chrono::steady_clock::time_point deadline;
  };

  Result<std::shared_ptr<StartedStep>> start(int64_t step_id, const std::vector<std::pair<std::string, Tensor>>& feeds,
                                             const std::vector<std::string>& fetches,
                                             const std::vector<std::string>& targets, int64_t timeout_ms) {
    std::vector<Tensor> values;
    std::shared_ptr<Executor> ex;
    auto started = std::make_shared<Started>(step_id);
    started->timeout_ms = timeout_ms;
    started->deadline = timeout_ms > 0 ? std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms)
                                       : StepState::kNoDeadline;
    {
      std::lock_guard<std::mutex> lock(mu_);
      RunRequest req;
      for (auto& [name, value] : feeds) {
        AF_ASSIGN_OR_RETURN(Output o, graph_->find_output(name));
        AF_RETURN_IF_ERROR(validate_feed(o, value));
        req.feeds.push_back({o, value});
        values.push_back(value);
      }
      for (auto& name : fetches) {
        AF_ASSIGN_OR_RETURN(Output o, graph_->find_output(name));
        req.fetches.push_back(o);
      }
      for (auto& name : targets) {
        const Node* n = graph_->find_node(name);
        if (!n) return invalid_argument("partition " + location() + " has no node '" + name + "' to run");
        req.targets.push_back(Operation(graph_.get(), n->id));
      }
      for (int s : sends_) req.targets.push_back(Operation(graph_.get(), s));
      // A partition that exchanges nothing and is asked for nothing has no work this step.
      if (req.fetches.empty() && req.targets.empty()) return std::shared_ptr<StartedStep>(started);
      AF_ASSIGN_OR_RETURN(ex, partition_.executor(req));
      // Started under the lock: steps begin in the order callers asked, which is the
      // order their node actors fire them in.
      started->ex = ex;
      started->state = ex->start(values, step_id);
    }
    // A kernel that fails ends the step at this partition at once: its _Recv nodes would
    // otherwise wait until the deadline for edges that the failure keeps the other
    // partitions from sending (a read of a variable a restarted ps lost, while the worker
    // waits for that read), and only a finished partition tells its client, which then
    // ends the others. The rendezvous runs the waiting kernels' callbacks outside its lock,
    // and those only post to their actors, so the failing thread may abort it itself.
    started->state->on_first_error(
        [rendezvous = rendezvous_, step_id](const Status& why) { rendezvous->abort_step(step_id, why); });
    return std::shared_ptr<StartedStep>(started);
  }

  Result<std::vector<Tensor>> wait(Started& s) {
    if (!s.ex) return std::vector<Tensor>{};
    // A partition's waiter is a daemon's worker thread: it sleeps at once, since the
    // cores belong to the step's node actors (and to the other processes of a cluster).
    if (!s.state->wait(std::chrono::microseconds(0), s.deadline, std::chrono::microseconds(0))) {
      // What it still waits for says which peer (or which credit) held it.
      std::string waits = rendezvous_->describe_waits(s.step_id());
      const std::string running = s.state->describe_running();
      if (!running.empty()) waits += (waits.empty() ? "" : "; ") + std::string("kernels still running: ") + running;
      Status late = deadline_exceeded("step " + std::to_string(s.step_id()) + " did not finish at " + location() +
                                      " within " + std::to_string(s.timeout_ms) + " ms" +
                                      (waits.empty() ? std::string(" (no edge, credit or kernel pending)") : " (waiting for " + waits + ")"));
      rendezvous_->abort_step(s.step_id(), late);
      // The aborted _Send/_Recv nodes now finish; give the step a moment to drain.
      (void)s.state->wait(std::chrono::microseconds(0), std::chrono::steady_clock::now() + std::chrono::seconds(5));
      return late;
    }
    Status st = s.state->status();
    if (!st.ok()) return st;
    return std::move(s.state->results());
  }

  std::unique_ptr<Graph> graph_;
  std::shared_ptr<EdgeRendezvous> rendezvous_;
  Partition partition_;
  std::vector<int> sends_;  // _Send and _Recv nodes: both run every step
  std::mutex mu_;
};

}  // namespace

Result<std::unique_ptr<PartitionExecutor>> make_partition_executor(std::unique_ptr<Graph> graph,
                                                                   std::shared_ptr<EdgeRendezvous> rendezvous,
                                                                   const SessionOptions& opts,
                                                                   std::shared_ptr<ResourceMgr> resources) {
  if (!graph || !rendezvous) return invalid_argument("make_partition_executor: no graph or no rendezvous");
  auto ex = std::make_unique<PartitionExecutorImpl>(std::move(graph), std::move(rendezvous), opts, std::move(resources));
  AF_RETURN_IF_ERROR(ex->init());
  return std::unique_ptr<PartitionExecutor>(std::move(ex));
}

}  // namespace actorflow::runtime
