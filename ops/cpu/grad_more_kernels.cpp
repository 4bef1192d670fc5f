// CPU kernels of the gradient support ops in ops/defs/grad_more_ops.cpp. Each checks
// that the gradient and the `like` tensor agree at run time (a graph may have been
// built with unknown dims, or imported), and reports a mismatch rather than reading out
// of bounds.
#include <cstring>
#include <string>
#include <vector>

#include "actorflow/kernel.h"
#include "cpu/shape_copy.h"

namespace actorflow {
namespace {

using shape_copy::copy_block;
using shape_copy::strides_of;

// Calls f(T{}) for f32/f64; false for other dtypes (the gradient ops are float-only).
template <typename F>
bool visit_float(DType t, F&& f) {
  if (t == DType::f32) f(float{});
  else if (t == DType::f64) f(double{});
  else return false;
  return true;
}

void fail_dtype(OpKernelContext& ctx, DType t) {
  ctx.fail(std::string("gradient must be f32 or f64, got ") + dtype_name(t));
}

Tensor* zeros_output(OpKernelContext& ctx, DType t, const Shape& s) {
  Tensor& out = ctx.allocate_output(0, t, s);
  if (out.bytes()) std::memset(out.raw_data(), 0, out.bytes());
  return &out;
}

bool normalize(int64_t axis, int rank, int* out) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) return false;
  *out = static_cast<int>(a);
  return true;
}

std::string ints_to_string(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

int64_t span(const Shape& s, int begin, int end) {
  int64_t p = 1;
  for (int i = begin; i < end; ++i) p *= s.dim(i);
  return p;
}

class ReshapeLikeKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(OpKernelContext& ctx) override {
    auto r = ctx.input(0).reshaped(ctx.input(1).shape());
    if (!r.ok()) {
      ctx.fail(r.status());
      return;
    }
    ctx.set_output(0, *r);
  }
};

// Shared by PadLike and SliceLike: `small` sits at `begin` inside `big`.
bool check_box(OpKernelContext& ctx, const std::vector<int64_t>& begin, const Shape& small, const Shape& big) {
  bool ok = small.rank() == big.rank() && begin.size() == static_cast<size_t>(big.rank());
  for (int d = 0; ok && d < big.rank(); ++d) {
    const int64_t b = begin[static_cast<size_t>(d)];
    ok = b >= 0 && b <= big.dim(d) - small.dim(d);
  }
  if (!ok)
    ctx.fail("a block of shape " + small.to_string() + " at " + ints_to_string(begin) + " does not fit in shape " +
             big.to_string());
  return ok;
}

int64_t box_offset(const std::vector<int64_t>& begin, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (size_t d = 0; d < begin.size(); ++d) off += begin[d] * strides[d];
  return off;
}

class PadLikeKernel : public OpKernel {
 public:
  explicit PadLikeKernel(const Node& n) : OpKernel(n), begin_(n.attr_ints("begin")) {}
  void compute(OpKernelContext& ctx) override {
    const Tensor& g = ctx.input(0);
    const Shape& like = ctx.input(1).shape();
    if (!is_floating(g.dtype())) return fail_dtype(ctx, g.dtype());
    if (!check_box(ctx, begin_, g.shape(), like)) return;
    Tensor* out = zeros_output(ctx, g.dtype(), like);
    const auto out_st = strides_of(like.dims());
    visit_float(g.dtype(), [&](auto tag) {
      using T = decltype(tag);
      copy_block(g.data<T>(), strides_of(g.shape().dims()), out->data<T>() + box_offset(begin_, out_st), out_st,
                 g.shape().dims(), ctx.device());
    });
  }

 private:
  std::vector<int64_t> begin_;
};

class SliceLikeKernel : public OpKernel {
 public:
  explicit SliceLikeKernel(const Node& n) : OpKernel(n), begin_(n.attr_ints("begin")) {}
  void compute(OpKernelContext& ctx) override {
    const Tensor& g = ctx.input(0);
    const Shape& like = ctx.input(1).shape();
    if (!is_floating(g.dtype())) return fail_dtype(ctx, g.dtype());
    if (!check_box(ctx, begin_, like, g.shape())) return;
    Tensor& out = ctx.allocate_output(0, g.dtype(), like);
    const auto g_st = strides_of(g.shape().dims());
    visit_float(g.dtype(), [&](auto tag) {
      using T = decltype(tag);
      copy_block(g.data<T>() + box_offset(begin_, g_st), g_st, out.data<T>(), strides_of(like.dims()), like.dims(),
                 ctx.device());
    });
  }

 private:
  std::vector<int64_t> begin_;
};

class SplitLikeKernel : public OpKernel {
 public:
  explicit SplitLikeKernel(const Node& n) : OpKernel(n), axis_(n.attr_int("axis")) {}
  void compute(OpKernelContext& ctx) override {
    const Tensor& g = ctx.input(0);
    if (!is_floating(g.dtype())) return fail_dtype(ctx, g.dtype());
    const int r = g.rank();
    int axis = 0;
    if (!normalize(axis_, r, &axis)) {
      ctx.fail("axis " + std::to_string(axis_) + " is out of range for gradient of shape " + g.shape().to_string());
      return;
    }
    if (ctx.num_outputs() != ctx.num_inputs() - 1) {
      ctx.fail("internal: " + std::to_string(ctx.num_outputs()) + " outputs for " + std::to_string(ctx.num_inputs() - 1) +
               " parts");
      return;
    }
    int64_t total = 0;
    for (int i = 1; i < ctx.num_inputs(); ++i) {
      const Shape& s = ctx.input(i).shape();
      bool same = s.rank() == r;
      for (int d = 0; same && d < r; ++d) same = d == axis || s.dim(d) == g.dim(d);
      if (!same) {
        ctx.fail("part " + std::to_string(i - 1) + " of shape " + s.to_string() + " does not match gradient of shape " +
                 g.shape().to_string() + " outside axis " + std::to_string(axis));
        return;
      }
      total += s.dim(axis);
    }
    if (total != g.dim(axis)) {
      ctx.fail("parts add up to " + std::to_string(total) + " along axis " + std::to_string(axis) +
               " but the gradient has " + std::to_string(g.dim(axis)));
      return;
    }
    const auto g_st = strides_of(g.shape().dims());
    visit_float(g.dtype(), [&](auto tag) {
      using T = decltype(tag);
      int64_t offset = 0;
      for (int i = 1; i < ctx.num_inputs(); ++i) {
        const Shape& s = ctx.input(i).shape();
        Tensor& out = ctx.allocate_output(i - 1, g.dtype(), s);
        copy_block(g.data<T>() + offset * (r > 0 ? g_st[static_cast<size_t>(axis)] : 0), g_st, out.data<T>(),
                   strides_of(s.dims()), s.dims(), ctx.device());
        offset += s.dim(axis);
      }
    });
  }

 private:
  int64_t axis_;
};

class TileGradKernel : public OpKernel {
 public:
  explicit TileGradKernel(const Node& n) : OpKernel(n), mult_(n.attr_ints("multiples")) {}
  void compute(OpKernelContext& ctx) override {
    const Tensor& g = ctx.input(0);
    const Shape& like = ctx.input(1).shape();
    if (!is_floating(g.dtype())) return fail_dtype(ctx, g.dtype());
    const int r = like.rank();
    bool ok = g.rank() == r && mult_.size() == static_cast<size_t>(r);
    for (int d = 0; ok && d < r; ++d) {
      const int64_t m = mult_[static_cast<size_t>(d)];
      // Divides rather than multiplies: a hostile multiple must not overflow.
      ok = m >= 0 && (m == 0 ? g.dim(d) == 0 : g.dim(d) % m == 0 && g.dim(d) / m == like.dim(d));
    }
    if (!ok) {
      ctx.fail("gradient of shape " + g.shape().to_string() + " is not shape " + like.to_string() + " tiled by " +
               ints_to_string(mult_));
      return;
    }
    Tensor* out = zeros_output(ctx, g.dtype(), like);
    if (g.num_elements() == 0) return;
    if (r == 0) {
      visit_float(g.dtype(), [&](auto tag) { out->data<decltype(tag)>()[0] = g.data<decltype(tag)>()[0]; });
      return;
    }
    const auto in_st = strides_of(like.dims());
    const int64_t row = g.dim(r - 1), in_row = like.dim(r - 1);
    const int64_t rows = g.num_elements() / row;
    // Serial: tiles of different rows add into the same input element.
    visit_float(g.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* pg = g.data<T>();
      T* po = out->data<T>();
      for (int64_t i = 0; i < rows; ++i) {
        int64_t rem = i, off = 0;
        for (int d = r - 2; d >= 0; --d) {
          off += (rem % g.dim(d)) % like.dim(d) * in_st[static_cast<size_t>(d)];
          rem /= g.dim(d);
        }
        const T* src = pg + i * row;
        T* dst = po + off;
        for (int64_t j = 0; j < row; ++j) dst[j % in_row] += src[j];
      }
    });
  }

 private:
  std::vector<int64_t> mult_;
};

// Reads index k of an i32/i64 tensor.
int64_t index_at(const Tensor& t, int64_t k) {
  return t.dtype() == DType::i32 ? t.data<int32_t>()[k] : t.data<int64_t>()[k];
}

class GatherGradKernel : public OpKernel {
 public:
  explicit GatherGradKernel(const Node& n) : OpKernel(n), axis_(n.attr_int("axis")) {}
  void compute(OpKernelContext& ctx) override {
    const Tensor& g = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    const Shape& like = ctx.input(2).shape();
    if (!is_floating(g.dtype())) return fail_dtype(ctx, g.dtype());
    if (indices.dtype() != DType::i32 && indices.dtype() != DType::i64) {
      ctx.fail(std::string("indices must be i32 or i64, got ") + dtype_name(indices.dtype()));
      return;
    }
    int axis = 0;
    if (!normalize(axis_, like.rank(), &axis)) {
      ctx.fail("axis " + std::to_string(axis_) + " is out of range for params of shape " + like.to_string());
      return;
    }
    const int64_t outer = span(like, 0, axis), limit = like.dim(axis), inner = span(like, axis + 1, like.rank());
    const int64_t m = indices.num_elements();
    int64_t want = 0;
    if (__builtin_mul_overflow(outer, m, &want) || __builtin_mul_overflow(want, inner, &want) ||
        g.num_elements() != want) {
      ctx.fail("gradient of shape " + g.shape().to_string() + " does not match " + std::to_string(m) +
               " indices into params of shape " + like.to_string());
      return;
    }
    for (int64_t k = 0; k < m; ++k) {
      const int64_t i = index_at(indices, k);
      if (i < 0 || i >= limit) {
        ctx.fail(out_of_range("index " + std::to_string(i) + " is not in [0, " + std::to_string(limit) + ")"));
        return;
      }
    }
    Tensor* out = zeros_output(ctx, g.dtype(), like);
    visit_float(g.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* pg = g.data<T>();
      T* po = out->data<T>();
      // Parallel over `outer` only: repeated indices add into the same rows.
      ctx.device()->parallel_for(outer, m * inner + 10, [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o)
          for (int64_t k = 0; k < m; ++k) {
            const T* src = pg + (o * m + k) * inner;
            T* dst = po + (o * limit + index_at(indices, k)) * inner;
            for (int64_t j = 0; j < inner; ++j) dst[j] += src[j];
          }
      });
    });
  }

 private:
  int64_t axis_;
};

class GatherGradValuesKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(OpKernelContext& ctx) override {
    const Tensor& g = ctx.input(0);
    const Shape& idx = ctx.input(1).shape();
    bool ok = g.rank() >= idx.rank();
    for (int d = 0; ok && d < idx.rank(); ++d) ok = g.dim(d) == idx.dim(d);
    if (!ok) {
      ctx.fail("gradient of shape " + g.shape().to_string() + " does not start with the indices' shape " + idx.to_string());
      return;
    }
    std::vector<int64_t> dims{idx.num_elements()};
    dims.insert(dims.end(), g.shape().dims().begin() + idx.rank(), g.shape().dims().end());
    auto r = g.reshaped(Shape(std::move(dims)));
    if (!r.ok()) return ctx.fail(r.status());
    ctx.set_output(0, *r);
  }
};

class ProdOfOthersKernel : public OpKernel {
 public:
  explicit ProdOfOthersKernel(const Node& n) : OpKernel(n), axes_(n.attr_ints("axes")) {}
  void compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (!is_floating(x.dtype())) return fail_dtype(ctx, x.dtype());
    const Shape& s = x.shape();
    const int r = s.rank();
    std::vector<bool> reduced(static_cast<size_t>(r), axes_.empty());
    for (int64_t a : axes_) {
      int n = 0;
      if (!normalize(a, r, &n)) {
        ctx.fail("axis " + std::to_string(a) + " is out of range for shape " + s.to_string());
        return;
      }
      reduced[static_cast<size_t>(n)] = true;
    }
    // Each element's group is its index in the reduced tensor (strides 0 on reduced dims).
    std::vector<int64_t> stride(static_cast<size_t>(r), 0);
    int64_t groups = 1;
    for (int d = r - 1; d >= 0; --d)
      if (!reduced[static_cast<size_t>(d)]) {
        stride[static_cast<size_t>(d)] = groups;
        groups *= s.dim(d);
      }
    const int64_t n = x.num_elements();
    std::vector<int64_t> group(static_cast<size_t>(n));
    for (int64_t e = 0; e < n; ++e) {
      int64_t rem = e, gi = 0;
      for (int d = r - 1; d >= 0; --d) {
        gi += (rem % s.dim(d)) * stride[static_cast<size_t>(d)];
        rem /= s.dim(d);
      }
      group[static_cast<size_t>(e)] = gi;
    }
    Tensor& out = ctx.allocate_output(0, x.dtype(), s);
    visit_float(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* px = x.data<T>();
      T* po = out.data<T>();
      // Prefix products in a forward sweep, times suffix products in a backward sweep.
      std::vector<T> running(static_cast<size_t>(groups), T(1));
      for (int64_t e = 0; e < n; ++e) {
        T& acc = running[static_cast<size_t>(group[static_cast<size_t>(e)])];
        po[e] = acc;
        acc *= px[e];
      }
      std::fill(running.begin(), running.end(), T(1));
      for (int64_t e = n - 1; e >= 0; --e) {
        T& acc = running[static_cast<size_t>(group[static_cast<size_t>(e)])];
        po[e] *= acc;
        acc *= px[e];
      }
    });
  }

 private:
  std::vector<int64_t> axes_;
};

AF_REGISTER_KERNEL("ReshapeLike", DeviceType::CPU, ReshapeLikeKernel);
AF_REGISTER_KERNEL("PadLike", DeviceType::CPU, PadLikeKernel);
AF_REGISTER_KERNEL("SliceLike", DeviceType::CPU, SliceLikeKernel);
AF_REGISTER_KERNEL("SplitLike", DeviceType::CPU, SplitLikeKernel);
AF_REGISTER_KERNEL("TileGrad", DeviceType::CPU, TileGradKernel);
AF_REGISTER_KERNEL("GatherGrad", DeviceType::CPU, GatherGradKernel);
AF_REGISTER_KERNEL("GatherGradValues", DeviceType::CPU, GatherGradValuesKernel);
AF_REGISTER_KERNEL("ProdOfOthers", DeviceType::CPU, ProdOfOthersKernel);

}  // namespace
}  // namespace actorflow
