// The "local" session backend: one executor (a set of node actors) per kind of step, kept
// in a bounded LRU cache; a view of the process's CPU pool with the session's allocator;
// and the session's variables.
#include <atomic>
#include <list>
#include <map>
#include <mutex>
#include <set>

#include "actorflow/collective.h"
#include "actorflow/ops/cpu_device.h"
#include "actorflow/ops/cuda_info.h"
#include "actorflow/session.h"
#include "executor.h"
#include "gpu_plan.h"
#include "graph_passes.h"

namespace actorflow::runtime {
namespace {

AllocatorHandle session_allocator(const SessionOptions& opts) {
  if (opts.memory_limit_bytes <= 0) return nullptr;
  return make_limited_allocator(cpu_allocator(), opts.memory_limit_bytes);
}

class LocalSession final : public SessionImpl {
 public:
  LocalSession(Graph& g, const SessionOptions& opts)
      : graph_(g), opts_(opts), allocator_(session_allocator(opts)),
        device_(opts.intra_op_threads, 0, allocator_.get()) {
    env_.device = &device_;
    env_.resources = &resources_;
    // The collective ops' group, found by their kernels among the session's resources.
    if (opts.collective_group)
      (void)resources_.get<CollectiveGroup>(kCollectiveGroupResource, [&] { return opts.collective_group; });
    env_.kernels = &kernels_;
    env_.edge_capacity = opts.edge_capacity < 1 ? 1 : opts.edge_capacity;
    env_.colocate_cheap_ops = opts.optimizer.colocate_cheap_ops;
    env_.caller_runs_small_steps = opts.optimizer.caller_runs_small_steps;
    env_.encode_all_edges = opts.encode_all_edges;
    env_.encode_nodes.insert(opts.encode_edges_of.begin(), opts.encode_edges_of.end());
    if (opts.trace || !opts.trace_path.empty()) {
      tracer_ = std::make_unique<Tracer>();
      env_.tracer = tracer_.get();
    }
  }
  ~LocalSession() override { (void)close(); }

  Status check() const { return check_kernels(graph_, DeviceType::CPU); }

  Result<std::vector<Tensor>> run(const RunRequest& req) override {
    AF_ASSIGN_OR_RETURN(std::shared_ptr<Executor> ex, executor_for(req));
    std::vector<Tensor> feeds;
    feeds.reserve(req.feeds.size());
    for (auto& [out, value] : req.feeds) {
      AF_RETURN_IF_ERROR(validate_feed(out, value));
      feeds.push_back(value);
    }
    return run_step(*ex, feeds, req.options);
  }

  Result<std::shared_ptr<PreparedStep>> prepare(const RunRequest& req) override {
    AF_ASSIGN_OR_RETURN(std::shared_ptr<Executor> ex, executor_for(req));
    std::vector<Output> fed;
    for (auto& [out, value] : req.feeds) fed.push_back(out);
    return std::shared_ptr<PreparedStep>(std::make_shared<Prepared>(this, std::move(ex), std::move(fed)));
  }

  // Starts one step on `ex` and waits for it, within the run's or the session's deadline.
  Result<std::vector<Tensor>> run_step(Executor& ex, const std::vector<Tensor>& feeds, const RunOptions& options) {
    int64_t timeout_ms = options.timeout_ms > 0 ? options.timeout_ms : opts_.step_timeout_ms;
    auto t0 = std::chrono::steady_clock::now();
    auto deadline = timeout_ms > 0 ? t0 + std::chrono::milliseconds(timeout_ms) : StepState::kNoDeadline;
    auto state = ex.start(feeds, ++global_step_, timeout_ms > 0);
    if (!state->wait(ex.spin_budget(), deadline)) {
      const std::string running = state->describe_running();
      return deadline_exceeded("the step did not finish within " + std::to_string(timeout_ms) + " ms" +
                               (running.empty() ? std::string() : " (still running: " + running + ")"));
    }
    ex.record_step(std::chrono::steady_clock::now() - t0);
    Status s = state->status();
    if (!s.ok()) return s;
    return std::move(state->results());
  }

  Status close() override {
    std::list<Cached> executors;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return Status::OK();
      closed_ = true;
      executors.swap(lru_);
      index_.clear();
    }
    for (auto& c : executors) c.executor->shutdown();
    if (tracer_ && !opts_.trace_path.empty()) return tracer_->write(opts_.trace_path);
    return Status::OK();
  }

 private:
  struct Cached {
    std::string key;
    std::shared_ptr<Executor> executor;
  };

  // A callable's step: it holds its executor, so the LRU never evicts it (use count > 1),
  // and it checks only the feeds' dtypes and shapes per call.
  class Prepared final : public PreparedStep {
   public:
    Prepared(LocalSession* session, std::shared_ptr<Executor> ex, std::vector<Output> fed)
        : session_(session), ex_(std::move(ex)), fed_(std::move(fed)) {}
    Result<std::vector<Tensor>> run(const std::vector<Tensor>& feeds, const RunOptions& options) override {
      for (size_t i = 0; i < feeds.size(); ++i) AF_RETURN_IF_ERROR(validate_feed(fed_[i], feeds[i]));
      return session_->run_step(*ex_, feeds, options);
    }

   private:
    LocalSession* session_;
    std::shared_ptr<Executor> ex_;
    std::vector<Output> fed_;
  };

  // The executor of this kind of step, prepared on first use. A broken one (an actor
  // died) is replaced; past max_cached_plans the least recently used idle one goes.
  Result<std::shared_ptr<Executor>> executor_for(const RunRequest& req) {
    std::vector<std::shared_ptr<Executor>> retired;
    std::shared_ptr<Executor> ex;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return failed_precondition("session is closed");
      std::string key = step_plan_key(graph_, req);
      auto it = index_.find(key);
      if (it != index_.end() && !it->second->executor->health().ok()) {
        retired.push_back(it->second->executor);
        lru_.erase(it->second);
        index_.erase(it);
        it = index_.end();
      }
      if (it == index_.end()) {
        AF_ASSIGN_OR_RETURN(StepPlan plan, make_step_plan(graph_, req));
        AF_RETURN_IF_ERROR(check_kernels(graph_, DeviceType::CPU, plan.nodes));
        GraphOptimizerOptions optimizer = opts_.optimizer;
        // Only where a GPU exists (asking loads nothing on a machine without one): else the
        // graph runs on the CPU exactly as if it named no device.
        const bool gpu = graph_asks_for_gpu(graph_) && cuda_device_count() > 0;
        // Fused elementwise nodes have no GPU kernel: nodes placed on a GPU stay unfused.
        if (gpu) optimizer.fuse_elementwise = false;
        AF_ASSIGN_OR_RETURN(std::shared_ptr<OptimizedPlan> optimized, optimize_plan(graph_, std::move(plan), optimizer));
        if (gpu) {
          GpuPlanOptions g;
          g.logged = &placement_logged_;
          g.logged_mu = &placement_mu_;
          AF_RETURN_IF_ERROR(place_plan_on_gpus(graph_, *optimized, g));
        }
        AF_ASSIGN_OR_RETURN(std::unique_ptr<Executor> made, make_actor_executor(std::move(optimized), env_));
        lru_.push_front(Cached{key, std::shared_ptr<Executor>(std::move(made))});
        index_[key] = lru_.begin();
        evict_idle(retired);
      } else {
        lru_.splice(lru_.begin(), lru_, it->second);
      }
      ex = lru_.front().executor;
    }
    for (auto& r : retired) r->shutdown();
    return ex;
  }

  // Oldest first, skipping executors a run is using (their use count is above ours).
  void evict_idle(std::vector<std::shared_ptr<Executor>>& retired) {
    size_t cap = static_cast<size_t>(opts_.max_cached_plans < 1 ? 1 : opts_.max_cached_plans);
    for (auto it = std::prev(lru_.end()); lru_.size() > cap && it != lru_.begin();) {
      auto prev = std::prev(it);
      if (it->executor.use_count() == 1) {
        retired.push_back(it->executor);
        index_.erase(it->key);
        lru_.erase(it);
      }
      it = prev;
    }
  }

  Graph& graph_;
  SessionOptions opts_;
  AllocatorHandle allocator_;
  CpuDevice device_;
  ResourceMgr resources_;
  KernelCache kernels_;
  std::mutex placement_mu_;
  std::set<std::string> placement_logged_;  // soft placement's lines, each printed once
  std::unique_ptr<Tracer> tracer_;
  ExecutorEnv env_;
  std::mutex mu_;
  std::list<Cached> lru_;  // most recently used first
  std::map<std::string, std::list<Cached>::iterator> index_;
  std::atomic<int64_t> global_step_{0};
  bool closed_ = false;
};

struct Registration {
  Registration() {
    register_session_factory("local", [](Graph& g, const SessionOptions& o) -> Result<std::unique_ptr<SessionImpl>> {
      auto s = std::make_unique<LocalSession>(g, o);
      AF_RETURN_IF_ERROR(s->check());
      return std::unique_ptr<SessionImpl>(std::move(s));
    });
  }
} registration;

}  // namespace
}  // namespace actorflow::runtime
