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
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "actorflow/kernel.h"
#include "actorflow/resource_mgr.h"
#include "actorflow/log_time.h"
#include "common/sparse_rows.h"
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

// One worker's gradient for a round: dense (`values` alone), or sparse: rows `values`
// [k, ...row] of the variable at `indices` [k] (the gradient of a gather).
struct Contribution {
  Tensor values;
  Tensor indices;  // invalid when dense
  bool sparse() const { return indices.valid(); }
  Contribution clone() const { return {values.clone(), indices.valid() ? indices.clone() : Tensor()}; }
};

// The sum of a round's sparse gradients, row by row: as TF's SparseConditionalAccumulator,
// a row several workers (or one worker several times) touched is summed once, so what
// the chief takes and sends to the optimizer grows with the rows touched, not the table.
struct SparseSum {
  DType dtype = DType::f32;
  std::vector<int64_t> row_dims;  // a row's shape (the values' dims after the first)
  int64_t row_elems = 0;
  std::unordered_map<int64_t, size_t> slot_of;  // row index -> its place in rows/sums
  std::vector<int64_t> rows;
  std::vector<double> sums;  // rows.size() x row_elems, summed in double

  bool started = false;  // a gradient was added (perhaps with no rows)

  bool empty() const { return !started; }
  // An error message, empty when added.
  std::string add(const Tensor& values, const Tensor& indices) {
    if (indices.rank() != 1 || values.rank() < 1 || values.dim(0) != indices.dim(0))
      return "values " + describe(values) + " and indices " + describe(indices) + " are not rows [k, ...] at indices [k]";
    std::vector<int64_t> dims(values.shape().dims().begin() + 1, values.shape().dims().end());
    if (!started) {
      started = true;
      dtype = values.dtype();
      row_dims = dims;
      row_elems = 1;
      for (int64_t d : dims) row_elems *= d;
    } else if (dims != row_dims || values.dtype() != dtype) {
      return "rows " + describe(values) + " do not match the accumulated rows of " + Shape(row_dims).to_string() + " " +
             dtype_name(dtype);
    }
    const int64_t k = indices.dim(0);
    for (int64_t i = 0; i < k; ++i) {
      const int64_t ix = index_at(indices, i);
      if (ix < 0) return "indices[" + std::to_string(i) + "] = " + std::to_string(ix) + " is negative";
    }
    for (int64_t i = 0; i < k; ++i) {
      const int64_t ix = index_at(indices, i);
      auto [it, fresh] = slot_of.emplace(ix, rows.size());
      if (fresh) {
        rows.push_back(ix);
        sums.resize(sums.size() + static_cast<size_t>(row_elems), 0.0);
      }
      double* dst = sums.data() + it->second * static_cast<size_t>(row_elems);
      visit_dtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_floating_point_v<T>) {
          const T* src = values.data<T>() + i * row_elems;
          for (int64_t j = 0; j < row_elems; ++j) dst[j] += static_cast<double>(src[j]);
        }
      });
    }
    return {};
  }
  // The mean over `count` gradients as (indices int64 [u] ascending, values [u, ...row]).
  std::pair<Tensor, Tensor> mean(int64_t count) const {
    std::vector<size_t> order(rows.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rows[a] < rows[b]; });
    const int64_t u = static_cast<int64_t>(rows.size());
    Tensor idx(DType::i64, Shape{u});
    std::vector<int64_t> vdims{u};
    vdims.insert(vdims.end(), row_dims.begin(), row_dims.end());
    Tensor vals(dtype, Shape(vdims));
    visit_dtype(dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<T>) {
        T* out = vals.data<T>();
        for (int64_t r = 0; r < u; ++r) {
          const size_t from = order[static_cast<size_t>(r)];
          idx.data<int64_t>()[r] = rows[from];
          const double* src = sums.data() + from * static_cast<size_t>(row_elems);
          for (int64_t j = 0; j < row_elems; ++j) out[r * row_elems + j] = static_cast<T>(src[j] / static_cast<double>(count));
        }
      }
    });
    return {idx, vals};
  }

 private:
  static std::string describe(const Tensor& t) { return std::string(dtype_name(t.dtype())) + t.shape().to_string(); }
};

struct GradientAccumulator final : Resource {
  std::shared_ptr<WaitList> waits = std::make_shared<WaitList>();
  Tensor sum;         // the dense sum; invalid while empty
  SparseSum sparse;   // the sparse sum
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
  std::map<int64_t, std::pair<int64_t, Contribution>> stashed;
  // Takes begun so far. Only the chief takes, one step at a time, so a take still waiting
  // when a newer one begins belongs to a step that failed elsewhere (a ps lost): it gives
  // way instead of taking the newer round's gradients as its own.
  uint64_t takes = 0;
  int64_t latest_take_round = 0;  // the round the newest take asked for

  // Adds worker `worker`'s gradient to this round's sum (under waits->mu). An error
  // message, adding nothing, when it does not match what was summed so far.
  std::string add(const Contribution& c, int64_t worker) {
    if (c.sparse()) {
      if (sum.valid()) return "a sparse gradient for an accumulator of dense ones";
      std::string err = sparse.add(c.values, c.indices);
      if (!err.empty()) return err;
    } else {
      const Tensor& g = c.values;
      if (!sparse.empty()) return "a dense gradient for an accumulator of sparse ones";
      if (!sum.valid()) sum = g.clone();
      else if (sum.shape() != g.shape() || sum.dtype() != g.dtype())
        return "gradient " + std::string(dtype_name(g.dtype())) + g.shape().to_string() + " does not match the accumulated " +
               dtype_name(sum.dtype()) + sum.shape().to_string();
      else if (g.dtype() == DType::f32) add_into<float>(sum, g);
      else add_into<double>(sum, g);
    }
    ++count;
    workers.insert(worker);
    return {};
  }
  // Empties this round's sum (taken, or dropped for an earlier round).
  void clear_sum() {
    sum = Tensor();
    sparse = SparseSum();
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

// AccumulatorApplyGradient (local_step, gradient) and, `kSparse`,
// SparseAccumulatorApplyGradient (local_step, values, indices).
template <bool kSparse>
class ApplyGradientKernel final : public OpKernel {
 public:
  explicit ApplyGradientKernel(const Node& n)
      : OpKernel(n), key_("accumulator:" + n.attr_string("accumulator")), worker_(n.attr_int("worker")) {}
  void compute(OpKernelContext& ctx) override {
    auto acc = find_or_make<GradientAccumulator>(ctx, key_);
    if (!acc) return;
    int64_t step = ctx.input(0).item<int64_t>();
    Contribution c{ctx.input(1), kSparse ? ctx.input(2) : Tensor()};
    std::lock_guard<std::mutex> lock(acc->waits->mu);
    if (step < acc->round) {
      ++acc->stale;
      acc->stashed[worker_] = {step, c.clone()};
      return;
    }
    std::string err = acc->add(c, worker_);
    if (!err.empty()) return ctx.fail(invalid_argument("worker " + std::to_string(worker_) + ": " + err));
    acc->waits->notify();
  }

 private:
  std::string key_;
  int64_t worker_;
};

// AccumulatorTakeGradient (round) -> mean and, `kSparse`, SparseAccumulatorTakeGradient
// (round) -> (indices, values).
template <bool kSparse>
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
      if (stash.first >= round && a.add(stash.second, worker).empty()) --a.stale;
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
    if (kSparse != !acc.sparse.empty()) {
      st.ctx->fail(invalid_argument(std::string("a ") + (kSparse ? "sparse" : "dense") + " take from an accumulator of " +
                                    (kSparse ? "dense" : "sparse") + " gradients"));
    } else if (kSparse) {
      auto [indices, values] = acc.sparse.mean(acc.count);
      st.ctx->set_output(0, indices);
      st.ctx->set_output(1, values);
    } else {
      st.ctx->set_output(0, acc.sum.dtype() == DType::f32 ? mean_of<float>(acc.sum, acc.count) : mean_of<double>(acc.sum, acc.count));
    }
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

using DenseApplyGradientKernel = ApplyGradientKernel<false>;
using SparseApplyGradientKernel = ApplyGradientKernel<true>;
using DenseTakeGradientKernel = TakeGradientKernel<false>;
using SparseTakeGradientKernel = TakeGradientKernel<true>;
AF_REGISTER_KERNEL("AccumulatorApplyGradient", DeviceType::CPU, DenseApplyGradientKernel);
AF_REGISTER_KERNEL("SparseAccumulatorApplyGradient", DeviceType::CPU, SparseApplyGradientKernel);
AF_REGISTER_KERNEL("AccumulatorTakeGradient", DeviceType::CPU, DenseTakeGradientKernel);
AF_REGISTER_KERNEL("SparseAccumulatorTakeGradient", DeviceType::CPU, SparseTakeGradientKernel);
AF_REGISTER_KERNEL("SyncRoundAdvance", DeviceType::CPU, RoundAdvanceKernel);
AF_REGISTER_KERNEL("SyncRoundWait", DeviceType::CPU, RoundWaitKernel);
AF_REGISTER_KERNEL("WorkerClock", DeviceType::CPU, WorkerClockKernel);
AF_REGISTER_KERNEL("WorkerDone", DeviceType::CPU, WorkerDoneKernel);
AF_REGISTER_KERNEL("WaitWorkersDone", DeviceType::CPU, WaitWorkersDoneKernel);
AF_REGISTER_KERNEL("WorkerClockLog", DeviceType::CPU, ClockLogKernel);
AF_REGISTER_KERNEL("AccumulatorNumStale", DeviceType::CPU, NumStaleKernel);

}  // namespace actorflow
