// CPU kernels of Conv2D, _FusedConv2D (Conv2D + BiasAdd (+ Relu)), Conv2DBackpropInput
// and Conv2DBackpropFilter (NHWC input, [KH,KW,C,O] filter, f32 and f64).
//
// All three are im2col + GEMM: a block of output positions becomes a [rows, KH*KW*C]
// patch matrix (the "col"), and the convolution is that matrix times the [KH*KW*C, O]
// filter. The output positions are cut into chunks of about 1 MiB of col each, so the col
// stays in cache between being written and being packed by the GEMM, and the chunks are
// sharded over the device pool, each shard running Eigen's single-threaded GEBP product
// on its own chunks. 1x1 stride-1 convolutions skip the col: the input rows are the col.
//
// BackpropFilter sums over every output position, so each shard accumulates a private
// [K, O] partial over a fixed range of chunks and the partials are added in a fixed
// order: the result depends on the thread count but not on scheduling. BackpropInput
// scatters col rows back into the image (col2im), so its chunks are whole images, which
// never overlap.
//
// The kernels deal with empty tensors first, so the helpers only see non-empty input,
// filter and output: every product of dims is then bounded by an allocation.
//
// The f32 kernels run on oneDNN when it is built in (cpu/onednn_conv.h), images sharded
// over the pool in bands (a stride-1 input gradient as the forward convolution of the
// turned filter, which oneDNN runs faster); the im2col path stays for f64 and for shapes
// oneDNN refuses.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>

// GCC 12 reports a false -Wmaybe-uninitialized inside Eigen's AVX-512 packet code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "common/conv_geometry.h"
#include "cpu/bias_relu.h"
#include "cpu/compute_type.h"
#include "cpu/eigen_device.h"
#include "cpu/onednn_conv.h"

namespace actorflow {
namespace {

template <typename T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using MatMap = Eigen::Map<RowMat<T>>;
template <typename T>
using ConstMatMap = Eigen::Map<const RowMat<T>>;

// Bytes of col per chunk: the col plus a GEMM panel fit in a typical L2.
constexpr int64_t kColBytes = int64_t{1} << 20;

struct ConvShape {
  int64_t n = 0, h = 0, w = 0, c = 0;  // input
  int64_t kh = 0, kw = 0, o = 0;       // filter
  int64_t oh = 0, ow = 0;              // output
  int64_t sh = 1, sw = 1, pad_t = 0, pad_l = 0;
  int64_t rows() const { return n * oh * ow; }
  int64_t kdim() const { return kh * kw * c; }
  // The input rows are the col: no patches to gather.
  bool direct() const { return kh == 1 && kw == 1 && sh == 1 && sw == 1 && pad_t == 0 && pad_l == 0; }
  Shape out_shape() const { return Shape{n, oh, ow, o}; }
};

class ConvBase : public OpKernel {
 public:
  explicit ConvBase(const Node& n) : OpKernel(n) {
    if (conv_geom::parse_hw(n, "strides", &sh_, &sw_, &attr_error_)) conv_geom::parse_padding(n, &padding_, &attr_error_);
    if (attr_error_.empty()) bf16_ = cpu::bf16_compute(n, &attr_error_);
  }

 protected:
  // Validates x and filter and computes the geometry; fails ctx and returns false if bad.
  bool geometry(OpKernelContext& ctx, const Tensor& x, const Tensor& f, ConvShape* s) const {
    if (!attr_error_.empty()) {
      ctx.fail(attr_error_);
      return false;
    }
    if (x.dtype() != f.dtype() || (x.dtype() != DType::f32 && x.dtype() != DType::f64)) {
      ctx.fail(std::string("needs float32 or float64 input and filter of one dtype, got ") + dtype_name(x.dtype()) +
               " and " + dtype_name(f.dtype()));
      return false;
    }
    conv_geom::Axis ah, aw;
    std::string err;
    if (!conv_geom::conv_operands(x.shape(), f.shape(), sh_, sw_, padding_, &ah, &aw, &err)) {
      ctx.fail(err);
      return false;
    }
    *s = ConvShape{x.dim(0), x.dim(1), x.dim(2), x.dim(3), f.dim(0), f.dim(1), f.dim(3),
                   ah.out, aw.out, sh_, sw_, ah.pad_before, aw.pad_before};
    return true;
  }

  bool check_out_backprop(OpKernelContext& ctx, const ConvShape& s, const Tensor& dy, DType t) const {
    if (dy.dtype() != t || dy.shape() != s.out_shape()) {
      ctx.fail("out_backprop " + std::string(dtype_name(dy.dtype())) + dy.shape().to_string() +
               " does not match the convolution's output " + dtype_name(t) + s.out_shape().to_string());
      return false;
    }
    return true;
  }

  static void zero(Tensor& t) { std::memset(t.raw_data(), 0, t.bytes()); }

  int64_t sh_ = 1, sw_ = 1;
  conv_geom::Padding padding_ = conv_geom::Padding::valid;
  std::string attr_error_;
  bool bf16_ = false;  // compute_type bfloat16: oneDNN's bfloat16 operands where native
};

// Rows per chunk: about kColBytes of col, at least one row, and few enough that every
// pool thread gets a chunk.
int64_t chunk_rows(const OpKernelContext& ctx, int64_t rows, int64_t kdim, size_t elem) {
  const int64_t threads = std::max(1, ctx.device()->num_threads());
  int64_t r = std::max<int64_t>(16, kColBytes / std::max<int64_t>(1, kdim * static_cast<int64_t>(elem)));
  r = std::min(r, (rows + threads - 1) / threads);
  return std::max<int64_t>(1, r);
}

// A GEMM's cost in ns for the pool's sharding: ~16 multiply-adds per ns on one core.
// In double: only the order of magnitude matters, and it must not overflow.
int64_t gemm_cost(int64_t m, int64_t k, int64_t n) {
  const double c = static_cast<double>(m) * static_cast<double>(k) * (static_cast<double>(n) / 16 + 1) + 100;
  return static_cast<int64_t>(std::min(c, 1e15));
}

// Writes the patch rows [r0, r1) of x into col ([r1 - r0, KH*KW*C], row-major, zeros
// where the window hangs over the padding). For a fixed kernel row the valid kernel
// columns read one contiguous run of the input row, so each is one memcpy.
template <typename T>
void im2col(const ConvShape& s, const T* x, int64_t r0, int64_t r1, T* col) {
  const int64_t K = s.kdim(), ohw = s.oh * s.ow, run = s.kw * s.c;
  for (int64_t r = r0; r < r1; ++r) {
    T* dst = col + (r - r0) * K;
    const int64_t n = r / ohw, oh = (r % ohw) / s.ow, ow = r % s.ow;
    const int64_t ih0 = oh * s.sh - s.pad_t, iw0 = ow * s.sw - s.pad_l;
    const int64_t kw_lo = std::max<int64_t>(0, -iw0), kw_hi = std::min<int64_t>(s.kw, s.w - iw0);
    for (int64_t kh = 0; kh < s.kh; ++kh) {
      T* d = dst + kh * run;
      const int64_t ih = ih0 + kh;
      if (ih < 0 || ih >= s.h || kw_lo >= kw_hi) {
        std::fill(d, d + run, T(0));
        continue;
      }
      std::fill(d, d + kw_lo * s.c, T(0));
      std::memcpy(d + kw_lo * s.c, x + ((n * s.h + ih) * s.w + iw0 + kw_lo) * s.c,
                  static_cast<size_t>((kw_hi - kw_lo) * s.c) * sizeof(T));
      std::fill(d + kw_hi * s.c, d + run, T(0));
    }
  }
}

// Adds the patch rows [r0, r1) of col back into dx (the transpose of im2col).
template <typename T>
void col2im(const ConvShape& s, const T* col, int64_t r0, int64_t r1, T* dx) {
  const int64_t K = s.kdim(), ohw = s.oh * s.ow, run = s.kw * s.c;
  for (int64_t r = r0; r < r1; ++r) {
    const T* src = col + (r - r0) * K;
    const int64_t n = r / ohw, oh = (r % ohw) / s.ow, ow = r % s.ow;
    const int64_t ih0 = oh * s.sh - s.pad_t, iw0 = ow * s.sw - s.pad_l;
    const int64_t kw_lo = std::max<int64_t>(0, -iw0), kw_hi = std::min<int64_t>(s.kw, s.w - iw0);
    if (kw_lo >= kw_hi) continue;
    for (int64_t kh = 0; kh < s.kh; ++kh) {
      const int64_t ih = ih0 + kh;
      if (ih < 0 || ih >= s.h) continue;
      const T* sp = src + kh * run + kw_lo * s.c;
      T* dp = dx + ((n * s.h + ih) * s.w + iw0 + kw_lo) * s.c;
      const int64_t len = (kw_hi - kw_lo) * s.c;
      for (int64_t i = 0; i < len; ++i) dp[i] += sp[i];
    }
  }
}

template <typename T>
std::unique_ptr<T[]> scratch(int64_t n) {
  return std::unique_ptr<T[]>(new T[static_cast<size_t>(std::max<int64_t>(1, n))]);
}

// y = conv(x, w), and with `bias` the bias-and-relu epilogue (cpu/bias_relu.h) on each
// chunk while it is in cache.
template <typename T>
void conv_forward(OpKernelContext& ctx, const ConvShape& s, const T* x, const T* w, T* y, const T* bias, bool relu) {
  const int64_t P = s.rows(), K = s.kdim(), O = s.o;
  const bool direct = s.direct();
  const int64_t R = chunk_rows(ctx, P, K, sizeof(T));
  const int64_t chunks = (P + R - 1) / R;
  ctx.device()->parallel_for(chunks, gemm_cost(R, K, O), [&](int64_t c0, int64_t c1) {
    std::unique_ptr<T[]> col = direct ? nullptr : scratch<T>(R * K);
    for (int64_t ci = c0; ci < c1; ++ci) {
      const int64_t r0 = ci * R, r1 = std::min(P, r0 + R);
      const T* a = x + r0 * K;
      if (!direct) {
        im2col(s, x, r0, r1, col.get());
        a = col.get();
      }
      MatMap<T>(y + r0 * O, r1 - r0, O).noalias() = ConstMatMap<T>(a, r1 - r0, K) * ConstMatMap<T>(w, K, O);
      if (bias) cpu::add_bias_relu_rows(y + r0 * O, bias, r1 - r0, O, relu);
    }
  });
}

template <typename T>
void conv_backprop_filter(OpKernelContext& ctx, const ConvShape& s, const T* x, const T* dy, T* dw) {
  const int64_t P = s.rows(), K = s.kdim(), O = s.o;
  std::fill(dw, dw + K * O, T(0));
  const bool direct = s.direct();
  const int64_t R = chunk_rows(ctx, P, K, sizeof(T));
  const int64_t chunks = (P + R - 1) / R;
  const int64_t parts = std::min<int64_t>(chunks, std::max(1, ctx.device()->num_threads()));
  // Part 0 accumulates straight into dw; the others into partials added at the end.
  std::unique_ptr<T[]> partials = scratch<T>((parts - 1) * K * O);
  ctx.device()->parallel_for(parts, gemm_cost(P / parts + 1, K, O), [&](int64_t p0, int64_t p1) {
    std::unique_ptr<T[]> col = direct ? nullptr : scratch<T>(R * K);
    for (int64_t p = p0; p < p1; ++p) {
      T* acc = p == 0 ? dw : partials.get() + (p - 1) * K * O;
      if (p > 0) std::fill(acc, acc + K * O, T(0));
      MatMap<T> accm(acc, K, O);
      for (int64_t ci = chunks * p / parts; ci < chunks * (p + 1) / parts; ++ci) {
        const int64_t r0 = ci * R, r1 = std::min(P, r0 + R);
        const T* a = x + r0 * K;
        if (!direct) {
          im2col(s, x, r0, r1, col.get());
          a = col.get();
        }
        accm.noalias() += ConstMatMap<T>(a, r1 - r0, K).transpose() * ConstMatMap<T>(dy + r0 * O, r1 - r0, O);
      }
    }
  });
  for (int64_t p = 1; p < parts; ++p) {
    const T* part = partials.get() + (p - 1) * K * O;
    for (int64_t i = 0; i < K * O; ++i) dw[i] += part[i];
  }
}

template <typename T>
void conv_backprop_input(OpKernelContext& ctx, const ConvShape& s, const T* w, const T* dy, T* dx) {
  const int64_t P = s.rows(), K = s.kdim(), O = s.o;
  const int64_t image = s.h * s.w * s.c;
  const int64_t R = chunk_rows(ctx, P, K, sizeof(T));
  if (s.direct()) {
    const int64_t chunks = (P + R - 1) / R;
    ctx.device()->parallel_for(chunks, gemm_cost(R, K, O), [&](int64_t c0, int64_t c1) {
      for (int64_t ci = c0; ci < c1; ++ci) {
        const int64_t r0 = ci * R, r1 = std::min(P, r0 + R);
        MatMap<T>(dx + r0 * K, r1 - r0, K).noalias() =
            ConstMatMap<T>(dy + r0 * O, r1 - r0, O) * ConstMatMap<T>(w, K, O).transpose();
      }
    });
    return;
  }
  const int64_t ohw = s.oh * s.ow;
  const int64_t per_chunk = std::max<int64_t>(1, R / ohw);  // images
  const int64_t chunks = (s.n + per_chunk - 1) / per_chunk;
  ctx.device()->parallel_for(chunks, gemm_cost(per_chunk * ohw, K, O), [&](int64_t c0, int64_t c1) {
    std::unique_ptr<T[]> col = scratch<T>(per_chunk * ohw * K);
    for (int64_t ci = c0; ci < c1; ++ci) {
      const int64_t n0 = ci * per_chunk, n1 = std::min(s.n, n0 + per_chunk);
      const int64_t r0 = n0 * ohw, r1 = n1 * ohw;
      MatMap<T>(col.get(), r1 - r0, K).noalias() =
          ConstMatMap<T>(dy + r0 * O, r1 - r0, O) * ConstMatMap<T>(w, K, O).transpose();
      std::fill(dx + n0 * image, dx + n1 * image, T(0));
      col2im(s, col.get(), r0, r1, dx);
    }
  });
}

// The f32 kernels through oneDNN (cpu/onednn_conv.h), images sharded over our pool in
// bands, one single-threaded primitive per band. False when oneDNN is not chosen or
// refuses the shape; the caller then runs the Eigen path, which overwrites all of its
// output. `band(d, n0, ok)` runs one band of images [n0, n0 + d.n).
template <typename Band>
bool onednn_bands(OpKernelContext& ctx, const ConvShape& s, int64_t bands, Band band) {
  if (!cpu::prefer_onednn_conv()) return false;
  std::atomic<bool> ok{true};
  ctx.device()->parallel_for(bands, gemm_cost(s.rows() / bands + 1, s.kdim(), s.o), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t n0 = s.n * b / bands, n1 = s.n * (b + 1) / bands;
      cpu::ConvDims d{n1 - n0, s.h, s.w, s.c, s.kh, s.kw, s.o, s.oh, s.ow, s.sh, s.sw, s.pad_t, s.pad_l};
      if (!band(d, n0, b)) ok = false;
    }
  });
  return ok;
}

int64_t band_count(const OpKernelContext& ctx, const ConvShape& s) {
  return std::min<int64_t>(std::max(1, ctx.device()->num_threads()), s.n);
}

bool conv_forward_onednn(OpKernelContext& ctx, const ConvShape& s, const float* x, const float* w, float* y,
                         const float* bias, bool relu, bool bf16) {
  const int64_t x_image = s.h * s.w * s.c, y_image = s.oh * s.ow * s.o;
  return onednn_bands(ctx, s, band_count(ctx, s), [&](const cpu::ConvDims& d, int64_t n0, int64_t) {
    return cpu::onednn_conv2d_f32(d, x + n0 * x_image, w, y + n0 * y_image, bias, relu, bf16);
  });
}

// With stride 1, the input gradient is a forward convolution of dy with the filter
// turned 180 degrees and its channels swapped (w'[i, j, o, c] = w[kh-1-i, kw-1-j, c, o]),
// padded by kh-1-pad before: oneDNN's forward kernels (brgconv) run it 1.3-1.5x faster
// than its backward-data kernel of the same shape (conv2 of the CNN: 7.4 against 10.8 ms
// for 64 images on one core). The sums are the same terms in another order.
bool conv_backprop_input_as_forward(OpKernelContext& ctx, const ConvShape& s, const float* w, const float* dy,
                                    float* dx, bool bf16) {
  if (s.sh != 1 || s.sw != 1 || s.pad_t > s.kh - 1 || s.pad_l > s.kw - 1) return false;
  ConvShape f{s.n, s.oh, s.ow, s.o, s.kh, s.kw, s.c, s.h, s.w, 1, 1, s.kh - 1 - s.pad_t, s.kw - 1 - s.pad_l};
  // The forward's padding after the last row and column must come out >= 0 too.
  if ((f.oh - 1) + f.kh - f.h - f.pad_t < 0 || (f.ow - 1) + f.kw - f.w - f.pad_l < 0) return false;
  const int64_t taps = s.kh * s.kw;
  std::unique_ptr<float[]> turned = scratch<float>(taps * s.c * s.o);
  for (int64_t t = 0; t < taps; ++t) {
    const float* from = w + (taps - 1 - t) * s.c * s.o;  // [c, o] at the turned tap
    float* to = turned.get() + t * s.o * s.c;             // [o, c]
    for (int64_t c = 0; c < s.c; ++c)
      for (int64_t o = 0; o < s.o; ++o) to[o * s.c + c] = from[c * s.o + o];
  }
  return conv_forward_onednn(ctx, f, dy, turned.get(), dx, nullptr, false, bf16);
}

bool conv_backprop_input_onednn(OpKernelContext& ctx, const ConvShape& s, const float* w, const float* dy, float* dx,
                                bool bf16) {
  if (conv_backprop_input_as_forward(ctx, s, w, dy, dx, bf16)) return true;
  const int64_t x_image = s.h * s.w * s.c, y_image = s.oh * s.ow * s.o;
  return onednn_bands(ctx, s, band_count(ctx, s), [&](const cpu::ConvDims& d, int64_t n0, int64_t) {
    return cpu::onednn_conv2d_backprop_input_f32(d, w, dy + n0 * y_image, dx + n0 * x_image, bf16);
  });
}

// Band 0 writes dw, the others partial sums added after in band order, as the Eigen path
// does: the result depends on the thread count but not on scheduling.
bool conv_backprop_filter_onednn(OpKernelContext& ctx, const ConvShape& s, const float* x, const float* dy, float* dw,
                                 bool bf16) {
  const int64_t x_image = s.h * s.w * s.c, y_image = s.oh * s.ow * s.o, size = s.kdim() * s.o;
  const int64_t bands = band_count(ctx, s);
  std::unique_ptr<float[]> partials = scratch<float>((bands - 1) * size);
  const bool ok = onednn_bands(ctx, s, bands, [&](const cpu::ConvDims& d, int64_t n0, int64_t b) {
    float* out = b == 0 ? dw : partials.get() + (b - 1) * size;
    return cpu::onednn_conv2d_backprop_filter_f32(d, x + n0 * x_image, dy + n0 * y_image, out, bf16);
  });
  if (!ok) return false;
  for (int64_t b = 1; b < bands; ++b) {
    const float* part = partials.get() + (b - 1) * size;
    for (int64_t i = 0; i < size; ++i) dw[i] += part[i];
  }
  return true;
}

// Conv2D(x, filter), and _FusedConv2D(x, filter, bias) with attr relu: the bias and relu
// are applied to each band or chunk of the output as it is written (oneDNN's post-ops,
// or a pass over the chunk on the Eigen path), never in a second sweep over y.
class Conv2DKernel : public ConvBase {
 public:
  explicit Conv2DKernel(const Node& n)
      : ConvBase(n), fused_(n.op == "_FusedConv2D"), relu_(fused_ && n.attr_bool("relu")) {}

  void compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& f = ctx.input(1);
    ConvShape s;
    if (!geometry(ctx, x, f, &s)) return;
    const Tensor* bias = fused_ ? &ctx.input(2) : nullptr;
    if (bias && (bias->dtype() != x.dtype() || bias->rank() != 1 || bias->dim(0) != s.o)) {
      ctx.fail("bias " + std::string(dtype_name(bias->dtype())) + bias->shape().to_string() + " does not match the " +
               std::to_string(s.o) + " output channels of " + dtype_name(x.dtype()) + " filter " +
               f.shape().to_string());
      return;
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), s.out_shape());
    if (y.num_elements() == 0) return;
    // Past this point every tensor is non-empty, so every product of dims is bounded
    // by an allocation; an empty input (C = 0) convolves to zeros.
    if (x.num_elements() == 0 || f.num_elements() == 0) {
      zero(y);
      if (!bias) return;
      if (x.dtype() == DType::f32) cpu::add_bias_relu_rows(y.data<float>(), bias->data<float>(), s.rows(), s.o, relu_);
      else cpu::add_bias_relu_rows(y.data<double>(), bias->data<double>(), s.rows(), s.o, relu_);
      return;
    }
    if (x.dtype() == DType::f32) {
      const float* b = bias ? bias->data<float>() : nullptr;
      if (!conv_forward_onednn(ctx, s, x.data<float>(), f.data<float>(), y.data<float>(), b, relu_, bf16_))
        conv_forward<float>(ctx, s, x.data<float>(), f.data<float>(), y.data<float>(), b, relu_);
    } else {
      conv_forward<double>(ctx, s, x.data<double>(), f.data<double>(), y.data<double>(),
                           bias ? bias->data<double>() : nullptr, relu_);
    }
  }

 private:
  const bool fused_, relu_;
};

// Conv2DBackpropInput(input, filter, out_backprop): input lends only its shape.
class Conv2DBackpropInputKernel : public ConvBase {
 public:
  using ConvBase::ConvBase;
  void compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& f = ctx.input(1);
    const Tensor& dy = ctx.input(2);
    ConvShape s;
    if (!geometry(ctx, x, f, &s) || !check_out_backprop(ctx, s, dy, x.dtype())) return;
    Tensor& dx = ctx.allocate_output(0, x.dtype(), x.shape());
    if (dx.num_elements() == 0) return;
    if (f.num_elements() == 0 || dy.num_elements() == 0) return zero(dx);
    if (x.dtype() == DType::f32) {
      if (!conv_backprop_input_onednn(ctx, s, f.data<float>(), dy.data<float>(), dx.data<float>(), bf16_))
        conv_backprop_input<float>(ctx, s, f.data<float>(), dy.data<float>(), dx.data<float>());
    } else conv_backprop_input<double>(ctx, s, f.data<double>(), dy.data<double>(), dx.data<double>());
  }
};

// Conv2DBackpropFilter(input, filter, out_backprop): filter lends only its shape.
class Conv2DBackpropFilterKernel : public ConvBase {
 public:
  using ConvBase::ConvBase;
  void compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& f = ctx.input(1);
    const Tensor& dy = ctx.input(2);
    ConvShape s;
    if (!geometry(ctx, x, f, &s) || !check_out_backprop(ctx, s, dy, x.dtype())) return;
    Tensor& dw = ctx.allocate_output(0, f.dtype(), f.shape());
    if (dw.num_elements() == 0) return;
    if (x.num_elements() == 0 || dy.num_elements() == 0) return zero(dw);
    if (x.dtype() == DType::f32) {
      if (!conv_backprop_filter_onednn(ctx, s, x.data<float>(), dy.data<float>(), dw.data<float>(), bf16_))
        conv_backprop_filter<float>(ctx, s, x.data<float>(), dy.data<float>(), dw.data<float>());
    } else conv_backprop_filter<double>(ctx, s, x.data<double>(), dy.data<double>(), dw.data<double>());
  }
};

AF_REGISTER_KERNEL("Conv2D", DeviceType::CPU, Conv2DKernel);
AF_REGISTER_KERNEL("_FusedConv2D", DeviceType::CPU, Conv2DKernel);
AF_REGISTER_KERNEL("Conv2DBackpropInput", DeviceType::CPU, Conv2DBackpropInputKernel);
AF_REGISTER_KERNEL("Conv2DBackpropFilter", DeviceType::CPU, Conv2DBackpropFilterKernel);

}  // namespace
}  // namespace actorflow
