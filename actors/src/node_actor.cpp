#include "node_actor.h"

#include "in_place_runner.h"
#include "node_done.h"

#include "actorflow/denormal.h"
#include "actorflow/tensor_codec.h"

namespace actorflow::runtime {

namespace {

// The CAF worker whose turn of a node actor this thread is in (null elsewhere): a run
// message sent from there goes to that worker's own queue, as CAF's send from an actor
// does, so a chain of actors stays on one warm worker unless another steals a branch.
thread_local caf::execution_unit* t_worker = nullptr;

class WorkerTurn {
 public:
  explicit WorkerTurn(caf::execution_unit* unit) : outer_(std::exchange(t_worker, unit)) {}
  ~WorkerTurn() { t_worker = outer_; }
  WorkerTurn(const WorkerTurn&) = delete;
  WorkerTurn& operator=(const WorkerTurn&) = delete;

 private:
  caf::execution_unit* outer_;
};

// Messages one owner handles per turn before the next ready actor gets the thread; what
// is left then waits for the next turn.
constexpr int kThroughput = 64;

}  // namespace

NodeActor::NodeActor(caf::actor_config& cfg, std::shared_ptr<ExecutorShared> shared, int index)
    : caf::event_based_actor(cfg), shared_(std::move(shared)), rt_(shared_->nodes[static_cast<size_t>(index)]), index_(index) {
  if (rt_.num_credits > 0) credits_ = shared_->credits[static_cast<size_t>(index)].get();
  members_.resize(rt_.members.size());
  async_ = rt_.kernel->as_async() != nullptr;
  if (async_ && rt_.node->op != "_Send" && rt_.node->op != "_Recv")
    async_label_ = rt_.node->op + " '" + rt_.node->name + "'";
  // The exit joins the inbox, so it takes effect between two messages of whoever owns
  // it; quitting itself waits for a turn inside CAF (drain).
  set_exit_handler([this](caf::exit_msg& m) {
    auto msg = std::make_unique<NodeMsg>(NodeMsg::Kind::exit);
    msg->reason = std::move(m.reason);
    push(msg.release());
    WorkerTurn turn(context());
    if (try_own()) drain(true);
  });
}

NodeActor::~NodeActor() {
  free_list(taken_);
  free_list(inbox_.exchange(nullptr));
}

void NodeActor::free_list(NodeMsg* m) {
  while (m != nullptr) delete std::exchange(m, m->next);
}

caf::behavior NodeActor::make_behavior() {
  return {
      [this](run_atom) {
        // A runner took the inbox back before this turn came (in_place_runner.h).
        if (!handed_.exchange(false)) return;
        WorkerTurn turn(context());
        drain(true);
      },
  };
}

void NodeActor::push(NodeMsg* m) {
  m->next = inbox_.load(std::memory_order_relaxed);
  while (!inbox_.compare_exchange_weak(m->next, m)) {
  }
}

void NodeActor::post(std::unique_ptr<NodeMsg> m) {
  push(m.release());
  // A closed actor has quit: like CAF's mailbox of an exited actor, its inbox keeps
  // what arrives until the actor is freed, and the session's close cancels the steps.
  if (try_own()) schedule_owned();
}

void NodeActor::schedule_owned() {
  if (InPlaceRunner* r = InPlaceRunner::current()) r->add(this);
  else hand_to_workers();
}

void NodeActor::hand_to_workers() {
  handed_.store(true);
  shared_->actors[static_cast<size_t>(index_)]->enqueue(
      caf::make_mailbox_element(nullptr, caf::make_message_id(), {}, run_atom::value), t_worker);
}

void NodeActor::drain(bool in_caf) {
  int handled = 0;
  for (;;) {
    if (quit_when_idle_ && !running_) {
      if (!in_caf) {
        // quit() is CAF's, for the actor's own turn: the inbox goes there, still owned.
        hand_to_workers();
        return;
      }
      state_.store(kClosed);
      free_list(std::exchange(taken_, nullptr));
      free_list(inbox_.exchange(nullptr));
      quit(std::move(quit_reason_));
      return;
    }
    if (taken_ == nullptr) {
      // The stack holds the newest first: reversed, the inbox runs in posting order.
      NodeMsg* m = inbox_.exchange(nullptr);
      while (m != nullptr) {
        NodeMsg* next = m->next;
        m->next = taken_;
        taken_ = m;
        m = next;
      }
    }
    if (taken_ == nullptr) {
      // Letting go: a post that found the actor owned pushed first and then looked, so
      // one of the two sees the other (both orders are sequentially consistent).
      state_.store(kIdle);
      if (inbox_.load() == nullptr || !try_own()) return;
      continue;
    }
    if (handled == kThroughput) {
      schedule_owned();
      return;
    }
    std::unique_ptr<NodeMsg> m(std::exchange(taken_, taken_->next));
    handle(*m);
    ++handled;
  }
}

void NodeActor::handle(NodeMsg& m) {
  switch (m.kind) {
    case NodeMsg::Kind::input:
      on_input(m.edge);
      break;
    case NodeMsg::Kind::start:
      slot_for(m.edge.step, m.edge.state);
      try_fire();
      break;
    case NodeMsg::Kind::credit:
      // A consumer returned a credit while this actor waited for one.
      try_fire();
      break;
    case NodeMsg::Kind::done:
      on_async_done(m.edge.step);
      if (!quit_when_idle_) try_fire();
      break;
    case NodeMsg::Kind::exit:
      quit_when_idle_ = true;
      quit_reason_ = std::move(m.reason);
      break;
  }
}

void NodeActor::on_async_done(int64_t step) {
  if (!running_ || running_->step != step) return;
  std::unique_ptr<Running> r = std::move(running_);
  if (!async_label_.empty()) r->state->async_done(async_label_);
  finish(rt_, r->step, r->state, r->ctx.get(), nullptr, r->t0);
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
  auto msg = std::make_unique<NodeMsg>(NodeMsg::Kind::input);
  EdgeMsg& m = msg->edge;
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
  shared_->node_actors[static_cast<size_t>(e.consumer)]->post(std::move(msg));
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
    // The handle keeps this actor alive until a late callback has posted.
    caf::actor self = caf::actor_cast<caf::actor>(this);
    NodeActor* me = this;
    // A kernel that is done before compute_async returns (a _Send with a credit at hand,
    // a _Recv whose tensor is already here) finishes right here, without a message to
    // this actor: of the callback and the return, the later one finishes the node.
    enum : int { kComputing, kDone, kReturned };
    auto phase = std::make_shared<std::atomic<int>>(kComputing);
    ScopedFlushDenormal flush;
    try {
      async->compute_async(c, [self, me, step, phase] {
        if (phase->exchange(kDone) != kReturned) return;
        auto msg = std::make_unique<NodeMsg>(NodeMsg::Kind::done);
        msg->edge.step = step;
        me->post(std::move(msg));
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
  // A CPU kernel handed a GPU buffer would read device memory on the host: the plan lost
  // a copy. Fail the node by name rather than the process.
  if (!rt.device)
    for (int i = 0; i < ctx.num_inputs(); ++i)
      if (const Tensor& t = ctx.input(i); t.valid() && t.device().type != DeviceType::CPU)
        return ctx.fail(internal_error("node '" + rt.node->name + "' (" + rt.node->op + ") runs on the CPU but its input " +
                                 std::to_string(i) + " is on " + t.device().to_string() +
                                 ": the plan has no copy to the host there"));
  ScopedFlushDenormal flush;
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
  // Normally drain() closed the inbox before it quit; an actor that CAF ended otherwise
  // takes no message from here on either.
  state_.store(kClosed);
  free_list(std::exchange(taken_, nullptr));
  free_list(inbox_.exchange(nullptr));
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
    if (c.starved.exchange(false))
      shared_->node_actors[static_cast<size_t>(in.producer)]->post(std::make_unique<NodeMsg>(NodeMsg::Kind::credit));
  }
}

}  // namespace actorflow::runtime
