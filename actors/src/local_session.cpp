// The "local" session backend: one executor (a set of node actors) per kind of step, in
// the executor cache a partition uses too; a view of the process's CPU pool with the
// session's allocator; and the session's variables.
#include <atomic>
#include <list>
#include <map>
#include <mutex>
#include <set>

#include "actorflow/collective.h"
#include "actorflow/ops/cpu_device.h"
#include "actorflow/ops/cuda_info.h"
#include "actorflow/session.h"
#include "executor_cache.h"

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
        device_(opts.intra_op_threads, 0, allocator_.get()),
        env_(make_executor_env(opts, &device_, &resources_, &kernels_)), executors_(graph_, opts_, env_) {
    // The collective ops' group, found by their kernels among the session's resources.
    if (opts.collective_group)
      (void)resources_.get<CollectiveGroup>(kCollectiveGroupResource, [&] { return opts.collective_group; });
    if (opts.trace || !opts.trace_path.empty()) {
      tracer_ = std::make_unique<Tracer>();
      env_.tracer = tracer_.get();
    }
  }
  ~LocalSession() override { (void)close(); }

  Status check() const { return check_kernels(graph_, DeviceType::CPU); }

  Result<std::vector<Tensor>> run(const RunRequest& req) override {
    AF_ASSIGN_OR_RETURN(std::shared_ptr<Executor> ex, executors_.get(req));
    std::vector<Tensor> feeds;
    feeds.reserve(req.feeds.size());
    for (auto& [out, value] : req.feeds) {
      AF_RETURN_IF_ERROR(validate_feed(out, value));
      feeds.push_back(value);
    }
    return run_step(*ex, feeds, req.options);
  }

  Result<std::shared_ptr<PreparedStep>> prepare(const RunRequest& req) override {
    AF_ASSIGN_OR_RETURN(std::shared_ptr<Executor> ex, executors_.get(req));
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
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) return Status::OK();
      closed_ = true;
    }
    executors_.shutdown();
    if (tracer_ && !opts_.trace_path.empty()) return tracer_->write(opts_.trace_path);
    return Status::OK();
  }

 private:
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

  Graph& graph_;
  SessionOptions opts_;
  AllocatorHandle allocator_;
  CpuDevice device_;
  ResourceMgr resources_;
  KernelCache kernels_;
  std::unique_ptr<Tracer> tracer_;
  ExecutorEnv env_;
  ExecutorCache executors_;
  std::mutex mu_;
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
