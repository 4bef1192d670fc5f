#include "inline_step.h"

#include "node_done.h"

namespace actorflow::runtime {

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

  std::shared_ptr<const Status> stopped;
  for (int i : order) {
    const NodeRuntime& rt = nodes[static_cast<size_t>(i)];
    if (rt.inert) continue;
    std::shared_ptr<const Status> err = std::move(errors[static_cast<size_t>(i)]);
    if (!err && stop && stop->load(std::memory_order_relaxed)) {
      if (!stopped) stopped = std::make_shared<Status>(cancelled("session closed while the step was running"));
      err = stopped;
    }
    auto propagate = [&](const std::vector<Tensor>& outputs, const std::shared_ptr<const Status>& failed) {
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
    if (err) {
      node_done(shared, rt, state, nullptr, std::move(err), 0, propagate);
      continue;
    }
    int64_t t0 = env.tracer ? env.tracer->now_ns() : 0;
    OpKernelContext ctx(*rt.node, std::move(inputs[static_cast<size_t>(i)]), rt.device ? rt.device : env.device, env.resources, state.step_id());
    ctx.set_rendezvous(env.rendezvous);
    compute_kernel(rt, ctx);
    node_done(shared, rt, state, &ctx, nullptr, t0, propagate);
  }
}

}  // namespace actorflow::runtime
