// One graph run in this process (partition.h).
#include "partition.h"

#include "actorflow/collective.h"

namespace actorflow::runtime {
namespace {

AllocatorHandle session_allocator(const SessionOptions& opts) {
  if (opts.memory_limit_bytes <= 0) return nullptr;
  return make_limited_allocator(cpu_allocator(), opts.memory_limit_bytes);
}

}  // namespace

Partition::Partition(const Graph& g, const SessionOptions& opts, std::shared_ptr<ResourceMgr> resources,
                     Rendezvous* rendezvous)
    : graph_(g), opts_(opts), allocator_(session_allocator(opts_)), device_(opts_.intra_op_threads, 0, allocator_.get()),
      resources_(resources ? std::move(resources) : std::make_shared<ResourceMgr>()),
      env_(make_executor_env(opts_, &device_, resources_.get(), &kernels_)), executors_(graph_, opts_, env_) {
  env_.rendezvous = rendezvous;
  // The collective ops' group, found by their kernels among the variables' resources.
  if (opts_.collective_group)
    (void)resources_->get<CollectiveGroup>(kCollectiveGroupResource, [&] { return opts_.collective_group; });
  if (opts_.trace || !opts_.trace_path.empty()) {
    tracer_ = std::make_unique<Tracer>();
    env_.tracer = tracer_.get();
  }
}

Partition::~Partition() { (void)close(); }

Result<std::vector<Tensor>> Partition::run_step(Executor& ex, const std::vector<Tensor>& feeds, int64_t global_step,
                                                int64_t timeout_ms) {
  // A step without a deadline that its caller ran to the end (the usual case of a short
  // one) reads no clock: three reads were a sixth of such a step.
  const auto deadline = timeout_ms > 0 ? std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms)
                                       : StepState::kNoDeadline;
  auto state = ex.start(feeds, global_step, timeout_ms > 0);
  if (!state->done()) {
    // The spin budget follows how long callers wait, which is what it bounds.
    const auto t0 = std::chrono::steady_clock::now();
    if (!state->wait(ex.spin_budget(), deadline)) {
      const std::string running = state->describe_running();
      return deadline_exceeded("the step did not finish within " + std::to_string(timeout_ms) + " ms" +
                               (running.empty() ? std::string() : " (still running: " + running + ")"));
    }
    ex.record_step(std::chrono::steady_clock::now() - t0);
  }
  Status s = state->status();
  if (!s.ok()) return s;
  return std::move(state->results());
}

Status Partition::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return Status::OK();
    closed_ = true;
  }
  executors_.shutdown();
  if (tracer_ && !opts_.trace_path.empty()) return tracer_->write(opts_.trace_path);
  return Status::OK();
}

}  // namespace actorflow::runtime
