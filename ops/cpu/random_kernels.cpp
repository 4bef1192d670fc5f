// CPU kernels of RandomNormal, RandomUniform and TruncatedNormal.
//
// Each kernel owns a Philox key (rng::philox_key: from the seeds, or fresh when both
// are 0) and a block counter that lives as long as the kernel: a run reserves the next
// blocks of the stream, so successive runs give fresh values while a fresh session
// replays the same sequence. Output element group g of a run uses block (base + g) alone,
// which makes the values independent of how the work is sharded.
#include <algorithm>
#include <atomic>
#include <cmath>

#include "actorflow/kernel.h"
#include "common/fill_util.h"
#include "cpu/random_philox.h"

namespace actorflow {
namespace {

using rng::kPerBlock;
using rng::PhiloxCounter;
using rng::PhiloxKey;

enum class Dist { uniform, normal, truncated };

template <Dist D>
class RandomKernel : public OpKernel {
 public:
  explicit RandomKernel(const Node& n)
      : OpKernel(n),
        shape_(n.attr_shape("shape")),
        dtype_(n.attr_dtype("dtype", DType::f32)),
        a_(n.attr_float(D == Dist::uniform ? "minval" : "mean", 0)),
        b_(n.attr_float(D == Dist::uniform ? "maxval" : "stddev", 1)) {
    key_ = rng::philox_key(n.attr_int("seed", 0), n.attr_int("seed2", 0));
  }

  void compute(OpKernelContext& ctx) override {
    if (!shape_.is_fully_defined()) {
      ctx.fail("shape " + shape_.to_string() + " is not fully defined");
      return;
    }
    Tensor* out = fill_util::try_allocate(ctx, 0, dtype_, shape_);
    if (!out || out->num_elements() == 0) return;
    if (dtype_ == DType::f32) generate<float>(ctx, out->data<float>(), out->num_elements());
    else if (dtype_ == DType::f64) generate<double>(ctx, out->data<double>(), out->num_elements());
    else ctx.fail(std::string("random values of dtype ") + dtype_name(dtype_) + " are not supported");
  }

 private:
  template <typename T>
  void generate(OpKernelContext& ctx, T* out, int64_t n) {
    constexpr int K = kPerBlock<T>;
    const int64_t groups = (n + K - 1) / K;
    // Concurrent steps of a pipelined graph each get their own blocks.
    const uint64_t base = next_block_.fetch_add(static_cast<uint64_t>(groups), std::memory_order_relaxed);
    const double a = a_, b = b_;
    const PhiloxKey key = key_;
    auto at = [&](uint64_t block, uint64_t sub) {
      return rng::philox4x32_10(PhiloxCounter{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                                                 static_cast<uint32_t>(sub), static_cast<uint32_t>(sub >> 32)},
                                   key);
    };
    const int64_t cost = D == Dist::uniform ? 20 : 60;
    ctx.device()->parallel_for(groups, cost, [&](int64_t g0, int64_t g1) {
      T v[K];
      for (int64_t g = g0; g < g1; ++g) {
        T* o = out + g * K;
        const int cnt = static_cast<int>(std::min<int64_t>(K, n - g * K));
        const uint64_t block = base + static_cast<uint64_t>(g);
        if constexpr (D == Dist::uniform) {
          rng::uniforms<T>(at(block, 0), v);
          const T lo = static_cast<T>(a), hi = static_cast<T>(b);
          const double range = b - a;
          for (int j = 0; j < cnt; ++j) {
            T x = static_cast<T>(a + range * static_cast<double>(v[j]));
            // Rounding to T can land on maxval itself; the interval is half-open.
            if (x >= hi && hi > lo) x = std::nextafter(hi, lo);
            o[j] = x;
          }
        } else if constexpr (D == Dist::normal) {
          rng::normals<T>(at(block, 0), v);
          for (int j = 0; j < cnt; ++j) o[j] = static_cast<T>(a + b * static_cast<double>(v[j]));
        } else {
          // Re-draw from further sub-blocks of this group's own stream until every slot
          // holds a value within 2 stddev (about 1.05 blocks on average).
          int filled = 0;
          for (uint64_t sub = 0; filled < cnt; ++sub) {
            rng::normals<T>(at(block, sub), v);
            for (int j = 0; j < K && filled < cnt; ++j)
              if (std::fabs(v[j]) < T(2)) o[filled++] = static_cast<T>(a + b * static_cast<double>(v[j]));
          }
        }
      }
    });
  }

  Shape shape_;
  DType dtype_;
  double a_, b_;
  PhiloxKey key_{};
  std::atomic<uint64_t> next_block_{0};
};

AF_REGISTER_KERNEL("RandomUniform", DeviceType::CPU, RandomKernel<Dist::uniform>);
AF_REGISTER_KERNEL("RandomNormal", DeviceType::CPU, RandomKernel<Dist::normal>);
AF_REGISTER_KERNEL("TruncatedNormal", DeviceType::CPU, RandomKernel<Dist::truncated>);

}  // namespace
}  // namespace actorflow
