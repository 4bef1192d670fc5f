#include "inline_step.h"

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "node_done.h"

namespace actorflow::runtime {
namespace {

// How long the caller waits for one async kernel (a GPU copy) before the step fails. The
// GPU poller reports an op still running long before (AF_GPU_WATCH_TIMEOUT_S).
constexpr auto kAsyncKernelWait = std::chrono::minutes(10);

struct AsyncWait {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
};

// An async kernel started but not yet done: its consumers wait for it when their turn
// comes, so the caller goes on queuing work that does not need it.
struct Pending {
  std::unique_ptr<OpKernelContext> ctx;
  std::shared_ptr<AsyncWait> wait;
  int64_t t0 = 0;
};

}  // namespace

void run_step_inline(const ExecutorShared& shared, const std::vector<int>& order, const std::vector<FeedRoute>& routes,
                     const std::vector<Tensor>& feeds, StepState& state, const std::atomic<bool>* stop) {
  const auto& nodes = shared.nodes;
  const ExecutorEnv& env = shared.env;
  // Per call, not per executor: concurrent callers each run their own step (cheap
  // kernels are stateless, so they may).
  std::vector<std::vector<Tensor>> inputs(nodes.size());
  std::vector<std::shared_ptr<const Status>> errors(nodes.size());
  for (int i : order) inputs[static_cast<size_t>(i)] = nodes[static_cast<size_t>(i)].bound;
  for (size_t f = 0; f < routes.size(); ++f)
    for (auto [node, slot] : routes[f].consumers) inputs[static_cast<size_t>(node)][static_cast<size_t>(slot)] = feeds[f];

  auto propagate_from = [&](const NodeRuntime& rt) {
    return [&](const std::vector<Tensor>& outputs, const std::shared_ptr<const Status>& failed) {
      for (size_t o = 0; o < rt.out.size(); ++o)
        for (const OutEdge& e : rt.out[o]) {
          if (failed) {
            auto& to = errors[static_cast<size_t>(e.consumer)];
            if (!to) to = failed;
          } else {
            inputs[static_cast<size_t>(e.consumer)][static_cast<size_t>(e.slot)] = outputs[o];
          }
        }
      if (failed)
        for (const OutEdge& e : rt.control_out) {
          auto& to = errors[static_cast<size_t>(e.consumer)];
          if (!to) to = failed;
        }
    };
  };

  // Made at the first async kernel that is not done at once: most steps have none, and a
  // cheap step's whole cost is a few allocations.
  std::vector<Pending> pending;
  std::vector<std::vector<int>> waits_for;
  auto finish_pending = [&](int p) {
    Pending& pd = pending[static_cast<size_t>(p)];
    if (!pd.ctx) return;
    const NodeRuntime& rt = nodes[static_cast<size_t>(p)];
    bool done;
    {
      std::unique_lock<std::mutex> lock(pd.wait->mu);
      done = pd.wait->cv.wait_for(lock, kAsyncKernelWait, [&] { return pd.wait->done; });
    }
    if (!done) {
      // The kernel may still finish and touch its context: it is leaked, not freed.
      (void)pd.ctx.release();
      auto err = std::make_shared<const Status>(
          Status(Code::deadline_exceeded, rt.node->op + " '" + rt.node->name + "' did not finish in 10 minutes"));
      node_done(shared, rt, state, nullptr, std::move(err), 0, propagate_from(rt));
      return;
    }
    std::unique_ptr<OpKernelContext> ctx = std::move(pd.ctx);
    node_done(shared, rt, state, ctx.get(), nullptr, pd.t0, propagate_from(rt));
  };

  std::shared_ptr<const Status> stopped;
  for (int i : order) {
    if (!waits_for.empty())
      for (int p : waits_for[static_cast<size_t>(i)]) finish_pending(p);
    const NodeRuntime& rt = nodes[static_cast<size_t>(i)];
    if (rt.inert) continue;
    std::shared_ptr<const Status> err = std::move(errors[static_cast<size_t>(i)]);
    if (!err && stop && stop->load(std::memory_order_relaxed)) {
      if (!stopped) stopped = std::make_shared<Status>(cancelled("session closed while the step was running"));
      err = stopped;
    }
    if (err) {
      node_done(shared, rt, state, nullptr, std::move(err), 0, propagate_from(rt));
      continue;
    }
    int64_t t0 = env.tracer ? env.tracer->now_ns() : 0;
    DeviceContext* device = rt.device ? rt.device : env.device;
    if (AsyncOpKernel* async = rt.kernel->as_async()) {
      Pending pd;
      pd.ctx = std::make_unique<OpKernelContext>(*rt.node, std::move(inputs[static_cast<size_t>(i)]), device,
                                                 env.resources, state.step_id());
      pd.ctx->set_rendezvous(env.rendezvous);
      pd.wait = std::make_shared<AsyncWait>();
      pd.t0 = t0;
      try {
        async->compute_async(*pd.ctx, [w = pd.wait] {
          std::lock_guard<std::mutex> lock(w->mu);
          w->done = true;
          w->cv.notify_all();
        });
      } catch (...) {
        // The kernel never started its work, so no callback will come.
        pd.ctx->fail(status_from_current_exception());
        std::lock_guard<std::mutex> lock(pd.wait->mu);
        pd.wait->done = true;
      }
      bool done;
      {
        std::lock_guard<std::mutex> lock(pd.wait->mu);
        done = pd.wait->done;
      }
      if (done) {
        node_done(shared, rt, state, pd.ctx.get(), nullptr, t0, propagate_from(rt));
        continue;
      }
      if (pending.empty()) {
        pending.resize(nodes.size());
        waits_for.resize(nodes.size());
      }
      pending[static_cast<size_t>(i)] = std::move(pd);
      for (size_t o = 0; o < rt.out.size(); ++o)
        for (const OutEdge& e : rt.out[o]) waits_for[static_cast<size_t>(e.consumer)].push_back(i);
      for (const OutEdge& e : rt.control_out) waits_for[static_cast<size_t>(e.consumer)].push_back(i);
      continue;
    }
    OpKernelContext ctx(*rt.node, std::move(inputs[static_cast<size_t>(i)]), device, env.resources, state.step_id());
    ctx.set_rendezvous(env.rendezvous);
    compute_kernel(rt, ctx);
    node_done(shared, rt, state, &ctx, nullptr, t0, propagate_from(rt));
  }
  // Async kernels nothing in the plan consumes (a fetched copy): the step ends with them.
  if (!pending.empty())
    for (int i : order) finish_pending(i);
}

}  // namespace actorflow::runtime
