// CPU kernels of MaxPool, AvgPool and their gradients (NHWC, f32 and f64). Plain loops:
// the inner loop always runs over the channels, which are contiguous.
//
// MaxPool routes a gradient to the first maximum of each window in row-major scan order
// (as TF's CPU kernel); AvgPool divides by the number of window elements inside the
// input, so SAME padding never counts the padding (as TF).
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "actorflow/kernel.h"
#include "common/conv_geometry.h"

namespace actorflow {
namespace {

struct PoolShape {
  int64_t n = 0, h = 0, w = 0, c = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1;
  int64_t oh = 0, ow = 0, pad_t = 0, pad_l = 0;
  Shape out_shape() const { return Shape{n, oh, ow, c}; }
  // The windows tile the input exactly: no padding, no overlap, no gap (2x2 windows of
  // stride 2 over an even input, the CNNs' pooling). Each input element then belongs to
  // exactly one window, which the tiled loops below use.
  bool tiled() const {
    return pad_t == 0 && pad_l == 0 && kh == sh && kw == sw && oh * sh == h && ow * sw == w;
  }
  // The window of output (y, x), clipped to the input: rows [*h0, *h1), cols [*w0, *w1).
  void window(int64_t y, int64_t x, int64_t* h0, int64_t* h1, int64_t* w0, int64_t* w1) const {
    const int64_t hs = y * sh - pad_t, ws = x * sw - pad_l;
    *h0 = std::max<int64_t>(hs, 0);
    *h1 = std::min(hs + kh, h);
    *w0 = std::max<int64_t>(ws, 0);
    *w1 = std::min(ws + kw, w);
  }
};

class PoolBase : public OpKernel {
 public:
  explicit PoolBase(const Node& n) : OpKernel(n) {
    if (conv_geom::parse_hw(n, "ksize", &kh_, &kw_, &attr_error_) &&
        conv_geom::parse_hw(n, "strides", &sh_, &sw_, &attr_error_))
      conv_geom::parse_padding(n, &padding_, &attr_error_);
  }

 protected:
  bool geometry(OpKernelContext& ctx, const Tensor& x, PoolShape* s) const {
    if (!attr_error_.empty()) {
      ctx.fail(attr_error_);
      return false;
    }
    if (x.dtype() != DType::f32 && x.dtype() != DType::f64) {
      ctx.fail(std::string("needs a float32 or float64 input, got ") + dtype_name(x.dtype()));
      return false;
    }
    if (x.rank() != 4) {
      ctx.fail("input " + x.shape().to_string() + " must have rank 4 (NHWC)");
      return false;
    }
    conv_geom::Axis ah, aw;
    std::string err;
    if (!conv_geom::window(x.dim(1), kh_, sh_, padding_, &ah, &err) ||
        !conv_geom::window(x.dim(2), kw_, sw_, padding_, &aw, &err)) {
      ctx.fail("input " + x.shape().to_string() + ": " + err);
      return false;
    }
    *s = PoolShape{x.dim(0), x.dim(1), x.dim(2), x.dim(3), kh_, kw_, sh_, sw_, ah.out, aw.out, ah.pad_before, aw.pad_before};
    return true;
  }

  // Input i must be shaped `shape` with x's dtype.
  static bool check_like(OpKernelContext& ctx, int i, const char* what, DType t, const Shape& shape) {
    const Tensor& v = ctx.input(i);
    if (v.dtype() != t || v.shape() != shape) {
      ctx.fail(std::string(what) + " " + dtype_name(v.dtype()) + v.shape().to_string() + " must be " + dtype_name(t) +
               shape.to_string());
      return false;
    }
    return true;
  }

  // The max-pool gradients keep a window element's place as a 32-bit offset from the
  // window's first element, which spans at most a window's height of input rows.
  static bool window_indexable(OpKernelContext& ctx, const PoolShape& s) {
    const double span = static_cast<double>(std::min(s.kh, s.h)) * static_cast<double>(s.w) * static_cast<double>(s.c);
    if (span <= static_cast<double>(std::numeric_limits<int32_t>::max())) return true;
    ctx.fail("a pooling window " + std::to_string(std::min(s.kh, s.h)) + " rows tall over input rows of " +
             std::to_string(s.w) + "x" + std::to_string(s.c) +
             " elements spans more than 2^31 - 1 elements, too many for the max-pool gradient");
    return false;
  }

  int64_t kh_ = 1, kw_ = 1, sh_ = 1, sw_ = 1;
  conv_geom::Padding padding_ = conv_geom::Padding::valid;
  std::string attr_error_;
};

// Per-unit cost (ns) of one output row of a pooling loop. Windows are clipped to the
// input, and the product is taken in double: ksize may be huge.
int64_t row_cost(const PoolShape& s) {
  const double c = static_cast<double>(s.ow) * static_cast<double>(std::min(s.kh, s.h)) *
                   static_cast<double>(std::min(s.kw, s.w)) * static_cast<double>(s.c) / 4 + 10;
  return static_cast<int64_t>(std::min(c, 1e12));
}

// Tiled windows: pointer steps instead of a clipped window per output (the window
// arithmetic cost more than the compares at 2x2).
template <typename T>
void max_pool_tiled(OpKernelContext& ctx, const PoolShape& s, const T* x, T* y) {
  ctx.device()->parallel_for(s.n * s.oh, row_cost(s), [&](int64_t r0, int64_t r1) {
    const int64_t row = s.w * s.c;
    for (int64_t r = r0; r < r1; ++r) {
      const T* in = x + (r * s.kh) * row;  // rows n * h + oy * kh, as r = n * oh + oy
      T* o = y + r * s.ow * s.c;
      for (int64_t ox = 0; ox < s.ow; ++ox, o += s.c) {
        const T* win = in + ox * s.kw * s.c;
        for (int64_t c = 0; c < s.c; ++c) o[c] = -std::numeric_limits<T>::infinity();
        for (int64_t i = 0; i < s.kh; ++i)
          for (int64_t j = 0; j < s.kw; ++j) {
            const T* v = win + i * row + j * s.c;
            for (int64_t c = 0; c < s.c; ++c) o[c] = v[c] > o[c] ? v[c] : o[c];
          }
      }
    }
  });
}

template <typename T>
void max_pool(OpKernelContext& ctx, const PoolShape& s, const T* x, T* y) {
  if (s.tiled()) return max_pool_tiled(ctx, s, x, y);
  ctx.device()->parallel_for(s.n * s.oh, row_cost(s), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / s.oh, oy = r % s.oh;
      for (int64_t ox = 0; ox < s.ow; ++ox) {
        T* o = y + (r * s.ow + ox) * s.c;
        std::fill(o, o + s.c, -std::numeric_limits<T>::infinity());
        int64_t h0, h1, w0, w1;
        s.window(oy, ox, &h0, &h1, &w0, &w1);
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) {
            const T* v = x + ((n * s.h + ih) * s.w + iw) * s.c;
            for (int64_t c = 0; c < s.c; ++c) o[c] = v[c] > o[c] ? v[c] : o[c];
          }
      }
    }
  });
}

// For output (n, oy, ox): the flat input offset of each channel's first maximum (-1 for
// a window wholly in the padding). The window's first element seeds every channel and a
// later one replaces it only when strictly greater, which keeps the first maximum and a
// NaN where it is first seen. Positions are kept as 32-bit offsets from the window's
// first element beside the floats, so the channel loop compiles to compares and blends
// (with a branch per channel and 64-bit positions, MaxPoolGrad took ~5% of a CNN step).
template <typename T>
void argmax_window(const PoolShape& s, const T* x, int64_t n, int64_t oy, int64_t ox, T* best, int32_t* pos,
                   int64_t* at) {
  int64_t h0, h1, w0, w1;
  s.window(oy, ox, &h0, &h1, &w0, &w1);
  if (h0 >= h1 || w0 >= w1) {
    std::fill(at, at + s.c, int64_t{-1});
    return;
  }
  const int64_t origin = ((n * s.h + h0) * s.w + w0) * s.c;
  std::copy(x + origin, x + origin + s.c, best);
  std::fill(pos, pos + s.c, int32_t{0});
  for (int64_t ih = h0; ih < h1; ++ih)
    for (int64_t iw = w0; iw < w1; ++iw) {
      const int64_t base = ((n * s.h + ih) * s.w + iw) * s.c;
      const T* v = x + base;
      const int32_t k = static_cast<int32_t>(base - origin);
      for (int64_t c = 0; c < s.c; ++c) {
        const bool gt = v[c] > best[c];
        best[c] = gt ? v[c] : best[c];
        pos[c] = gt ? k : pos[c];
      }
    }
  for (int64_t c = 0; c < s.c; ++c) at[c] = origin + pos[c] + c;
}

// Tiled windows: every input element is written once, its window's gradient where it is
// the window's first maximum and 0 elsewhere: contiguous stores instead of a zero fill
// and a scatter. With `Relu` the gradient is written only where that maximum is > 0
// (where(x > 0, ., 0) of the result, _FusedMaxPoolGrad), 0 elsewhere.
template <typename T, bool Relu>
void max_pool_grad_tiled(OpKernelContext& ctx, const PoolShape& s, const T* x, const T* dy, T* dx) {
  ctx.device()->parallel_for(s.n * s.oh, row_cost(s), [&](int64_t r0, int64_t r1) {
    const int64_t row = s.w * s.c;
    std::vector<T> best(static_cast<size_t>(s.c));
    std::vector<int32_t> pos(static_cast<size_t>(s.c));
    T* b = best.data();
    int32_t* p = pos.data();
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t first = r * s.kh * row;
      const T* g = dy + r * s.ow * s.c;
      for (int64_t ox = 0; ox < s.ow; ++ox, g += s.c) {
        const int64_t origin = first + ox * s.kw * s.c;
        const T* win = x + origin;
        T* d = dx + origin;
        for (int64_t c = 0; c < s.c; ++c) {
          b[c] = win[c];
          p[c] = 0;
        }
        int32_t k = 0;
        for (int64_t i = 0; i < s.kh; ++i)
          for (int64_t j = 0; j < s.kw; ++j, ++k) {
            if (k == 0) continue;
            const T* v = win + i * row + j * s.c;
            for (int64_t c = 0; c < s.c; ++c) {
              const bool gt = v[c] > b[c];
              b[c] = gt ? v[c] : b[c];
              p[c] = gt ? k : p[c];
            }
          }
        k = 0;
        for (int64_t i = 0; i < s.kh; ++i)
          for (int64_t j = 0; j < s.kw; ++j, ++k) {
            T* o = d + i * row + j * s.c;
            for (int64_t c = 0; c < s.c; ++c) {
              const T gc = g[c];  // loaded unconditionally: the select vectorizes
              if constexpr (Relu) o[c] = p[c] == k && b[c] > T(0) ? gc : T(0);
              else o[c] = p[c] == k ? gc : T(0);
            }
          }
      }
    }
  });
}

// dx: each window's gradient added at its first maximum (with `Relu` only where that
// maximum is > 0: every window adding at a place has that place's value as its maximum,
// so this is where(x > 0, dx, 0)). Sharded by image, since windows of one image overlap.
template <typename T, bool Relu = false>
void max_pool_grad(OpKernelContext& ctx, const PoolShape& s, const T* x, const T* dy, T* dx) {
  if (s.tiled()) return max_pool_grad_tiled<T, Relu>(ctx, s, x, dy, dx);
  const int64_t image = s.h * s.w * s.c;
  ctx.device()->parallel_for(s.n, row_cost(s) * s.oh, [&](int64_t n0, int64_t n1) {
    std::vector<T> best(static_cast<size_t>(s.c));
    std::vector<int32_t> pos(static_cast<size_t>(s.c));
    std::vector<int64_t> at(static_cast<size_t>(s.c));
    std::fill(dx + n0 * image, dx + n1 * image, T(0));
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t oy = 0; oy < s.oh; ++oy)
        for (int64_t ox = 0; ox < s.ow; ++ox) {
          argmax_window(s, x, n, oy, ox, best.data(), pos.data(), at.data());
          const T* g = dy + ((n * s.oh + oy) * s.ow + ox) * s.c;
          for (int64_t c = 0; c < s.c; ++c)
            if (at[static_cast<size_t>(c)] >= 0 && (!Relu || best[static_cast<size_t>(c)] > T(0)))
              dx[at[static_cast<size_t>(c)]] += g[c];
        }
  });
}

// The gradient of MaxPoolGrad with respect to its incoming gradient: gg read back at
// each window's first maximum.
template <typename T>
void max_pool_grad_grad(OpKernelContext& ctx, const PoolShape& s, const T* x, const T* gg, T* out) {
  ctx.device()->parallel_for(s.n * s.oh, row_cost(s), [&](int64_t r0, int64_t r1) {
    std::vector<T> best(static_cast<size_t>(s.c));
    std::vector<int32_t> pos(static_cast<size_t>(s.c));
    std::vector<int64_t> at(static_cast<size_t>(s.c));
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t ox = 0; ox < s.ow; ++ox) {
        argmax_window(s, x, r / s.oh, r % s.oh, ox, best.data(), pos.data(), at.data());
        T* o = out + (r * s.ow + ox) * s.c;
        for (int64_t c = 0; c < s.c; ++c) o[c] = at[static_cast<size_t>(c)] >= 0 ? gg[at[static_cast<size_t>(c)]] : T(0);
      }
  });
}

template <typename T>
void avg_pool(OpKernelContext& ctx, const PoolShape& s, const T* x, T* y) {
  ctx.device()->parallel_for(s.n * s.oh, row_cost(s), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / s.oh, oy = r % s.oh;
      for (int64_t ox = 0; ox < s.ow; ++ox) {
        T* o = y + (r * s.ow + ox) * s.c;
        std::fill(o, o + s.c, T(0));
        int64_t h0, h1, w0, w1;
        s.window(oy, ox, &h0, &h1, &w0, &w1);
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) {
            const T* v = x + ((n * s.h + ih) * s.w + iw) * s.c;
            for (int64_t c = 0; c < s.c; ++c) o[c] += v[c];
          }
        const int64_t count = (h1 - h0) * (w1 - w0);
        const T inv = count > 0 ? T(1) / static_cast<T>(count) : T(0);
        for (int64_t c = 0; c < s.c; ++c) o[c] *= inv;
      }
    }
  });
}

template <typename T>
void avg_pool_grad(OpKernelContext& ctx, const PoolShape& s, const T* dy, T* dx) {
  const int64_t image = s.h * s.w * s.c;
  ctx.device()->parallel_for(s.n, row_cost(s) * s.oh, [&](int64_t n0, int64_t n1) {
    std::fill(dx + n0 * image, dx + n1 * image, T(0));
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t oy = 0; oy < s.oh; ++oy)
        for (int64_t ox = 0; ox < s.ow; ++ox) {
          int64_t h0, h1, w0, w1;
          s.window(oy, ox, &h0, &h1, &w0, &w1);
          const int64_t count = (h1 - h0) * (w1 - w0);
          if (count <= 0) continue;
          const T inv = T(1) / static_cast<T>(count);
          const T* g = dy + ((n * s.oh + oy) * s.ow + ox) * s.c;
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw) {
              T* d = dx + ((n * s.h + ih) * s.w + iw) * s.c;
              for (int64_t c = 0; c < s.c; ++c) d[c] += g[c] * inv;
            }
        }
  });
}

template <typename F>
void dispatch(DType t, F&& f) {
  if (t == DType::f32) f(float{});
  else f(double{});
}

class MaxPoolKernel : public PoolBase {
 public:
  using PoolBase::PoolBase;
  void compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    PoolShape s;
    if (!geometry(ctx, x, &s)) return;
    Tensor& y = ctx.allocate_output(0, x.dtype(), s.out_shape());
    if (y.num_elements() == 0) return;
    dispatch(x.dtype(), [&](auto t) {
      using T = decltype(t);
      max_pool<T>(ctx, s, x.data<T>(), y.data<T>());
    });
  }
};

class AvgPoolKernel : public PoolBase {
 public:
  using PoolBase::PoolBase;
  void compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    PoolShape s;
    if (!geometry(ctx, x, &s)) return;
    Tensor& y = ctx.allocate_output(0, x.dtype(), s.out_shape());
    if (y.num_elements() == 0) return;
    dispatch(x.dtype(), [&](auto t) {
      using T = decltype(t);
      avg_pool<T>(ctx, s, x.data<T>(), y.data<T>());
    });
  }
};

// MaxPoolGrad(orig_input, orig_output, grad) -> d orig_input; with `Relu`
// (_FusedMaxPoolGrad) where(orig_input > 0, that, 0).
template <bool Relu>
class MaxPoolGradKernel : public PoolBase {
 public:
  using PoolBase::PoolBase;
  void compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    PoolShape s;
    if (!geometry(ctx, x, &s) || !check_like(ctx, 1, "orig_output", x.dtype(), s.out_shape()) ||
        !check_like(ctx, 2, "grad", x.dtype(), s.out_shape()) || !window_indexable(ctx, s))
      return;
    Tensor& dx = ctx.allocate_output(0, x.dtype(), x.shape());
    if (dx.num_elements() == 0) return;
    dispatch(x.dtype(), [&](auto t) {
      using T = decltype(t);
      max_pool_grad<T, Relu>(ctx, s, x.data<T>(), ctx.input(2).data<T>(), dx.data<T>());
    });
  }
};

// MaxPoolGradGrad(orig_input, orig_output, grad shaped like orig_input) -> pooled shape.
class MaxPoolGradGradKernel : public PoolBase {
 public:
  using PoolBase::PoolBase;
  void compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    PoolShape s;
    if (!geometry(ctx, x, &s) || !check_like(ctx, 1, "orig_output", x.dtype(), s.out_shape()) ||
        !check_like(ctx, 2, "grad", x.dtype(), x.shape()) || !window_indexable(ctx, s))
      return;
    Tensor& out = ctx.allocate_output(0, x.dtype(), s.out_shape());
    if (out.num_elements() == 0) return;
    dispatch(x.dtype(), [&](auto t) {
      using T = decltype(t);
      max_pool_grad_grad<T>(ctx, s, x.data<T>(), ctx.input(2).data<T>(), out.data<T>());
    });
  }
};

// AvgPoolGrad(orig_input, grad): orig_input lends only its shape.
class AvgPoolGradKernel : public PoolBase {
 public:
  using PoolBase::PoolBase;
  void compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    PoolShape s;
    if (!geometry(ctx, x, &s) || !check_like(ctx, 1, "grad", x.dtype(), s.out_shape())) return;
    Tensor& dx = ctx.allocate_output(0, x.dtype(), x.shape());
    if (dx.num_elements() == 0) return;
    dispatch(x.dtype(), [&](auto t) {
      using T = decltype(t);
      avg_pool_grad<T>(ctx, s, ctx.input(1).data<T>(), dx.data<T>());
    });
  }
};

AF_REGISTER_KERNEL("MaxPool", DeviceType::CPU, MaxPoolKernel);
AF_REGISTER_KERNEL("AvgPool", DeviceType::CPU, AvgPoolKernel);
AF_REGISTER_KERNEL("MaxPoolGrad", DeviceType::CPU, MaxPoolGradKernel<false>);
AF_REGISTER_KERNEL("_FusedMaxPoolGrad", DeviceType::CPU, MaxPoolGradKernel<true>);
AF_REGISTER_KERNEL("MaxPoolGradGrad", DeviceType::CPU, MaxPoolGradGradKernel);
AF_REGISTER_KERNEL("AvgPoolGrad", DeviceType::CPU, AvgPoolGradKernel);

}  // namespace
}  // namespace actorflow
