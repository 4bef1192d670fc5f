#include "node_actor.h"

#include "node_done.h"

#include "actorflow/tensor_codec.h"

namespace actorflow::runtime {

NodeActor::NodeActor(caf::actor_config& cfg, std::shared_ptr<ExecutorShared> shared, int index)
    : caf::event_based_actor(cfg), shared_(std::move(shared)), rt_(shared_->nodes[static_cast<size_t>(index)]), index_(index) {
  if (rt_.num_credits > 0) credits_ = shared_->credits[static_cast<size_t>(index)].get();
  members_.resize(rt_.members.size());
  if (rt_.kernel->as_async() && rt_.node->op != "_Send" && rt_.node->op != "_Recv")
    async_label_ = rt_.node->op + " '" + rt_.node->name + "'";
  set_exit_handler([this](caf::exit_msg& m) {
    if (!running_) {
      quit(std::move(m.reason));
      return;
    }
    quit_when_idle_ = true;
    quit_reason_ = std::move(m.reason);
  });
}

caf::behavior NodeActor::make_behavior() {
  return {
      [this](input_atom, EdgeMsg& m) { on_input(m); },
      [this](start_atom, StartMsg& m) {
        slot_for(m.step, m.state);
        try_fire();
      },
      // A consumer returned a credit while this actor waited for one.
      [this](credit_atom) { try_fire(); },
      [this](done_atom, int64_t step) {
        on_async_done(step);
        if (!quit_when_idle_) try_fire();
      },
  };
}

void NodeActor::on_async_done(int64_t step) {
  if (!running_ || running_->step != step) return;
  std::unique_ptr<Running> r = std::move(running_);
  if (!async_label_.empty()) r->state->async_done(async_label_);
  finish(rt_, r->step, r->state, r->ctx.get(), nullptr, r->t0);
  if (quit_when_idle_) quit(std::move(quit_reason_));
}

NodeActor::Slot& NodeActor::slot_for(int64_t step, const std::shared_ptr<StepState>& state) {
  size_t k = static_cast<size_t>(step - next_step_);
  if (window_.size() <= k) window_.resize(k + 1);
  Slot& s = window_[k];
  if (!s.live) {
    s.live = true;
    s.remaining = rt_.dynamic_slots;
    s.inputs = rt_.bound;
    s.state = state;
  }
  return s;
}

void NodeActor::on_input(EdgeMsg& m) {
  // The usual case of a node with one input per step, whose earlier steps are done: it
  // fires at once, without a trip through the window.
  if (rt_.dynamic_slots == 1 && window_.empty() && m.step == next_step_ && !running_ && !m.wire &&
      (!credits_ || credits_->all_positive())) {
    Slot s;
    s.live = true;
    s.inputs = rt_.bound;
    s.state = std::move(m.state);
    if (m.error) s.error = std::move(m.error);
    else if (m.slot < static_cast<int32_t>(s.inputs.size())) s.inputs[static_cast<size_t>(m.slot)] = std::move(m.tensor);
    ++next_step_;
    fire(s, next_step_ - 1);
    return;
  }
  Slot& s = slot_for(m.step, m.state);
  if (m.wire) {
    auto decoded = decode_tensor_message(std::string(*m.wire));
    if (!decoded.ok()) {
      if (!s.error) s.error = std::make_shared<Status>(decoded.status().with_context("decoding an edge into '" + rt_.node->name + "'"));
    } else if (!decoded->status.ok()) {
      if (!s.error) s.error = std::make_shared<Status>(decoded->status);
    } else if (m.slot < static_cast<int32_t>(s.inputs.size())) {
      s.inputs[static_cast<size_t>(m.slot)] = std::move(decoded->tensor);
    }
  } else if (m.error) {
    if (!s.error) s.error = m.error;
  } else if (m.slot < static_cast<int32_t>(s.inputs.size())) {
    s.inputs[static_cast<size_t>(m.slot)] = std::move(m.tensor);
  }
  --s.remaining;
  try_fire();
}

void NodeActor::try_fire() {
  // Steps fire strictly in order, and only with a credit on every out edge: with both
  // rules, a finite credit count can never deadlock (the oldest step always has room).
  while (!running_ && !window_.empty() && window_.front().live && window_.front().remaining == 0) {
    if (credits_ && !credits_->all_positive()) {
      credits_->starved.store(true);
      if (!credits_->all_positive()) return;
      credits_->starved.store(false);
    }
    Slot s = std::move(window_.front());
    window_.pop_front();
    int64_t step = next_step_++;
    fire(s, step);
  }
}

void NodeActor::send_edge(const NodeRuntime& rt, const OutEdge& e, int64_t step, const Tensor& t,
                          const std::shared_ptr<const Status>& err, const std::shared_ptr<StepState>& state, int output) {
  if (e.internal) {
    MemberInputs& in = members_[static_cast<size_t>(shared_->nodes[static_cast<size_t>(e.consumer)].member_pos)];
    if (err) {
      if (!in.error) in.error = err;
    } else if (e.slot < static_cast<int>(in.inputs.size())) {
      in.inputs[static_cast<size_t>(e.slot)] = t;
    }
    return;
  }
  EdgeMsg m;
  m.step = step;
  m.slot = e.slot;
  m.state = state;
  if (e.encode) {
    TensorMessage tm;
    tm.step_id = step;
    tm.edge = static_cast<uint32_t>(e.slot);
    tm.producer = rt.node->name + ":" + std::to_string(output);
    if (err) tm.status = *err;
    else tm.tensor = t;
    m.wire = std::make_shared<const std::string>(encode_tensor_message(tm));
  } else if (err) {
    m.error = err;
  } else {
    m.tensor = t;
  }
  credits_->count[static_cast<size_t>(e.credit)].fetch_sub(1);
  send(shared_->actors[static_cast<size_t>(e.consumer)], input_atom::value, std::move(m));
}

void NodeActor::fire(Slot& s, int64_t step) {
  for (size_t m = 0; m < members_.size(); ++m) {
    members_[m].inputs = shared_->nodes[static_cast<size_t>(rt_.members[m])].bound;
    members_[m].error.reset();
  }
  if (s.error) {
    finish(rt_, step, s.state, nullptr, s.error, 0);
    run_members(step, s.state);
    return;
  }
  const ExecutorEnv& env = shared_->env;
  int64_t t0 = env.tracer ? env.tracer->now_ns() : 0;
  if (AsyncOpKernel* async = rt_.kernel->as_async()) {
    auto ctx = std::make_unique<OpKernelContext>(*rt_.node, std::move(s.inputs), rt_.device ? rt_.device : env.device, env.resources, s.state->step_id());
    ctx->set_rendezvous(env.rendezvous);
    running_ = std::make_unique<Running>();
    running_->step = step;
    running_->state = s.state;
    running_->t0 = t0;
    if (!async_label_.empty()) s.state->async_started(async_label_);
    OpKernelContext& c = *ctx;
    running_->ctx = std::move(ctx);
    caf::actor self = caf::actor_cast<caf::actor>(this);
    // A kernel that is done before compute_async returns (a _Send with a credit at hand,
    // a _Recv whose tensor is already here) finishes right here, without a message to
    // this actor: of the callback and the return, the later one finishes the node.
    enum : int { kComputing, kDone, kReturned };
    auto phase = std::make_shared<std::atomic<int>>(kComputing);
    try {
      async->compute_async(c, [self, step, phase] {
        if (phase->exchange(kDone) == kReturned) caf::anon_send(self, done_atom::value, step);
      });
    } catch (...) {
      // The kernel never started its work, so no done message will come.
      std::unique_ptr<Running> r = std::move(running_);
      if (!async_label_.empty()) r->state->async_done(async_label_);
      r->ctx->fail(status_from_current_exception());
      finish(rt_, r->step, r->state, r->ctx.get(), nullptr, r->t0);
      return;
    }
    if (phase->exchange(kReturned) == kDone) on_async_done(step);
    return;
  }
  compute(rt_, std::move(s.inputs), step, s.state);
  run_members(step, s.state);
}

void NodeActor::compute(const NodeRuntime& rt, std::vector<Tensor> inputs, int64_t step,
                        const std::shared_ptr<StepState>& state) {
  const ExecutorEnv& env = shared_->env;
  int64_t t0 = env.tracer ? env.tracer->now_ns() : 0;
  // A synchronous kernel's context lives on the stack: no heap allocation per firing.
  OpKernelContext ctx(*rt.node, std::move(inputs), rt.device ? rt.device : env.device, env.resources, state->step_id());
  ctx.set_rendezvous(env.rendezvous);
  compute_kernel(rt, ctx);
  finish(rt, step, state, &ctx, nullptr, t0);
}

void compute_kernel(const NodeRuntime& rt, OpKernelContext& ctx) {
  try {
    if (rt.kernel_mu) {
      std::lock_guard<std::mutex> lock(*rt.kernel_mu);
      rt.kernel->compute(ctx);
    } else {
      rt.kernel->compute(ctx);
    }
  } catch (...) {
    ctx.fail(status_from_current_exception());
  }
}

void NodeActor::run_members(int64_t step, const std::shared_ptr<StepState>& state) {
  // Members are in topological order: each one's producers in this actor ran before it.
  for (size_t m = 0; m < members_.size(); ++m) {
    const NodeRuntime& mr = shared_->nodes[static_cast<size_t>(rt_.members[m])];
    MemberInputs& in = members_[m];
    if (in.error) finish(mr, step, state, nullptr, std::move(in.error), 0);
    else compute(mr, std::move(in.inputs), step, state);
  }
}

void NodeActor::on_exit() {
  if (shared_ && !shared_->closing.load(std::memory_order_acquire)) {
    Status dead = internal_error("the actor of " + rt_.node->op + " '" + rt_.node->name + "' stopped unexpectedly");
    {
      std::lock_guard<std::mutex> lock(shared_->broken_mu);
      if (shared_->broken.ok()) shared_->broken = dead;
    }
    if (running_ && running_->state) running_->state->cancel(dead);
    for (Slot& s : window_)
      if (s.live && s.state) s.state->cancel(dead);
  }
  running_.reset();
  window_.clear();
  if (shared_) {
    std::lock_guard<std::mutex> lock(shared_->live_mu);
    --shared_->live_actors;
    shared_->live_cv.notify_all();
  }
  shared_.reset();
}

void NodeActor::finish(const NodeRuntime& rt, int64_t step, const std::shared_ptr<StepState>& state,
                       OpKernelContext* ctx, std::shared_ptr<const Status> err, int64_t t0) {
  node_done(*shared_, rt, *state, ctx, std::move(err), t0,
            [&](const std::vector<Tensor>& outputs, const std::shared_ptr<const Status>& failed) {
              static const Tensor kNone;
              for (size_t o = 0; o < rt.out.size(); ++o)
                for (const OutEdge& e : rt.out[o])
                  send_edge(rt, e, step, failed ? kNone : outputs[o], failed, state, static_cast<int>(o));
              for (const OutEdge& e : rt.control_out) send_edge(rt, e, step, kNone, failed, state, -1);
            });
  for (const InEdge& in : rt.in_edges) {
    if (in.producer < 0) continue;
    Credits& c = *shared_->credits[static_cast<size_t>(in.producer)];
    c.count[static_cast<size_t>(in.credit)].fetch_add(1);
    if (c.starved.exchange(false)) send(shared_->actors[static_cast<size_t>(in.producer)], credit_atom::value);
  }
}

}  // namespace actorflow::runtime
