// The end of one node's firing, for both paths that run kernels of a plan (the node
// actors and the inline run path), as TF's executor funnels its paths into NodeDone: the
// trace record, the kernel's status and the check of its outputs, the step's failure, the
// outputs handed on (each path its own way: messages, or the caller's arrays), then the
// fetches and the step's completion count. The sequential session stays apart on purpose:
// it is the plain reference the runtime is checked against.
#pragma once
#include <memory>
#include <vector>

#include "node_actor.h"
#include "tracer.h"

namespace actorflow::runtime {

// `ctx` is the kernel's context when it ran, null when the node got an error instead
// (`err`); `t0` is when the kernel started (0 without a tracer). `propagate(outputs, err)`
// hands the outputs (or the error) to the node's consumers.
template <typename Propagate>
void node_done(const ExecutorShared& shared, const NodeRuntime& rt, StepState& state, OpKernelContext* ctx,
               std::shared_ptr<const Status> err, int64_t t0, Propagate&& propagate) {
  const ExecutorEnv& env = shared.env;
  std::vector<Tensor> outputs;
  if (ctx) {
    if (env.tracer)
      env.tracer->record({rt.node->name, rt.node->op, shared.device_name, state.step_id(), trace_thread_id(), t0,
                          env.tracer->now_ns()});
    Status st = ctx->status();
    if (st.ok()) st = check_outputs(*rt.node, ctx->outputs());
    if (!st.ok()) err = std::make_shared<Status>(std::move(st));
    else outputs = std::move(ctx->outputs());
  }
  if (err) state.fail(*err);
  propagate(outputs, err);
  for (auto [o, r] : rt.fetches) {
    if (!err) state.set_result(r, outputs[static_cast<size_t>(o)]);
    state.finish_one();
  }
  for (int i = 0; i < rt.finishes; ++i) state.finish_one();
}

}  // namespace actorflow::runtime
