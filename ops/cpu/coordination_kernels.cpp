// CPU kernels of the distributed-training coordination ops (ops/defs/coordination_ops.cpp).
// The waiting kernels are async: they park a waiter on their resource's WaitList and
// return, so a worker waiting for the slowest replica holds no scheduler thread of the ps.
#include <algorithm>
#include <array>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include "actorflow/kernel.h"
#include "actorflow/resource_mgr.h"
#include "actorflow/log_time.h"
#include "common/wait_list.h"

namespace actorflow {
namespace {

using coordination::Clock;
using coordination::WaitList;

Clock::time_point deadline_after(int64_t ms) { return Clock::now() + std::chrono::milliseconds(std::max<int64_t>(ms, 1)); }

void log_line(const std::string& line) { std::cerr << log_time() + " " + line + "\n" << std::flush; }

template <typename T>
void add_into(Tensor& sum, const Tensor& g) {
  T* s = sum.data<T>();
  const T* x = g.data<T>();
  for (int64_t i = 0, n = g.num_elements(); i < n; ++i) s[i] += x[i];
}

struct GradientAccumulator final : Resource {
  std::shared_ptr<WaitList> waits = std::make_shared<WaitList>();
  Tensor sum;  // invalid while empty
  int64_t count = 0;
  int64_t round = 0;  // gradients of earlier rounds are stale
  int64_t stale = 0;
  int64_t expected = 0;       // gradients a round waits for in full (fewer after a loss)
  std::set<int64_t> workers;  // who contributed to this round
  // Each worker's latest stale gradient (its round, the gradient), kept until the next
  // take: when the chief then takes an earlier round than the accumulator's (the global
  // step went back: a checkpoint restored after a ps was lost, or a round retried after
  // its step failed between take and apply), the accumulator restarts at the chief's
  // round and these count again, as TF's chief resets its accumulators' global step.
  std::map<int64_t, std::pair<int64_t, Tensor>> stashed;
  // Takes begun so far. Only the chief takes, one step at a time, so a take still waiting
  // when a newer one begins belongs to a step that failed elsewhere (a ps lost): it gives
  // way instead of taking the newer round's gradients as its own.
  uint64_t takes = 0;
  int64_t latest_take_round = 0;  // the round the newest take asked for

  // Adds worker `worker`'s gradient to this round's sum (under waits->mu); false, adding
  // nothing, when its dtype or shape differs from the sum's.
  bool add(const Tensor& g, int64_t worker) {
    if (!sum.valid()) sum = g.clone();
    else if (sum.shape() != g.shape() || sum.dtype() != g.dtype()) return false;
    else if (g.dtype() == DType::f32) add_into<float>(sum, g);
    else add_into<double>(sum, g);
    ++count;
    workers.insert(worker);
    return true;
  }
  // Empties this round's sum (taken, or dropped for an earlier round).
  void clear_sum() {
    sum = Tensor();
    count = 0;
    workers.clear();
  }
};

struct SyncRound final : Resource {
  std::shared_ptr<WaitList> waits = std::make_shared<WaitList>();
  int64_t round = 0;
};

struct WorkerClocks final : Resource {
  explicit WorkerClocks(int64_t n) : clock(static_cast<size_t>(n), 0), done(static_cast<size_t>(n), false) {}
  std::shared_ptr<WaitList> waits = std::make_shared<WaitList>();
  std::vector<int64_t> clock;
  std::vector<bool> done;
  std::vector<std::array<int64_t, 3>> log;  // (worker, clock, slowest when it went on)

  // The slowest clock among the workers still training; max() when all are done.
  int64_t slowest(int64_t* who = nullptr) const {
    int64_t m = std::numeric_limits<int64_t>::max();
    for (size_t i = 0; i < clock.size(); ++i)
      if (!done[i] && clock[i] < m) {
        m = clock[i];
        if (who) *who = static_cast<int64_t>(i);
      }
    return m;
  }
  int64_t num_done() const { return std::count(done.begin(), done.end(), true); }
};

template <typename R, typename... Args>
std::shared_ptr<R> find_or_make(OpKernelContext& ctx, const std::string& key, Args... args) {
  auto r = ctx.resources()->get<R>(key, [&] { return std::make_shared<R>(args...); });
  if (!r) ctx.fail(failed_precondition("'" + key + "' holds state of another kind"));
  return r;
}

std::shared_ptr<WorkerClocks> clocks(OpKernelContext& ctx, const Node& n) {
  int64_t num = n.attr_int("num_workers", 0);
  auto t = num > 0 ? find_or_make<WorkerClocks>(ctx, "worker_clocks:" + n.attr_string("table"), num)
                   : std::dynamic_pointer_cast<WorkerClocks>(ctx.resources()->find_resource("worker_clocks:" + n.attr_string("table")));
  if (t && num > 0 && static_cast<int64_t>(t->clock.size()) != num) {
    ctx.fail(invalid_argument("num_workers is " + std::to_string(num) + " here but " + std::to_string(t->clock.size()) +
                              " where the table was made: every worker must run with the same cluster"));
    return nullptr;
  }
  return t;
}

template <typename T>
Tensor mean_of(const Tensor& sum, int64_t count) {
  Tensor out(sum.dtype(), sum.shape());
  const T* s = sum.data<T>();
  T* o = out.data<T>();
  const T k = static_cast<T>(count);
  for (int64_t i = 0, n = sum.num_elements(); i < n; ++i) o[i] = s[i] / k;
  return out;
}

class ApplyGradientKernel final : public OpKernel {
 public:
  explicit ApplyGradientKernel(const Node& n)
      : OpKernel(n), key_("accumulator:" + n.attr_string("accumulator")), worker_(n.attr_int("worker")) {}
  void compute(OpKernelContext& ctx) override {
    auto acc = find_or_make<GradientAccumulator>(ctx, key_);
    if (!acc) return;
    int64_t step = ctx.input(0).item<int64_t>();
    const Tensor& g = ctx.input(1);
    std::lock_guard<std::mutex> lock(acc->waits->mu);
    if (step < acc->round) {
      ++acc->stale;
      acc->stashed[worker_] = {step, g.clone()};
      return;
    }
    if (!acc->add(g, worker_))
      return ctx.fail(invalid_argument("gradient " + std::string(dtype_name(g.dtype())) + g.shape().to_string() +
                                       " from worker " + std::to_string(worker_) + " does not match the accumulated " +
                                       dtype_name(acc->sum.dtype()) + acc->sum.shape().to_string()));
    acc->waits->notify();
  }

 private:
  std::string key_;
  int64_t worker_;
};

class TakeGradientKernel final : public AsyncOpKernel {
 public:
  explicit TakeGradientKernel(const Node& n)
      : AsyncOpKernel(n), key_("accumulator:" + n.attr_string("accumulator")), required_(n.attr_int("num_required", 1)),
        timeout_ms_(n.attr_int("timeout_ms", 60000)), grace_ms_(std::min(timeout_ms_, n.attr_int("grace_ms", 200))) {}

  // A round ends with `num_required` gradients. One that times out goes on with what has
  // arrived, and the accumulator then expects only that many (the others are lost): later
  // rounds wait for them a short grace only, so a dead worker costs one timeout, not one
  // per step. A round that gets all of them again restores the full count.
  void compute_async(OpKernelContext& ctx, DoneCallback done) override {
    auto acc = find_or_make<GradientAccumulator>(ctx, key_);
    if (!acc) return done();
    auto st = std::make_shared<Take>();
    st->acc = acc;
    st->ctx = &ctx;
    st->done = std::move(done);
    st->round = ctx.input(0).item<int64_t>();
    st->started = Clock::now();
    st->required = required_;
    st->timeout_ms = timeout_ms_;
    st->grace_ms = grace_ms_;
    st->who = name();
    std::lock_guard<std::mutex> lock(acc->waits->mu);
    st->epoch = ++acc->takes;
    acc->latest_take_round = st->round;
    acc->waits->notify();  // an older take still waiting gives way (superseded)
    if (acc->expected <= 0 || acc->expected > required_) acc->expected = required_;
    if (st->round < acc->round) restart_at(*acc, st->round, name());
    park(st);
  }

 private:
  struct Take {
    std::shared_ptr<GradientAccumulator> acc;
    OpKernelContext* ctx = nullptr;
    DoneCallback done;
    int64_t round = 0, required = 1, timeout_ms = 0, grace_ms = 0;
    uint64_t epoch = 0;  // this take's number among the accumulator's takes
    Clock::time_point started;
    std::string who;
  };

  // Under the accumulator's lock: true, having failed the take, when a newer take began.
  static bool superseded(Take& st) {
    if (st.epoch == st.acc->takes) return false;
    st.ctx->fail(cancelled("round " + std::to_string(st.round) + " was given up: the chief took round " +
                         std::to_string(st.acc->latest_take_round) + " since (this take's step failed elsewhere, or the "
                         "global step went back)"));
    st.done();
    return true;
  }

  // Under the accumulator's lock: the chief's round is the truth. What was summed for
  // later rounds was computed on weights that are gone; the stashed gradients of this
  // round (or later) were dropped as stale only because the accumulator was ahead.
  static void restart_at(GradientAccumulator& a, int64_t round, const std::string& who) {
    log_line("[sync] " + who + ": the chief takes round " + std::to_string(round) + ", behind the accumulator's " +
             std::to_string(a.round) + " (the global step went back): the accumulator restarts at round " +
             std::to_string(round));
    a.clear_sum();
    a.round = round;
    for (auto& [worker, stash] : a.stashed)
      if (stash.first >= round && a.add(stash.second, worker)) --a.stale;
    a.stashed.clear();
  }

  // Under the accumulator's lock.
  static void park(const std::shared_ptr<Take>& st) {
    GradientAccumulator& a = *st->acc;
    auto full_deadline = st->started + std::chrono::milliseconds(std::max<int64_t>(st->timeout_ms, 1));
    auto deadline = a.expected < st->required
                        ? std::min(full_deadline, Clock::now() + std::chrono::milliseconds(std::max<int64_t>(st->grace_ms, 1)))
                        : full_deadline;
    a.waits->add([st] {
          if (superseded(*st)) return true;
          if (st->acc->count < st->required) return false;
          finish(*st);
          return true;
        },
        [st, full_deadline] {
          if (superseded(*st)) return;
          GradientAccumulator& acc = *st->acc;
          bool degraded_ready = acc.expected < st->required && acc.count >= acc.expected && acc.count > 0;
          if (degraded_ready || Clock::now() >= full_deadline) return finish(*st);
          park(st);  // the grace ended short of the expected gradients: wait out the timeout
        },
        deadline);
  }

  static void finish(Take& st) {
    GradientAccumulator& acc = *st.acc;
    if (acc.count == 0) {
      st.ctx->fail(deadline_exceeded("no gradient for round " + std::to_string(st.round) + " arrived within " +
                                     std::to_string(st.timeout_ms) + " ms"));
      return st.done();
    }
    int64_t before = acc.expected;
    acc.expected = std::min(st.required, acc.count);
    if (acc.expected != before) {
      std::ostringstream os;
      os << "[sync] " << st.who << ": round " << st.round;
      if (acc.expected < st.required) {
        os << " goes on with " << acc.count << " of " << st.required << " gradients after "
           << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - st.started).count()
           << " ms (from workers";
        for (int64_t w : acc.workers) os << " " << w;
        os << "); the others are late or lost, and later rounds wait for them " << st.grace_ms << " ms only";
      } else {
        os << " has all " << st.required << " gradients again";
      }
      log_line(os.str());
    }
    st.ctx->set_output(0, acc.sum.dtype() == DType::f32 ? mean_of<float>(acc.sum, acc.count) : mean_of<double>(acc.sum, acc.count));
    acc.clear_sum();
    acc.stashed.clear();
    acc.round = std::max(acc.round, st.round + 1);
    st.done();
  }

  std::string key_;
  int64_t required_;
  int64_t timeout_ms_;
  int64_t grace_ms_;
};

class RoundAdvanceKernel final : public OpKernel {
 public:
  explicit RoundAdvanceKernel(const Node& n) : OpKernel(n), key_("sync_round:" + n.attr_string("barrier")) {}
  void compute(OpKernelContext& ctx) override {
    auto r = find_or_make<SyncRound>(ctx, key_);
    if (!r) return;
    std::lock_guard<std::mutex> lock(r->waits->mu);
    // The chief's applied step is the round, also when it went back (a checkpoint
    // restored): workers then wait for the chief again rather than run ahead of it.
    r->round = ctx.input(0).item<int64_t>();
    r->waits->notify();
  }

 private:
  std::string key_;
};

class RoundWaitKernel final : public AsyncOpKernel {
 public:
  explicit RoundWaitKernel(const Node& n)
      : AsyncOpKernel(n), key_("sync_round:" + n.attr_string("barrier")), timeout_ms_(n.attr_int("timeout_ms", 60000)) {}
  void compute_async(OpKernelContext& ctx, DoneCallback done) override {
    auto r = find_or_make<SyncRound>(ctx, key_);
    if (!r) return done();
    int64_t local = ctx.input(0).item<int64_t>();
    OpKernelContext* c = &ctx;
    std::lock_guard<std::mutex> lock(r->waits->mu);
    int64_t timeout = timeout_ms_;
    r->waits->add(
        [r, c, done, local] {
          if (r->round <= local) return false;
          c->set_output(0, Tensor::scalar<int64_t>(r->round));
          done();
          return true;
        },
        [r, c, done, local, timeout] {
          c->fail(deadline_exceeded("waited " + std::to_string(timeout) + " ms for the chief to apply step " +
                                    std::to_string(local) + " (the round is still " + std::to_string(r->round) +
                                    "); is the chief alive?"));
          done();
        },
        deadline_after(timeout_ms_));
  }

 private:
  std::string key_;
  int64_t timeout_ms_;
};

class WorkerClockKernel final : public AsyncOpKernel {
 public:
  explicit WorkerClockKernel(const Node& n)
      : AsyncOpKernel(n), worker_(n.attr_int("worker")), staleness_(n.attr_int("staleness")),
        timeout_ms_(n.attr_int("timeout_ms", 60000)) {}
  void compute_async(OpKernelContext& ctx, DoneCallback done) override {
    auto t = clocks(ctx, ctx.node());
    if (!t) return done();
    int64_t c = ctx.input(0).item<int64_t>();
    OpKernelContext* kc = &ctx;
    std::lock_guard<std::mutex> lock(t->waits->mu);
    size_t w = static_cast<size_t>(worker_);
    t->clock[w] = std::max(t->clock[w], c);
    t->done[w] = false;
    t->waits->notify();
    int64_t s = staleness_, worker = worker_, timeout = timeout_ms_;
    t->waits->add(
        [t, kc, done, c, s, worker] {
          int64_t slow = t->slowest();
          if (slow < c - s) return false;
          if (slow == std::numeric_limits<int64_t>::max()) slow = c;
          if (t->log.size() < (size_t{1} << 20)) t->log.push_back({worker, c, slow});
          kc->set_output(0, Tensor::scalar<int64_t>(slow));
          done();
          return true;
        },
        [t, kc, done, c, s, worker, timeout] {
          int64_t who = -1;
          int64_t slow = t->slowest(&who);
          kc->fail(deadline_exceeded("worker " + std::to_string(worker) + " at clock " + std::to_string(c) + " waited " +
                                     std::to_string(timeout) + " ms for worker " + std::to_string(who) +
                                     " (at clock " + std::to_string(slow) + ") to reach clock " + std::to_string(c - s)));
          done();
        },
        deadline_after(timeout_ms_));
  }

 private:
  int64_t worker_, staleness_, timeout_ms_;
};

class WorkerDoneKernel final : public OpKernel {
 public:
  explicit WorkerDoneKernel(const Node& n) : OpKernel(n), worker_(n.attr_int("worker")) {}
  void compute(OpKernelContext& ctx) override {
    auto t = clocks(ctx, ctx.node());
    if (!t) return;
    std::lock_guard<std::mutex> lock(t->waits->mu);
    if (worker_ < 0 || worker_ >= static_cast<int64_t>(t->done.size()))
      return ctx.fail(invalid_argument("worker " + std::to_string(worker_) + " is not in the table"));
    t->done[static_cast<size_t>(worker_)] = true;
    t->waits->notify();
  }

 private:
  int64_t worker_;
};

class WaitWorkersDoneKernel final : public AsyncOpKernel {
 public:
  explicit WaitWorkersDoneKernel(const Node& n) : AsyncOpKernel(n), timeout_ms_(n.attr_int("timeout_ms", 60000)) {}
  void compute_async(OpKernelContext& ctx, DoneCallback done) override {
    auto t = clocks(ctx, ctx.node());
    if (!t) return done();
    OpKernelContext* c = &ctx;
    std::lock_guard<std::mutex> lock(t->waits->mu);
    t->waits->add(
        [t, c, done] {
          if (t->num_done() < static_cast<int64_t>(t->done.size())) return false;
          c->set_output(0, Tensor::scalar<int64_t>(t->num_done()));
          done();
          return true;
        },
        [t, c, done] {
          c->set_output(0, Tensor::scalar<int64_t>(t->num_done()));
          done();
        },
        deadline_after(timeout_ms_));
  }

 private:
  int64_t timeout_ms_;
};

class ClockLogKernel final : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(OpKernelContext& ctx) override {
    auto t = clocks(ctx, ctx.node());
    std::vector<int64_t> flat;
    if (t) {
      std::lock_guard<std::mutex> lock(t->waits->mu);
      for (auto& r : t->log) flat.insert(flat.end(), r.begin(), r.end());
    }
    int64_t rows = static_cast<int64_t>(flat.size() / 3);
    ctx.set_output(0, Tensor::from_vector(flat, Shape{rows, 3}));
  }
};

class NumStaleKernel final : public OpKernel {
 public:
  explicit NumStaleKernel(const Node& n) : OpKernel(n), key_("accumulator:" + n.attr_string("accumulator")) {}
  void compute(OpKernelContext& ctx) override {
    auto acc = std::dynamic_pointer_cast<GradientAccumulator>(ctx.resources()->find_resource(key_));
    int64_t n = 0;
    if (acc) {
      std::lock_guard<std::mutex> lock(acc->waits->mu);
      n = acc->stale;
    }
    ctx.set_output(0, Tensor::scalar<int64_t>(n));
  }

 private:
  std::string key_;
};

}  // namespace

AF_REGISTER_KERNEL("AccumulatorApplyGradient", DeviceType::CPU, ApplyGradientKernel);
AF_REGISTER_KERNEL("AccumulatorTakeGradient", DeviceType::CPU, TakeGradientKernel);
AF_REGISTER_KERNEL("SyncRoundAdvance", DeviceType::CPU, RoundAdvanceKernel);
AF_REGISTER_KERNEL("SyncRoundWait", DeviceType::CPU, RoundWaitKernel);
AF_REGISTER_KERNEL("WorkerClock", DeviceType::CPU, WorkerClockKernel);
AF_REGISTER_KERNEL("WorkerDone", DeviceType::CPU, WorkerDoneKernel);
AF_REGISTER_KERNEL("WaitWorkersDone", DeviceType::CPU, WaitWorkersDoneKernel);
AF_REGISTER_KERNEL("WorkerClockLog", DeviceType::CPU, ClockLogKernel);
AF_REGISTER_KERNEL("AccumulatorNumStale", DeviceType::CPU, NumStaleKernel);

}  // namespace actorflow
