// CPU kernels of FusedBatchNorm and FusedBatchNormGrad over x [..., C] (channels last,
// viewed as [M, C]), f32 and f64.
//
// Per-channel sums run over fixed row ranges ("parts", one per pool thread) in double
// and are added in part order, so results do not depend on scheduling. Statistics take
// two passes (mean, then squared deviations) rather than sum/sum-of-squares, which loses
// everything to cancellation when |mean| >> stddev.
//
// batch_variance (output 2) is the Bessel-corrected variance M/(M-1) * var, the value a
// moving average should track (as TF); y is normalized with the biased variance.
#include <algorithm>
#include <cmath>
#include <vector>

#include "actorflow/kernel.h"

namespace actorflow {
namespace {

// sums[k * C + c] = sum over rows r of the k-th accumulator that fn(r, acc) adds into
// acc (nacc * C doubles).
template <typename F>
std::vector<double> row_sums(OpKernelContext& ctx, int64_t M, int64_t C, int nacc, F fn) {
  const size_t width = static_cast<size_t>(nacc * C);
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(ctx.device()->num_threads(), M / 64));
  std::vector<double> acc(static_cast<size_t>(parts) * width, 0.0);
  ctx.device()->parallel_for(parts, (M / parts + 1) * C * nacc + 100, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      double* a = acc.data() + static_cast<size_t>(p) * width;
      for (int64_t r = M * p / parts; r < M * (p + 1) / parts; ++r) fn(r, a);
    }
  });
  std::vector<double> out(acc.begin(), acc.begin() + static_cast<std::ptrdiff_t>(width));
  for (int64_t p = 1; p < parts; ++p)
    for (size_t i = 0; i < width; ++i) out[i] += acc[static_cast<size_t>(p) * width + i];
  return out;
}

// fn(r) over rows, sharded.
template <typename F>
void each_row(OpKernelContext& ctx, int64_t M, int64_t C, F fn) {
  ctx.device()->parallel_for(M, C * 2 + 10, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) fn(r);
  });
}

template <typename T>
std::vector<double> to_doubles(const Tensor& t) {
  const T* p = t.data<T>();
  return std::vector<double>(p, p + t.num_elements());
}

template <typename T>
Tensor from_doubles(OpKernelContext& ctx, int i, const std::vector<double>& v) {
  Tensor& t = ctx.allocate_output(i, DTypeOf<T>::value, Shape{static_cast<int64_t>(v.size())});
  T* p = t.data<T>();
  for (size_t k = 0; k < v.size(); ++k) p[k] = static_cast<T>(v[k]);
  return t;
}

// Batch mean and biased variance of x [M, C].
template <typename T>
void moments(OpKernelContext& ctx, const T* x, int64_t M, int64_t C, std::vector<double>* mean, std::vector<double>* var) {
  *mean = row_sums(ctx, M, C, 1, [&](int64_t r, double* a) {
    const T* row = x + r * C;
    for (int64_t c = 0; c < C; ++c) a[c] += static_cast<double>(row[c]);
  });
  for (auto& m : *mean) m = M > 0 ? m / static_cast<double>(M) : 0.0;
  const double* mu = mean->data();
  *var = row_sums(ctx, M, C, 1, [&](int64_t r, double* a) {
    const T* row = x + r * C;
    for (int64_t c = 0; c < C; ++c) {
      const double d = static_cast<double>(row[c]) - mu[c];
      a[c] += d * d;
    }
  });
  for (auto& v : *var) v = M > 0 ? v / static_cast<double>(M) : 0.0;
}

// Checks x (rank >= 2, float) and the per-channel inputs; sets M and C.
bool check_inputs(OpKernelContext& ctx, int x_i, const std::vector<int>& vec, int64_t* M, int64_t* C) {
  const Tensor& x = ctx.input(x_i);
  if (x.dtype() != DType::f32 && x.dtype() != DType::f64) {
    ctx.fail(std::string("needs a float32 or float64 input, got ") + dtype_name(x.dtype()));
    return false;
  }
  if (x.rank() < 2) {
    ctx.fail("input " + x.shape().to_string() + " must have rank >= 2 (channels last)");
    return false;
  }
  *C = x.dim(x.rank() - 1);
  *M = *C == 0 ? 0 : x.num_elements() / *C;
  for (int i : vec) {
    const Tensor& v = ctx.input(i);
    if (v.dtype() != x.dtype() || v.rank() != 1 || v.dim(0) != *C) {
      ctx.fail("input " + std::to_string(i) + " " + dtype_name(v.dtype()) + v.shape().to_string() + " must be " +
               dtype_name(x.dtype()) + "[" + std::to_string(*C) + "] (one value per channel of x " +
               x.shape().to_string() + ")");
      return false;
    }
  }
  return true;
}

bool training_flag(OpKernelContext& ctx, int i, bool dflt, bool* out) {
  *out = dflt;
  if (ctx.num_inputs() <= i) return true;
  const Tensor& t = ctx.input(i);
  if (t.dtype() != DType::boolean || t.num_elements() != 1) {
    ctx.fail("is_training must be a bool scalar, got " + std::string(dtype_name(t.dtype())) + t.shape().to_string());
    return false;
  }
  *out = t.item<bool>();
  return true;
}

// FusedBatchNorm(x, scale, offset, mean, variance[, is_training]) -> y, batch_mean,
// batch_variance. In inference the given mean and variance pass through as outputs 1
// and 2, so a moving-average update fed by them is a no-op.
class FusedBatchNormKernel : public OpKernel {
 public:
  explicit FusedBatchNormKernel(const Node& n)
      : OpKernel(n), epsilon_(n.attr_float("epsilon", 0.001)), training_(n.attr_bool("is_training", true)) {}

  void compute(OpKernelContext& ctx) override {
    int64_t M, C;
    bool training;
    if (!check_inputs(ctx, 0, {1, 2, 3, 4}, &M, &C) || !training_flag(ctx, 5, training_, &training)) return;
    if (ctx.input(0).dtype() == DType::f32) run<float>(ctx, M, C, training);
    else run<double>(ctx, M, C, training);
  }

 private:
  template <typename T>
  void run(OpKernelContext& ctx, int64_t M, int64_t C, bool training) {
    const Tensor& x = ctx.input(0);
    std::vector<double> mean, var;
    if (training) {
      moments<T>(ctx, x.data<T>(), M, C, &mean, &var);
    } else {
      mean = to_doubles<T>(ctx.input(3));
      var = to_doubles<T>(ctx.input(4));
    }
    const std::vector<double> scale = to_doubles<T>(ctx.input(1)), offset = to_doubles<T>(ctx.input(2));
    // y = x * a + b per channel.
    std::vector<T> a(static_cast<size_t>(C)), b(static_cast<size_t>(C));
    for (size_t c = 0; c < static_cast<size_t>(C); ++c) {
      const double k = scale[c] / std::sqrt(var[c] + epsilon_);
      a[c] = static_cast<T>(k);
      b[c] = static_cast<T>(offset[c] - mean[c] * k);
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    const T* px = x.data<T>();
    T* py = y.data<T>();
    each_row(ctx, M, C, [&](int64_t r) {
      const T* xr = px + r * C;
      T* yr = py + r * C;
      for (int64_t c = 0; c < C; ++c) yr[c] = xr[c] * a[static_cast<size_t>(c)] + b[static_cast<size_t>(c)];
    });
    if (training) {
      const double bessel = static_cast<double>(M) / static_cast<double>(std::max<int64_t>(M - 1, 1));
      for (auto& v : var) v *= bessel;
      from_doubles<T>(ctx, 1, mean);
      from_doubles<T>(ctx, 2, var);
    } else {
      ctx.set_output(1, ctx.input(3));
      ctx.set_output(2, ctx.input(4));
    }
  }

  double epsilon_;
  bool training_;
};

// FusedBatchNormGrad(dy, x, scale, mean, variance[, d_batch_mean, d_batch_variance
// [, is_training]]) -> dx, dscale, doffset, dmean, dvariance. In training the batch
// statistics are recomputed from x (mean/variance inputs are unused and get zero);
// d_batch_mean/d_batch_variance are the gradients flowing into FusedBatchNorm's outputs
// 1 and 2.
class FusedBatchNormGradKernel : public OpKernel {
 public:
  explicit FusedBatchNormGradKernel(const Node& n)
      : OpKernel(n), epsilon_(n.attr_float("epsilon", 0.001)), training_(n.attr_bool("is_training", true)) {}

  void compute(OpKernelContext& ctx) override {
    const int n = ctx.num_inputs();
    if (n != 5 && n != 7 && n != 8) {
      ctx.fail("takes 5, 7 or 8 inputs, got " + std::to_string(n));
      return;
    }
    const Tensor& dy = ctx.input(0);
    const Tensor& x = ctx.input(1);
    if (dy.dtype() != x.dtype() || dy.shape() != x.shape()) {
      ctx.fail("dy " + std::string(dtype_name(dy.dtype())) + dy.shape().to_string() + " must be shaped like x " +
               dtype_name(x.dtype()) + x.shape().to_string());
      return;
    }
    std::vector<int> vec = {2, 3, 4};
    if (n >= 7) vec = {2, 3, 4, 5, 6};
    int64_t M, C;
    bool training;
    if (!check_inputs(ctx, 1, vec, &M, &C) || !training_flag(ctx, 7, training_, &training)) return;
    if (x.dtype() == DType::f32) run<float>(ctx, M, C, training);
    else run<double>(ctx, M, C, training);
  }

 private:
  template <typename T>
  void run(OpKernelContext& ctx, int64_t M, int64_t C, bool training) {
    const T* dy = ctx.input(0).data<T>();
    const T* x = ctx.input(1).data<T>();
    const size_t uc = static_cast<size_t>(C);
    std::vector<double> mean, var;
    if (training) {
      moments<T>(ctx, x, M, C, &mean, &var);
    } else {
      mean = to_doubles<T>(ctx.input(3));
      var = to_doubles<T>(ctx.input(4));
    }
    const std::vector<double> scale = to_doubles<T>(ctx.input(2));
    std::vector<double> gm(uc, 0.0), gv(uc, 0.0);
    if (ctx.num_inputs() >= 7) {
      gm = to_doubles<T>(ctx.input(5));
      gv = to_doubles<T>(ctx.input(6));
    }
    std::vector<double> rstd(uc);
    for (size_t c = 0; c < uc; ++c) rstd[c] = 1.0 / std::sqrt(var[c] + epsilon_);
    const double* mu = mean.data();
    const double* rs = rstd.data();
    // sums[c] = sum(dy), sums[C + c] = sum(dy * xhat).
    std::vector<double> sums = row_sums(ctx, M, C, 2, [&](int64_t r, double* a) {
      const T* g = dy + r * C;
      const T* xr = x + r * C;
      for (int64_t c = 0; c < C; ++c) {
        const double gd = static_cast<double>(g[c]);
        a[c] += gd;
        a[C + c] += gd * (static_cast<double>(xr[c]) - mu[c]) * rs[c];
      }
    });
    const double* sum_dy = sums.data();
    const double* sum_dyx = sums.data() + C;
    // dx = k * dy + u * (x - mean) + v per channel.
    std::vector<T> k(uc), u(uc), v(uc);
    std::vector<double> dmean(uc, 0.0), dvar(uc, 0.0);
    const double inv_m = M > 0 ? 1.0 / static_cast<double>(M) : 0.0;
    const double inv_m1 = 1.0 / static_cast<double>(std::max<int64_t>(M - 1, 1));
    for (size_t c = 0; c < uc; ++c) {
      const double sr = scale[c] * rstd[c];
      if (training) {
        // d/dx of scale * xhat + offset through the batch mean and variance, plus the
        // direct paths of outputs 1 (mean) and 2 (M/(M-1) * variance).
        k[c] = static_cast<T>(sr);
        u[c] = static_cast<T>(-sr * sum_dyx[c] * rstd[c] * inv_m + 2.0 * gv[c] * inv_m1);
        v[c] = static_cast<T>(-sr * sum_dy[c] * inv_m + gm[c] * inv_m);
      } else {
        k[c] = static_cast<T>(sr);
        u[c] = T(0);
        v[c] = T(0);
        dmean[c] = -sr * sum_dy[c] + gm[c];
        dvar[c] = -0.5 * scale[c] * rstd[c] * rstd[c] * sum_dyx[c] + gv[c];
      }
    }
    Tensor& dx = ctx.allocate_output(0, ctx.input(1).dtype(), ctx.input(1).shape());
    T* pdx = dx.data<T>();
    std::vector<T> mean_t(uc);
    for (size_t c = 0; c < uc; ++c) mean_t[c] = static_cast<T>(mean[c]);
    each_row(ctx, M, C, [&](int64_t r) {
      const T* g = dy + r * C;
      const T* xr = x + r * C;
      T* o = pdx + r * C;
      for (int64_t c = 0; c < C; ++c) {
        const size_t i = static_cast<size_t>(c);
        o[c] = k[i] * g[c] + u[i] * (xr[c] - mean_t[i]) + v[i];
      }
    });
    from_doubles<T>(ctx, 1, std::vector<double>(sum_dyx, sum_dyx + C));
    from_doubles<T>(ctx, 2, std::vector<double>(sum_dy, sum_dy + C));
    from_doubles<T>(ctx, 3, dmean);
    from_doubles<T>(ctx, 4, dvar);
  }

  double epsilon_;
  bool training_;
};

AF_REGISTER_KERNEL("FusedBatchNorm", DeviceType::CPU, FusedBatchNormKernel);
AF_REGISTER_KERNEL("FusedBatchNormGrad", DeviceType::CPU, FusedBatchNormGradKernel);

}  // namespace
}  // namespace actorflow
