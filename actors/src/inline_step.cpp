#include "inline_step.h"

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
    std::vector<Tensor> outputs;
    if (!err) {
      int64_t t0 = env.tracer ? env.tracer->now_ns() : 0;
      OpKernelContext ctx(*rt.node, std::move(inputs[static_cast<size_t>(i)]), rt.device ? rt.device : env.device, env.resources, state.step_id());
      compute_kernel(rt, ctx);
      if (env.tracer)
        env.tracer->record({rt.node->name, rt.node->op, shared.device_name, state.step_id(), trace_thread_id(), t0,
                            env.tracer->now_ns()});
      Status st = ctx.status();
      if (st.ok()) st = check_outputs(*rt.node, ctx.outputs());
      if (!st.ok()) err = std::make_shared<Status>(std::move(st));
      else outputs = std::move(ctx.outputs());
    }
    if (err) state.fail(*err);
    for (size_t o = 0; o < rt.out.size(); ++o)
      for (const OutEdge& e : rt.out[o]) {
        if (err) {
          auto& to = errors[static_cast<size_t>(e.consumer)];
          if (!to) to = err;
        } else {
          inputs[static_cast<size_t>(e.consumer)][static_cast<size_t>(e.slot)] = outputs[o];
        }
      }
    if (err)
      for (const OutEdge& e : rt.control_out) {
        auto& to = errors[static_cast<size_t>(e.consumer)];
        if (!to) to = err;
      }
    for (auto [o, r] : rt.fetches) {
      if (!err) state.set_result(r, outputs[static_cast<size_t>(o)]);
      state.finish_one();
    }
    for (int k = 0; k < rt.finishes; ++k) state.finish_one();
  }
}

}  // namespace actorflow::runtime
