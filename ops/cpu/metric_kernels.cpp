// CPU kernel of AucAccumulate: a batch's confusion counts at every threshold, added to
// the four count variables.
//
// Thresholds ascend, so a prediction exceeds exactly the first m of them. The batch is
// first binned by m (separately for positives and negatives); the counts at threshold i
// are then suffix / prefix sums of those bins: O(N log T + T) instead of O(N T).
#include <algorithm>
#include <array>
#include <cmath>
#include <mutex>
#include <type_traits>
#include <vector>

#include "actorflow/kernel.h"
#include "actorflow/resource_mgr.h"
#include "common/variable_write.h"

namespace actorflow {
namespace {

constexpr int64_t kChunk = 1 << 16;
constexpr double kEpsilon = 1e-7;  // thresholds just outside [0, 1], as TF

class AucAccumulateKernel : public OpKernel {
 public:
  explicit AucAccumulateKernel(const Node& n)
      : OpKernel(n),
        names_{n.attr_string("true_positives"), n.attr_string("false_negatives"), n.attr_string("true_negatives"),
               n.attr_string("false_positives")},
        num_thresholds_(n.attr_int("num_thresholds", 200)) {
    const int64_t t = num_thresholds_;
    if (t < 2 || t > (int64_t{1} << 24)) return;  // compute() reports it
    thresholds_.resize(static_cast<size_t>(t));
    for (int64_t i = 0; i < t; ++i) thresholds_[static_cast<size_t>(i)] = static_cast<double>(i) / static_cast<double>(t - 1);
    thresholds_.front() = -kEpsilon;
    thresholds_.back() = 1 + kEpsilon;
  }

  void compute(OpKernelContext& ctx) override {
    if (thresholds_.empty()) {
      ctx.fail("attribute 'num_thresholds' = " + std::to_string(num_thresholds_) + " must be in [2, 2^24]");
      return;
    }
    const Tensor& pred = ctx.input(0);
    const Tensor& labels = ctx.input(1);
    if (pred.shape() != labels.shape()) {
      ctx.fail("predictions " + pred.shape().to_string() + " and labels " + labels.shape().to_string() +
               " must have the same shape");
      return;
    }
    std::vector<double> weights;
    if (ctx.num_inputs() == 3) {
      const Tensor& w = ctx.input(2);
      if (w.num_elements() != 1 && w.shape() != pred.shape()) {
        ctx.fail("weights " + w.shape().to_string() + " must be a scalar or shaped like predictions " +
                 pred.shape().to_string());
        return;
      }
      weights.resize(static_cast<size_t>(w.num_elements()));
      for (int64_t i = 0; i < w.num_elements(); ++i) weights[static_cast<size_t>(i)] = w.element_as_double(i);
    }
    Bins bins;
    bool typed = false;
    if (pred.dtype() == DType::f32) typed = bin_labels<float>(ctx, pred, labels, weights, &bins);
    else if (pred.dtype() == DType::f64) typed = bin_labels<double>(ctx, pred, labels, weights, &bins);
    if (!typed) {
      ctx.fail(std::string("unsupported dtypes: predictions ") + dtype_name(pred.dtype()) + ", labels " +
               dtype_name(labels.dtype()));
      return;
    }
    if (!ctx.ok()) return;
    update(ctx, bins);
  }

 private:
  // pos[m] / neg[m]: total weight of positive / negative examples exceeding exactly the
  // first m thresholds, m in [0, T].
  struct Bins {
    std::vector<double> pos, neg;
  };

  template <typename T>
  bool bin_labels(OpKernelContext& ctx, const Tensor& pred, const Tensor& labels, const std::vector<double>& w,
                  Bins* bins) {
    bool ok = visit_dtype(labels.dtype(), [&](auto tag) {
      using L = decltype(tag);
      bin<T, L>(ctx, pred.data<T>(), labels.data<L>(), pred.num_elements(), w, bins);
    });
    return ok;
  }

  // Chunks of a fixed size are binned in parallel and merged in order, so the sums do not
  // depend on the thread count. A prediction outside [0, 1] (or NaN) fails the step,
  // naming the first one.
  template <typename T, typename L>
  void bin(OpKernelContext& ctx, const T* p, const L* y, int64_t n, const std::vector<double>& w, Bins* bins) const {
    const size_t slots = static_cast<size_t>(num_thresholds_ + 1);
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    std::vector<T> thr(thresholds_.size());
    for (size_t i = 0; i < thr.size(); ++i) thr[i] = static_cast<T>(thresholds_[i]);
    std::vector<std::vector<double>> pos(static_cast<size_t>(chunks)), neg(static_cast<size_t>(chunks));
    std::vector<int64_t> bad(static_cast<size_t>(chunks), -1);
    ctx.device()->parallel_for(chunks, kChunk * 8, [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k) {
        auto& pk = pos[static_cast<size_t>(k)];
        auto& nk = neg[static_cast<size_t>(k)];
        pk.assign(slots, 0.0);
        nk.assign(slots, 0.0);
        const int64_t end = std::min(n, (k + 1) * kChunk);
        for (int64_t i = k * kChunk; i < end; ++i) {
          const T v = p[i];
          if (!(v >= T(0) && v <= T(1))) {
            bad[static_cast<size_t>(k)] = i;
            break;
          }
          const size_t m = static_cast<size_t>(std::lower_bound(thr.begin(), thr.end(), v) - thr.begin());
          const double wi = w.empty() ? 1.0 : w[w.size() == 1 ? 0 : static_cast<size_t>(i)];
          (y[i] != L(0) ? pk : nk)[m] += wi;
        }
      }
    });
    for (int64_t k = 0; k < chunks; ++k) {
      const int64_t i = bad[static_cast<size_t>(k)];
      if (i >= 0) {
        ctx.fail(invalid_argument("prediction " + std::to_string(static_cast<double>(p[i])) + " at index " +
                                  std::to_string(i) + " is outside [0, 1]: AUC needs probabilities"));
        return;
      }
    }
    bins->pos.assign(slots, 0.0);
    bins->neg.assign(slots, 0.0);
    for (int64_t k = 0; k < chunks; ++k)
      for (size_t m = 0; m < slots; ++m) {
        bins->pos[m] += pos[static_cast<size_t>(k)][m];
        bins->neg[m] += neg[static_cast<size_t>(k)][m];
      }
  }

  void update(OpKernelContext& ctx, const Bins& bins) {
    std::array<std::shared_ptr<VariableState>, 4> vars;
    for (int i = 0; i < 4; ++i) vars[static_cast<size_t>(i)] = ctx.resources()->variable(names_[static_cast<size_t>(i)]);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < i; ++j)
        if (vars[static_cast<size_t>(i)] == vars[static_cast<size_t>(j)]) {
          ctx.fail("variable '" + names_[static_cast<size_t>(i)] + "' is named by two count attributes");
          return;
        }
    std::scoped_lock lock(vars[0]->mu, vars[1]->mu, vars[2]->mu, vars[3]->mu);
    const int64_t t = num_thresholds_;
    for (int i = 0; i < 4; ++i) {
      VariableState& v = *vars[static_cast<size_t>(i)];
      if (!v.value.valid()) {
        ctx.fail(failed_precondition("variable '" + names_[static_cast<size_t>(i)] +
                                     "' is updated before it was initialized (run Session::run_init())"));
        return;
      }
      if (v.value.dtype() != DType::f64 || v.value.shape() != Shape{t}) {
        ctx.fail("variable '" + names_[static_cast<size_t>(i)] + "' holds " + dtype_name(v.value.dtype()) +
                 v.value.shape().to_string() + ", expected f64[" + std::to_string(t) + "]");
        return;
      }
    }
    // Copy-on-write: a reader may still hold the current buffers.
    for (auto& v : vars) {
      own_variable_value(*v);
      v->value.buffer()->note_write();  // written below (before any reader can see it)
    }
    double* tp = vars[0]->value.data<double>();
    double* fn = vars[1]->value.data<double>();
    double* tn = vars[2]->value.data<double>();
    double* fp = vars[3]->value.data<double>();
    // Threshold i: examples in bins m > i are predicted positive, m <= i negative.
    double pos_below = 0, neg_below = 0;
    double pos_total = 0, neg_total = 0;
    for (size_t m = 0; m < bins.pos.size(); ++m) {
      pos_total += bins.pos[m];
      neg_total += bins.neg[m];
    }
    for (int64_t i = 0; i < t; ++i) {
      pos_below += bins.pos[static_cast<size_t>(i)];
      neg_below += bins.neg[static_cast<size_t>(i)];
      tp[i] += pos_total - pos_below;
      fn[i] += pos_below;
      fp[i] += neg_total - neg_below;
      tn[i] += neg_below;
    }
    for (int i = 0; i < 4; ++i) ctx.set_output(i, vars[static_cast<size_t>(i)]->value);
  }

  std::array<std::string, 4> names_;
  int64_t num_thresholds_;
  std::vector<double> thresholds_;
};

AF_REGISTER_KERNEL("AucAccumulate", DeviceType::CPU, AucAccumulateKernel);

}  // namespace
}  // namespace actorflow
