// The "local" session backend: one executor (a set of node actors) per kind of step,
// a CPU device with its thread pool, and the session's variables.
#include <atomic>
#include <map>
#include <mutex>

#include "actorflow/ops/cpu_device.h"
#include "actorflow/session.h"
#include "executor.h"

namespace actorflow::runtime {
namespace {

class LocalSession final : public SessionImpl {
 public:
  LocalSession(Graph& g, const SessionOptions& opts) : graph_(g), opts_(opts), device_(opts.intra_op_threads) {
    env_.device = &device_;
    env_.resources = &resources_;
    env_.kernels = &kernels_;
    env_.edge_capacity = opts.edge_capacity < 1 ? 1 : opts.edge_capacity;
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
    std::shared_ptr<Executor> ex;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return failed_precondition("session is closed");
      std::string key = step_plan_key(graph_, req);
      auto it = executors_.find(key);
      if (it == executors_.end()) {
        AF_ASSIGN_OR_RETURN(StepPlan plan, make_step_plan(graph_, req));
        AF_RETURN_IF_ERROR(check_kernels(graph_, DeviceType::CPU, plan.nodes));
        AF_ASSIGN_OR_RETURN(std::unique_ptr<Executor> made, make_actor_executor(graph_, plan, env_));
        it = executors_.emplace(key, std::shared_ptr<Executor>(std::move(made))).first;
      }
      ex = it->second;
    }
    for (auto& [out, value] : req.feeds) AF_RETURN_IF_ERROR(validate_feed(out, value));
    auto t0 = std::chrono::steady_clock::now();
    auto state = ex->start(req, ++global_step_);
    state->wait(ex->spin_budget());
    ex->record_step(std::chrono::steady_clock::now() - t0);
    Status s = state->status();
    if (!s.ok()) return s;
    return std::move(state->results());
  }

  Status close() override {
    std::map<std::string, std::shared_ptr<Executor>> executors;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return Status::OK();
      closed_ = true;
      executors.swap(executors_);
    }
    for (auto& [k, ex] : executors) ex->shutdown();
    if (tracer_ && !opts_.trace_path.empty()) return tracer_->write(opts_.trace_path);
    return Status::OK();
  }

 private:
  Graph& graph_;
  SessionOptions opts_;
  CpuDevice device_;
  ResourceMgr resources_;
  KernelCache kernels_;
  std::unique_ptr<Tracer> tracer_;
  ExecutorEnv env_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Executor>> executors_;
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
