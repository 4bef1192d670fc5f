#include <cstring>

#include "actorflow/kernel.h"
#include "common/broadcast.h"
#include "common/sparse_rows.h"

namespace actorflow {
namespace {

class SumToShapeOfKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(OpKernelContext& ctx) override {
    const Tensor& g = ctx.input(0);
    const Shape& target = ctx.input(1).shape();
    if (g.shape() == target) {
      ctx.set_output(0, g);
      return;
    }
    BroadcastPlan plan;
    if (!make_broadcast_plan({&g.shape(), &target}, &plan) || plan.out_shape != g.shape()) {
      ctx.fail("gradient of shape " + g.shape().to_string() + " cannot be summed to shape " + target.to_string());
      return;
    }
    Tensor& out = ctx.allocate_output(0, g.dtype(), target);
    visit_dtype(g.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<T>) {
        T* po = out.data<T>();
        std::fill(po, po + out.num_elements(), T(0));
        const T* pg = g.data<T>();
        for_each_broadcast_span<2>(plan, 0, plan.num_elements, [&](int64_t o, int64_t n, const int64_t* off, const int64_t* step) {
          const T* src = pg + off[0];
          T* dst = po + off[1];
          if (step[1] == 1) {
            for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
          } else {
            T acc = 0;
            for (int64_t i = 0; i < n; ++i) acc += src[i];
            dst[0] += acc;
          }
          (void)o;
        });
      }
    });
  }
};

class SparseRowsToDenseKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(OpKernelContext& ctx) override {
    const Tensor& values = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    const Tensor& like = ctx.input(2);
    if (like.rank() < 1) {
      ctx.fail("target must have rank >= 1");
      return;
    }
    int64_t rows = like.dim(0);
    int64_t row = rows == 0 ? 0 : like.num_elements() / rows;
    int64_t k = indices.num_elements();
    if (values.num_elements() != k * row) {
      ctx.fail("values " + values.shape().to_string() + " do not match " + std::to_string(k) + " rows of " +
               std::to_string(row) + " elements");
      return;
    }
    Tensor& out = ctx.allocate_output(0, like.dtype(), like.shape());
    if (out.bytes()) std::memset(out.raw_data(), 0, out.bytes());
    visit_dtype(like.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<T>) {
        T* po = out.data<T>();
        const T* pv = values.data<T>();
        for (int64_t j = 0; j < k; ++j) {
          int64_t r = indices.dtype() == DType::i32 ? indices.data<int32_t>()[j] : indices.data<int64_t>()[j];
          if (r < 0 || r >= rows) {
            ctx.fail(out_of_range("index " + std::to_string(r) + " is out of range [0, " + std::to_string(rows) + ")"));
            return;
          }
          T* dst = po + r * row;
          const T* src = pv + j * row;
          for (int64_t i = 0; i < row; ++i) dst[i] += src[i];
        }
      }
    });
  }
};

class SparseSumDuplicatesKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(OpKernelContext& ctx) override {
    const Tensor& values = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    const int64_t k = indices.num_elements();
    if (indices.rank() != 1 || values.rank() < 1 || values.dim(0) != k) {
      ctx.fail("values " + values.shape().to_string() + " and indices " + indices.shape().to_string() +
               " are not rows [k, ...] at indices [k]");
      return;
    }
    const int64_t row = k == 0 ? 0 : values.num_elements() / k;
    const RowGroups groups = group_rows(indices);
    const int64_t u = static_cast<int64_t>(groups.unique.size());
    ctx.set_output(0, Tensor::from_vector(groups.unique, Shape{u}));
    if (!groups.repeats()) {  // nothing repeats: the rows go on as they are
      ctx.set_output(1, values);
      return;
    }
    std::vector<int64_t> dims = values.shape().dims();
    dims[0] = u;
    Tensor& out = ctx.allocate_output(1, values.dtype(), Shape(dims));
    visit_dtype(values.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<T>) sum_rows(values.data<T>(), row, groups, out.data<T>());
    });
  }
};

AF_REGISTER_KERNEL("SparseSumDuplicates", DeviceType::CPU, SparseSumDuplicatesKernel);
AF_REGISTER_KERNEL("SumToShapeOf", DeviceType::CPU, SumToShapeOfKernel);
AF_REGISTER_KERNEL("SparseRowsToDense", DeviceType::CPU, SparseRowsToDenseKernel);

}  // namespace
}  // namespace actorflow

namespace actorflow {
namespace {

class BroadcastReducedKernel : public OpKernel {
 public:
  explicit BroadcastReducedKernel(const Node& n) : OpKernel(n), axes_(n.attr_ints("axes")), mean_(n.attr_bool("mean")) {}
  void compute(OpKernelContext& ctx) override {
    const Tensor& g = ctx.input(0);
    const Shape& s = ctx.input(1).shape();
    int r = s.rank();
    std::vector<bool> reduced(static_cast<size_t>(r), axes_.empty());
    for (int64_t a : axes_) {
      int64_t n = a < 0 ? a + r : a;
      if (n < 0 || n >= r) {
        ctx.fail("axis " + std::to_string(a) + " out of range for rank " + std::to_string(r));
        return;
      }
      reduced[static_cast<size_t>(n)] = true;
    }
    // Strides of the reduced tensor, in the full index space (0 on reduced dims).
    std::vector<int64_t> stride(static_cast<size_t>(r), 0);
    int64_t kept = 1, count = 1;
    for (int d = r - 1; d >= 0; --d) {
      if (reduced[static_cast<size_t>(d)]) {
        count *= s.dim(d);
      } else {
        stride[static_cast<size_t>(d)] = kept;
        kept *= s.dim(d);
      }
    }
    if (g.num_elements() != kept) {
      ctx.fail("reduced gradient has " + std::to_string(g.num_elements()) + " elements, expected " + std::to_string(kept));
      return;
    }
    Tensor& out = ctx.allocate_output(0, g.dtype(), s);
    visit_dtype(g.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_floating_point_v<T>) {
        const T* pg = g.data<T>();
        T* po = out.data<T>();
        T scale = mean_ && count > 0 ? T(1) / static_cast<T>(count) : T(1);
        int64_t n = out.num_elements();
        int64_t inner = r > 0 ? s.dim(r - 1) : 1;
        int64_t rows = inner == 0 ? 0 : n / inner;
        int64_t inner_stride = r > 0 ? stride[static_cast<size_t>(r - 1)] : 0;
        for (int64_t row = 0; row < rows; ++row) {
          int64_t rem = row, base = 0;
          for (int d = r - 2; d >= 0; --d) {
            base += (rem % s.dim(d)) * stride[static_cast<size_t>(d)];
            rem /= s.dim(d);
          }
          T* dst = po + row * inner;
          for (int64_t i = 0; i < inner; ++i) dst[i] = pg[base + i * inner_stride] * scale;
        }
        if (r == 0 && n == 1) po[0] = pg[0] * scale;
      }
    });
  }

 private:
  std::vector<int64_t> axes_;
  bool mean_;
};

AF_REGISTER_KERNEL("BroadcastReduced", DeviceType::CPU, BroadcastReducedKernel);

}  // namespace
}  // namespace actorflow
