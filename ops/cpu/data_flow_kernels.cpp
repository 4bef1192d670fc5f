// CPU kernels of DynamicPartition, DynamicStitch and Range.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "actorflow/kernel.h"
#include "common/fill_util.h"

namespace actorflow {
namespace {

using fill_util::try_allocate;
using fill_util::visit_any_dtype;

// Elements per row of `data` once its first `prefix_rank` dims are taken as the rows.
int64_t row_size(const Shape& data, int prefix_rank) {
  int64_t n = 1;
  for (int i = prefix_rank; i < data.rank(); ++i) n *= data.dim(i);
  return n;
}

bool is_prefix(const Shape& prefix, const Shape& s) {
  if (prefix.rank() > s.rank()) return false;
  for (int i = 0; i < prefix.rank(); ++i)
    if (prefix.dim(i) != s.dim(i)) return false;
  return true;
}

class DynamicPartitionKernel : public OpKernel {
 public:
  explicit DynamicPartitionKernel(const Node& n) : OpKernel(n), num_(n.attr_int("num_partitions", 1)) {}

  void compute(OpKernelContext& ctx) override {
    const Tensor& data = ctx.input(0);
    const Tensor& parts = ctx.input(1);
    if (!is_prefix(parts.shape(), data.shape())) {
      ctx.fail("partitions of shape " + parts.shape().to_string() + " must be a prefix of data's shape " +
               data.shape().to_string());
      return;
    }
    const int32_t* p = parts.data<int32_t>();
    const int64_t m = parts.num_elements();
    std::vector<int64_t> counts(static_cast<size_t>(num_), 0);
    // Every partition index is checked before anything is written.
    for (int64_t k = 0; k < m; ++k) {
      if (p[k] < 0 || p[k] >= num_) {
        ctx.fail("partitions[" + std::to_string(k) + "] = " + std::to_string(p[k]) + " is not in [0, " +
                 std::to_string(num_) + ")");
        return;
      }
      ++counts[static_cast<size_t>(p[k])];
    }
    const int64_t row = row_size(data.shape(), parts.rank());
    std::vector<int64_t> tail(data.shape().dims().begin() + parts.rank(), data.shape().dims().end());
    std::vector<Tensor*> outs(static_cast<size_t>(num_));
    for (int64_t i = 0; i < num_; ++i) {
      std::vector<int64_t> dims{counts[static_cast<size_t>(i)]};
      dims.insert(dims.end(), tail.begin(), tail.end());
      outs[static_cast<size_t>(i)] = try_allocate(ctx, static_cast<int>(i), data.dtype(), Shape(std::move(dims)));
      if (!outs[static_cast<size_t>(i)]) return;
    }
    bool ok = visit_any_dtype(data.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* src = data.data<T>();
      std::vector<int64_t> next(static_cast<size_t>(num_), 0);
      for (int64_t k = 0; k < m; ++k) {
        const size_t i = static_cast<size_t>(p[k]);
        std::copy_n(src + k * row, row, outs[i]->data<T>() + next[i]++ * row);
      }
    });
    if (!ok) ctx.fail(std::string("unsupported dtype ") + dtype_name(data.dtype()));
  }

 private:
  int64_t num_;
};

class DynamicStitchKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;

  void compute(OpKernelContext& ctx) override {
    const int n = ctx.num_inputs() / 2;
    const Tensor& first = ctx.input(n);
    const Shape& idx0 = ctx.input(0).shape();
    if (!is_prefix(idx0, first.shape())) {
      ctx.fail("indices[0] of shape " + idx0.to_string() + " must be a prefix of data[0]'s shape " +
               first.shape().to_string());
      return;
    }
    const std::vector<int64_t> tail(first.shape().dims().begin() + idx0.rank(), first.shape().dims().end());
    const int64_t row = row_size(first.shape(), idx0.rank());
    int64_t rows = 0;
    for (int i = 0; i < n; ++i) {
      const Tensor& idx = ctx.input(i);
      const Tensor& data = ctx.input(n + i);
      std::vector<int64_t> want = idx.shape().dims();
      want.insert(want.end(), tail.begin(), tail.end());
      if (data.shape() != Shape(want)) {
        ctx.fail("data[" + std::to_string(i) + "] has shape " + data.shape().to_string() + " but indices[" +
                 std::to_string(i) + "] " + idx.shape().to_string() + " and the rows of data[0] need " +
                 Shape(want).to_string());
        return;
      }
      const int32_t* p = idx.data<int32_t>();
      for (int64_t k = 0; k < idx.num_elements(); ++k) {
        if (p[k] < 0) {
          ctx.fail("indices[" + std::to_string(i) + "][" + std::to_string(k) + "] = " + std::to_string(p[k]) +
                   " is negative");
          return;
        }
        rows = std::max<int64_t>(rows, int64_t{p[k]} + 1);
      }
    }
    std::vector<int64_t> dims{rows};
    dims.insert(dims.end(), tail.begin(), tail.end());
    Tensor* out = try_allocate(ctx, 0, first.dtype(), Shape(std::move(dims)));
    if (!out) return;
    bool ok = visit_any_dtype(first.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* dst = out->data<T>();
      std::fill_n(dst, out->num_elements(), T{});
      for (int i = 0; i < n; ++i) {
        const int32_t* p = ctx.input(i).data<int32_t>();
        const T* src = ctx.input(n + i).data<T>();
        for (int64_t k = 0; k < ctx.input(i).num_elements(); ++k)
          std::copy_n(src + k * row, row, dst + int64_t{p[k]} * row);
      }
    });
    if (!ok) ctx.fail(std::string("unsupported dtype ") + dtype_name(first.dtype()));
  }
};

class RangeKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;

  void compute(OpKernelContext& ctx) override {
    if (ctx.input(0).dtype() == DType::i32) run<int32_t>(ctx);
    else run<int64_t>(ctx);
  }

 private:
  template <typename T>
  void run(OpKernelContext& ctx) {
    for (int i = 0; i < 3; ++i)
      if (ctx.input(i).num_elements() != 1) {
        ctx.fail("start, limit and delta must be scalars");
        return;
      }
    const int64_t start = ctx.input(0).data<T>()[0], limit = ctx.input(1).data<T>()[0], delta = ctx.input(2).data<T>()[0];
    // TF's checks and size: delta moves from start towards limit, never past it.
    if (delta == 0) return ctx.fail("delta must not be 0");
    if (delta > 0 && start > limit) return ctx.fail("start must be <= limit when delta > 0");
    if (delta < 0 && start < limit) return ctx.fail("start must be >= limit when delta < 0");
    // In unsigned arithmetic: limit - start may not fit an int64.
    const uint64_t span = delta > 0 ? static_cast<uint64_t>(limit) - static_cast<uint64_t>(start)
                                    : static_cast<uint64_t>(start) - static_cast<uint64_t>(limit);
    const uint64_t step = delta > 0 ? static_cast<uint64_t>(delta) : uint64_t{0} - static_cast<uint64_t>(delta);
    const uint64_t size = span / step + (span % step != 0 ? 1 : 0);
    if (size > static_cast<uint64_t>(fill_util::kMaxElements)) return ctx.fail("the range is too long");
    Tensor* out = try_allocate(ctx, 0, ctx.input(0).dtype(), Shape{static_cast<int64_t>(size)});
    if (!out) return;
    T* dst = out->data<T>();
    for (uint64_t k = 0; k < size; ++k)
      dst[k] = static_cast<T>(static_cast<uint64_t>(start) + k * static_cast<uint64_t>(delta));
  }
};

}  // namespace

AF_REGISTER_KERNEL("DynamicPartition", DeviceType::CPU, DynamicPartitionKernel);
AF_REGISTER_KERNEL("DynamicStitch", DeviceType::CPU, DynamicStitchKernel);
AF_REGISTER_KERNEL("Range", DeviceType::CPU, RangeKernel);

}  // namespace actorflow
