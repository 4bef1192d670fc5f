// CPU kernels of BiasAdd, BiasAddGrad, L2Loss and the cross-entropy losses.
//
// Float sums (the bias gradient, L2Loss, the softmax denominators and row losses)
// accumulate in double through reduction_impl.h's reducers, for the reason given there.
// Results never depend on the thread count: the pieces that get summed separately are
// fixed by the shape alone.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "actorflow/kernel.h"
#include "cpu/reduction_impl.h"
#include "cpu/unary_math.h"

namespace actorflow {
namespace {

namespace um = unary_math;

constexpr int64_t kChunk = 1 << 16;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The [outer, channels, inner] view of a BiasAdd operand: NHWC has inner == 1.
struct ChannelView {
  int64_t outer = 1, channels = 1, inner = 1;
};

bool channel_view(OpKernelContext& ctx, const Tensor& x, bool nchw, ChannelView* v) {
  const int r = x.rank();
  if (r < (nchw ? 2 : 1)) {
    ctx.fail("value of shape " + x.shape().to_string() + " must have rank >= " + (nchw ? "2 for data_format NCHW" : "1"));
    return false;
  }
  const int axis = nchw ? 1 : r - 1;
  v->channels = x.dim(axis);
  for (int i = 0; i < axis; ++i) v->outer *= x.dim(i);
  for (int i = axis + 1; i < r; ++i) v->inner *= x.dim(i);
  return true;
}

// ---- BiasAdd ----

class BiasAddKernel : public OpKernel {
 public:
  explicit BiasAddKernel(const Node& n) : OpKernel(n), nchw_(n.attr_string("data_format", "NHWC") == "NCHW") {}

  void compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& b = ctx.input(1);
    ChannelView v;
    if (!channel_view(ctx, x, nchw_, &v)) return;
    if (b.rank() != 1 || b.dim(0) != v.channels || b.dtype() != x.dtype()) {
      ctx.fail("bias " + std::string(dtype_name(b.dtype())) + b.shape().to_string() + " does not match the " +
               std::to_string(v.channels) + " channels of value " + dtype_name(x.dtype()) + x.shape().to_string());
      return;
    }
    Tensor& out = ctx.allocate_output(0, x.dtype(), x.shape());
    bool ok = visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, bool>) run<T>(x.data<T>(), b.data<T>(), out.data<T>(), v, ctx.device());
    });
    if (!ok || x.dtype() == DType::boolean) ctx.fail(std::string("unsupported dtype ") + dtype_name(x.dtype()));
  }

 private:
  template <typename T>
  static void run(const T* x, const T* b, T* y, const ChannelView& v, const DeviceContext* dev) {
    if (v.inner == 1) {
      const int64_t c = v.channels;
      dev->parallel_for(v.outer, c + 4, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const T* xr = x + r * c;
          T* yr = y + r * c;
          for (int64_t j = 0; j < c; ++j) yr[j] = static_cast<T>(xr[j] + b[j]);
        }
      });
      return;
    }
    // NCHW: one unit per (outer, channel) plane of `inner` contiguous elements.
    dev->parallel_for(v.outer * v.channels, v.inner + 4, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        const T bias = b[p % v.channels];
        const T* xp = x + p * v.inner;
        T* yp = y + p * v.inner;
        for (int64_t j = 0; j < v.inner; ++j) yp[j] = static_cast<T>(xp[j] + bias);
      }
    });
  }

  bool nchw_;
};

// ---- BiasAddGrad ----

// out[c] = sum over r of p[r * cols + c]. The work is cut into (row range, column tile)
// units: row ranges of a fixed length (so the summation order depends on the shape only)
// give parallelism over tall inputs, column tiles keep the accumulators in cache over
// wide ones. Each unit writes its own slice of `part`; the row ranges are merged in order.
template <typename T>
void column_sums(const T* p, int64_t rows, int64_t cols, T* out, const DeviceContext* dev) {
  using Rd = reduce::Reducer<reduce::Kind::sum, T>;
  using Acc = typename Rd::Acc;
  if (cols == 0) return;
  if (rows == 0) {
    std::fill(out, out + cols, T(0));
    return;
  }
  constexpr int64_t kColTile = 4096;
  const int64_t tile = std::min(cols, kColTile);
  const int64_t col_tiles = ceil_div(cols, tile);
  const int64_t rows_per = std::max<int64_t>(256, ceil_div(kChunk, tile));
  const int64_t row_parts = ceil_div(rows, rows_per);
  std::vector<Acc> part(static_cast<size_t>(row_parts * cols), Rd::id());
  dev->parallel_for(col_tiles * row_parts, std::min(rows, rows_per) * tile, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t rp = u % row_parts, ct = u / row_parts;
      const int64_t c0 = ct * tile, cn = std::min(tile, cols - c0);
      const int64_t r0 = rp * rows_per, rn = std::min(rows_per, rows - r0);
      Acc* acc = part.data() + rp * cols + c0;
      if (col_tiles == 1) reduce::reduce_columns<Rd>(p + r0 * cols, rn, cols, acc);
      else reduce::reduce_rows_into<Rd>(p + r0 * cols + c0, rn, cn, cols, acc);
    }
  });
  for (int64_t c = 0; c < cols; ++c) {
    Acc a = part[static_cast<size_t>(c)];
    for (int64_t rp = 1; rp < row_parts; ++rp) a = Rd::merge(a, part[static_cast<size_t>(rp * cols + c)]);
    out[c] = Rd::finish(a, rows);
  }
}

class BiasAddGradKernel : public OpKernel {
 public:
  explicit BiasAddGradKernel(const Node& n) : OpKernel(n), nchw_(n.attr_string("data_format", "NHWC") == "NCHW") {}

  void compute(OpKernelContext& ctx) override {
    const Tensor& g = ctx.input(0);
    ChannelView v;
    if (!channel_view(ctx, g, nchw_, &v)) return;
    Tensor& out = ctx.allocate_output(0, g.dtype(), Shape{v.channels});
    bool ok = visit_dtype(g.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, bool>) run<T>(g.data<T>(), out.data<T>(), v, ctx.device());
    });
    if (!ok || g.dtype() == DType::boolean) ctx.fail(std::string("unsupported dtype ") + dtype_name(g.dtype()));
  }

 private:
  template <typename T>
  static void run(const T* g, T* out, const ChannelView& v, const DeviceContext* dev) {
    if (v.inner == 1) return column_sums(g, v.outer, v.channels, out, dev);
    // NCHW: sum each contiguous plane, then the planes of each channel in order.
    using Rd = reduce::Reducer<reduce::Kind::sum, T>;
    using Acc = typename Rd::Acc;
    const int64_t planes = v.outer * v.channels;
    std::vector<Acc> part(static_cast<size_t>(planes));
    dev->parallel_for(planes, v.inner + 8, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) part[static_cast<size_t>(p)] = reduce::reduce_contig<Rd>(g + p * v.inner, v.inner);
    });
    for (int64_t c = 0; c < v.channels; ++c) {
      Acc a = Rd::id();
      for (int64_t o = 0; o < v.outer; ++o) a = Rd::merge(a, part[static_cast<size_t>(o * v.channels + c)]);
      out[c] = Rd::finish(a, v.outer * v.inner);
    }
  }

  bool nchw_;
};

// ---- L2Loss ----

template <typename T>
struct SquareSum {
  using Acc = std::conditional_t<std::is_same_v<T, float>, double, T>;
  static Acc id() { return Acc(0); }
  static Acc step(Acc a, T x) { return a + static_cast<Acc>(x) * static_cast<Acc>(x); }
  static Acc merge(Acc a, Acc b) { return a + b; }
};

class L2LossKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() == DType::f32) return run<float>(ctx, x);
    if (x.dtype() == DType::f64) return run<double>(ctx, x);
    ctx.fail(std::string("unsupported dtype ") + dtype_name(x.dtype()));
  }

 private:
  template <typename T>
  static void run(OpKernelContext& ctx, const Tensor& x) {
    using Rd = SquareSum<T>;
    const T* p = x.data<T>();
    const int64_t n = x.num_elements();
    const int64_t chunks = ceil_div(n, kChunk);
    std::vector<typename Rd::Acc> part(static_cast<size_t>(chunks));
    ctx.device()->parallel_for(chunks, kChunk, [&](int64_t k0, int64_t k1) {
      for (int64_t k = k0; k < k1; ++k)
        part[static_cast<size_t>(k)] = reduce::reduce_contig<Rd>(p + k * kChunk, std::min(kChunk, n - k * kChunk));
    });
    typename Rd::Acc s = Rd::id();
    for (auto a : part) s = Rd::merge(s, a);
    ctx.allocate_output(0, x.dtype(), Shape{}).data<T>()[0] = static_cast<T>(s / 2);
  }
};

// ---- softmax cross-entropy (dense and sparse labels) ----

template <typename T>
inline T exp_of(T x) {
  if constexpr (std::is_same_v<T, float>) return um::exp_f32(x);
  else return std::exp(x);
}

// One row of C logits: bp = exp(x - max), and the returned sum of bp. Working relative
// to the row max keeps exp from overflowing (logits of +-1000 stay finite).
template <typename T>
double shifted_exp_row(const T* x, T* bp, int64_t c, T* max_out) {
  using MaxR = reduce::Reducer<reduce::Kind::max, T>;
  using SumR = reduce::Reducer<reduce::Kind::sum, T>;
  const T m = MaxR::finish(reduce::reduce_contig<MaxR>(x, c), c);
  for (int64_t j = 0; j < c; ++j) bp[j] = exp_of(static_cast<T>(x[j] - m));
  *max_out = m;
  return static_cast<double>(reduce::reduce_contig<SumR>(bp, c));
}

class SoftmaxXentKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(OpKernelContext& ctx) override {
    const Tensor& logits = ctx.input(0);
    const Tensor& labels = ctx.input(1);
    if (logits.rank() < 1 || logits.shape() != labels.shape() || logits.dtype() != labels.dtype()) {
      ctx.fail("logits " + std::string(dtype_name(logits.dtype())) + logits.shape().to_string() + " and labels " +
               dtype_name(labels.dtype()) + labels.shape().to_string() +
               " must have the same dtype and the same shape of rank >= 1");
      return;
    }
    if (logits.dtype() == DType::f32) return run<float>(ctx, logits, labels);
    if (logits.dtype() == DType::f64) return run<double>(ctx, logits, labels);
    ctx.fail(std::string("unsupported dtype ") + dtype_name(logits.dtype()));
  }

 private:
  template <typename T>
  static void run(OpKernelContext& ctx, const Tensor& logits, const Tensor& labels) {
    const int64_t c = logits.dim(logits.rank() - 1);
    std::vector<int64_t> batch(logits.shape().dims().begin(), logits.shape().dims().end() - 1);
    Tensor& loss = ctx.allocate_output(0, logits.dtype(), Shape(batch));
    Tensor& backprop = ctx.allocate_output(1, logits.dtype(), logits.shape());
    const T* x = logits.data<T>();
    const T* z = labels.data<T>();
    T* l = loss.data<T>();
    T* bp = backprop.data<T>();
    ctx.device()->parallel_for(loss.num_elements(), 8 * c + 16, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* xr = x + r * c;
        const T* zr = z + r * c;
        T* br = bp + r * c;
        T m;
        const double sum = shifted_exp_row(xr, br, c, &m);
        const double log_sum = std::log(sum);
        // loss = sum_j z_j * (log_sum - (x_j - m)): no exp of an unshifted logit.
        double acc = 0;
        for (int64_t j = 0; j < c; ++j) acc += static_cast<double>(zr[j]) * (log_sum - static_cast<double>(xr[j] - m));
        l[r] = static_cast<T>(acc);
        const T inv = static_cast<T>(1.0 / sum);
        for (int64_t j = 0; j < c; ++j) br[j] = static_cast<T>(br[j] * inv - zr[j]);
      }
    });
  }
};

class SparseSoftmaxXentKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(OpKernelContext& ctx) override {
    const Tensor& logits = ctx.input(0);
    const Tensor& labels = ctx.input(1);
    bool shapes_ok = logits.rank() >= 1 && labels.rank() == logits.rank() - 1;
    for (int i = 0; shapes_ok && i < labels.rank(); ++i) shapes_ok = labels.dim(i) == logits.dim(i);
    if (!shapes_ok) {
      ctx.fail("labels " + labels.shape().to_string() + " must have the shape of logits " + logits.shape().to_string() +
               " without its last (class) axis");
      return;
    }
    if (labels.dtype() == DType::i32) return dispatch<int32_t>(ctx, logits, labels);
    if (labels.dtype() == DType::i64) return dispatch<int64_t>(ctx, logits, labels);
    ctx.fail(std::string("labels must be i32 or i64, got ") + dtype_name(labels.dtype()));
  }

 private:
  template <typename L>
  static void dispatch(OpKernelContext& ctx, const Tensor& logits, const Tensor& labels) {
    // Validate every label before any row is computed: kernels must not read outside
    // the row, and the error should name the first bad label.
    const int64_t c = logits.dim(logits.rank() - 1);
    const L* y = labels.data<L>();
    for (int64_t i = 0; i < labels.num_elements(); ++i)
      if (y[i] < 0 || static_cast<int64_t>(y[i]) >= c) {
        ctx.fail(out_of_range("label " + std::to_string(y[i]) + " at index " + std::to_string(i) +
                              " is out of range: it must be in [0, " + std::to_string(c) + ") for logits of shape " +
                              logits.shape().to_string()));
        return;
      }
    if (logits.dtype() == DType::f32) return run<float, L>(ctx, logits, y, c);
    if (logits.dtype() == DType::f64) return run<double, L>(ctx, logits, y, c);
    ctx.fail(std::string("unsupported dtype ") + dtype_name(logits.dtype()));
  }

  template <typename T, typename L>
  static void run(OpKernelContext& ctx, const Tensor& logits, const L* y, int64_t c) {
    std::vector<int64_t> batch(logits.shape().dims().begin(), logits.shape().dims().end() - 1);
    Tensor& loss = ctx.allocate_output(0, logits.dtype(), Shape(batch));
    Tensor& backprop = ctx.allocate_output(1, logits.dtype(), logits.shape());
    const T* x = logits.data<T>();
    T* l = loss.data<T>();
    T* bp = backprop.data<T>();
    ctx.device()->parallel_for(loss.num_elements(), 6 * c + 16, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* xr = x + r * c;
        T* br = bp + r * c;
        const int64_t k = static_cast<int64_t>(y[r]);
        T m;
        const double sum = shifted_exp_row(xr, br, c, &m);
        const double log_sum = std::log(sum);
        l[r] = static_cast<T>(log_sum - static_cast<double>(xr[k] - m));
        const T inv = static_cast<T>(1.0 / sum);
        for (int64_t j = 0; j < c; ++j) br[j] = br[j] * inv;
        br[k] -= T(1);
      }
    });
  }
};

// ---- sigmoid cross-entropy ----

// max(x,0) - x*z + log(1 + exp(-|x|)) = softplus(x) - x*z, which neither overflows
// for large |x| nor loses log(1+tiny).
class SigmoidXentKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& z = ctx.input(1);
    if (x.shape() != z.shape() || x.dtype() != z.dtype()) {
      ctx.fail("logits " + std::string(dtype_name(x.dtype())) + x.shape().to_string() + " and labels " +
               dtype_name(z.dtype()) + z.shape().to_string() + " must have the same dtype and shape");
      return;
    }
    if (x.dtype() == DType::f32) return run<float>(ctx, x, z);
    if (x.dtype() == DType::f64) return run<double>(ctx, x, z);
    ctx.fail(std::string("unsupported dtype ") + dtype_name(x.dtype()));
  }

 private:
  template <typename T>
  static void run(OpKernelContext& ctx, const Tensor& x, const Tensor& z) {
    Tensor& out = ctx.allocate_output(0, x.dtype(), x.shape());
    const T* px = x.data<T>();
    const T* pz = z.data<T>();
    T* po = out.data<T>();
    ctx.device()->parallel_for(x.num_elements(), 20, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        if constexpr (std::is_same_v<T, float>) po[i] = um::softplus_f32(px[i]) - px[i] * pz[i];
        else po[i] = um::softplus_f64(px[i]) - px[i] * pz[i];
      }
    });
  }
};

AF_REGISTER_KERNEL("BiasAdd", DeviceType::CPU, BiasAddKernel);
AF_REGISTER_KERNEL("BiasAddGrad", DeviceType::CPU, BiasAddGradKernel);
AF_REGISTER_KERNEL("L2Loss", DeviceType::CPU, L2LossKernel);
AF_REGISTER_KERNEL("SoftmaxCrossEntropyWithLogits", DeviceType::CPU, SoftmaxXentKernel);
AF_REGISTER_KERNEL("SparseSoftmaxCrossEntropyWithLogits", DeviceType::CPU, SparseSoftmaxXentKernel);
AF_REGISTER_KERNEL("SigmoidCrossEntropyWithLogits", DeviceType::CPU, SigmoidXentKernel);

}  // namespace
}  // namespace actorflow
