// CPU kernel of Dropout(x[, training]) -> y, mask.
//
// The keep decision is TF's: element i is kept when u_i >= 1 - keep_prob, where u is the
// stream RandomUniform draws for the same (seed, seed2) and dtype (Philox4x32-10, one
// block per group of 4 floats or 2 doubles, a block counter that lives as long as the
// kernel), so a session replays the same masks and successive runs draw fresh ones.
// The mask output holds 1/keep_prob where kept and 0 elsewhere; y = x * mask, and the
// gradient is the incoming gradient times the same mask.
//
// With a `training` input that is false, y is x itself and the mask is all ones.
#include <algorithm>
#include <atomic>

#include "actorflow/kernel.h"
#include "cpu/random_philox.h"

namespace actorflow {
namespace {

using rng::kPerBlock;
using rng::PhiloxCounter;
using rng::PhiloxKey;

// Element i kept (mask scale) where u[i] >= drop, else dropped (mask 0); y = x * mask.
// Through restrict parameters the loop vectorizes: writing through a lambda's captured
// pointers, element by element, the kernel took ~30 cycles an element.
template <typename T>
void keep_or_drop(const T* __restrict u, const T* __restrict x, T* __restrict mask, T* __restrict y, int64_t n,
                  double drop, T scale) {
  for (int64_t i = 0; i < n; ++i) {
    const T mk = static_cast<double>(u[i]) >= drop ? scale : T(0);
    mask[i] = mk;
    y[i] = x[i] * mk;
  }
}

class DropoutKernel : public OpKernel {
 public:
  explicit DropoutKernel(const Node& n) : OpKernel(n), keep_prob_(n.attr_float("keep_prob", 0.5)) {
    // The random ops' key: equal seeds give RandomUniform's stream.
    key_ = rng::philox_key(n.attr_int("seed", 0), n.attr_int("seed2", 0));
  }

  void compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::f32 && x.dtype() != DType::f64) {
      ctx.fail(std::string("needs a float32 or float64 input, got ") + dtype_name(x.dtype()));
      return;
    }
    if (!(keep_prob_ > 0 && keep_prob_ <= 1)) {
      ctx.fail("keep_prob must be in (0, 1], got " + std::to_string(keep_prob_));
      return;
    }
    bool training = true;
    if (ctx.num_inputs() == 2) {
      const Tensor& t = ctx.input(1);
      if (t.dtype() != DType::boolean || t.num_elements() != 1) {
        ctx.fail("training must be a bool scalar, got " + std::string(dtype_name(t.dtype())) + t.shape().to_string());
        return;
      }
      training = t.item<bool>();
    }
    if (x.dtype() == DType::f32) run<float>(ctx, training);
    else run<double>(ctx, training);
  }

 private:
  template <typename T>
  void run(OpKernelContext& ctx, bool training) {
    const Tensor& x = ctx.input(0);
    const int64_t n = x.num_elements();
    Tensor& mask = ctx.allocate_output(1, x.dtype(), x.shape());
    T* m = mask.data<T>();
    if (!training || keep_prob_ == 1.0) {
      std::fill(m, m + n, T(1));
      ctx.set_output(0, x);
      return;
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    if (n == 0) return;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    constexpr int K = kPerBlock<T>;
    const int64_t groups = (n + K - 1) / K;
    const uint64_t base = next_block_.fetch_add(static_cast<uint64_t>(groups), std::memory_order_relaxed);
    const double rate = 1.0 - keep_prob_;
    const T scale = static_cast<T>(1.0 / keep_prob_);
    const PhiloxKey key = key_;
    ctx.device()->parallel_for(groups, 25, [&](int64_t g0, int64_t g1) {
      // L groups at a time: their blocks in vector lanes, then their elements in
      // keep_or_drop. The range's last run draws all L blocks and uses those it covers (a
      // loop over a variable number of lanes made the whole kernel 2.3x slower).
      constexpr int L = rng::kPhiloxLanes;
      uint32_t words[4][L];
      T u[L * K];
      for (int64_t g = g0; g < g1; g += L) {
        rng::philox4x32_10_lanes(base + static_cast<uint64_t>(g), key, words);
        for (int l = 0; l < L; ++l)
          rng::uniforms<T>(PhiloxCounter{words[0][l], words[1][l], words[2][l], words[3][l]}, u + l * K);
        const int64_t i0 = g * K;
        keep_or_drop(u, px + i0, m + i0, py + i0, std::min<int64_t>(std::min<int64_t>(L, g1 - g) * K, n - i0), rate,
                     scale);
      }
    });
  }

  double keep_prob_;
  PhiloxKey key_{};
  std::atomic<uint64_t> next_block_{0};
};

AF_REGISTER_KERNEL("Dropout", DeviceType::CPU, DropoutKernel);

}  // namespace
}  // namespace actorflow
