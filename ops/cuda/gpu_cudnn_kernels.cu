// CUDA kernels beside cuDNN (see gpu_cudnn.h). Grid-stride loops over any size.
// Pooling follows ops/cpu/pool_kernels.cpp line by line: the same window clipping, the
// first maximum in row-major order, averages over the window elements inside the input,
// and gradients gathered per input element in the CPU's (oy, ox) order with no fused
// multiply-adds, so the f32 results are those of the CPU loops.
#include <cstdint>

#include "cuda/gpu_cudnn.h"

namespace actorflow::gpu {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65536 ? (b > 0 ? b : 1) : 65536);
}

#define AF_GRID_LOOP(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

__global__ void fill_kernel(float* __restrict__ p, float v, int64_t n) {
  AF_GRID_LOOP(i, n) p[i] = v;
}

__global__ void transpose2d_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t rows, int64_t cols) {
  AF_GRID_LOOP(i, rows * cols) {
    const int64_t r = i / cols, c = i % cols;
    out[c * rows + r] = in[i];
  }
}

__global__ void pad_kernel(const float* __restrict__ x, float* __restrict__ xp, int64_t n, int64_t h, int64_t w,
                           int64_t c, int64_t pt, int64_t pl, int64_t hp, int64_t wp) {
  AF_GRID_LOOP(i, n * hp * wp * c) {
    const int64_t ch = i % c;
    int64_t rest = i / c;
    const int64_t px = rest % wp;
    rest /= wp;
    const int64_t py = rest % hp;
    const int64_t b = rest / hp;
    const int64_t iy = py - pt, ix = px - pl;
    xp[i] = (iy >= 0 && iy < h && ix >= 0 && ix < w) ? x[((b * h + iy) * w + ix) * c + ch] : 0.f;
  }
}

__global__ void crop_kernel(const float* __restrict__ xp, float* __restrict__ x, int64_t n, int64_t h, int64_t w,
                            int64_t c, int64_t pt, int64_t pl, int64_t hp, int64_t wp) {
  AF_GRID_LOOP(i, n * h * w * c) {
    const int64_t ch = i % c;
    int64_t rest = i / c;
    const int64_t ix = rest % w;
    rest /= w;
    const int64_t iy = rest % h;
    const int64_t b = rest / h;
    x[i] = xp[((b * hp + iy + pt) * wp + ix + pl) * c + ch];
  }
}

// The window of output (oy, ox), clipped to the input (PoolShape::window).
__device__ __forceinline__ void pool_window(const PoolGeom& g, int64_t oy, int64_t ox, int64_t* h0, int64_t* h1,
                                            int64_t* w0, int64_t* w1) {
  const int64_t hs = oy * g.sh - g.pad_t, ws = ox * g.sw - g.pad_l;
  *h0 = hs > 0 ? hs : 0;
  *h1 = hs + g.kh < g.h ? hs + g.kh : g.h;
  *w0 = ws > 0 ? ws : 0;
  *w1 = ws + g.kw < g.w ? ws + g.kw : g.w;
}

// (n, oy, ox, c) of output element i.
__device__ __forceinline__ void split_out(const PoolGeom& g, int64_t i, int64_t* b, int64_t* oy, int64_t* ox,
                                          int64_t* ch) {
  *ch = i % g.c;
  int64_t rest = i / g.c;
  *ox = rest % g.ow;
  rest /= g.ow;
  *oy = rest % g.oh;
  *b = rest / g.oh;
}

__global__ void max_pool_kernel(const float* __restrict__ x, float* __restrict__ y, PoolGeom g) {
  AF_GRID_LOOP(i, g.n * g.oh * g.ow * g.c) {
    int64_t b, oy, ox, ch, h0, h1, w0, w1;
    split_out(g, i, &b, &oy, &ox, &ch);
    pool_window(g, oy, ox, &h0, &h1, &w0, &w1);
    float o = -__int_as_float(0x7f800000);  // -inf
    for (int64_t ih = h0; ih < h1; ++ih)
      for (int64_t iw = w0; iw < w1; ++iw) {
        const float v = x[((b * g.h + ih) * g.w + iw) * g.c + ch];
        o = v > o ? v : o;
      }
    y[i] = o;
  }
}

__global__ void avg_pool_kernel(const float* __restrict__ x, float* __restrict__ y, PoolGeom g) {
  AF_GRID_LOOP(i, g.n * g.oh * g.ow * g.c) {
    int64_t b, oy, ox, ch, h0, h1, w0, w1;
    split_out(g, i, &b, &oy, &ox, &ch);
    pool_window(g, oy, ox, &h0, &h1, &w0, &w1);
    float o = 0.f;
    for (int64_t ih = h0; ih < h1; ++ih)
      for (int64_t iw = w0; iw < w1; ++iw) o = __fadd_rn(o, x[((b * g.h + ih) * g.w + iw) * g.c + ch]);
    const int64_t count = (h1 - h0) * (w1 - w0);
    const float inv = count > 0 ? __fdiv_rn(1.f, static_cast<float>(count)) : 0.f;
    y[i] = __fmul_rn(o, inv);
  }
}

// The outputs whose windows hold input row ih: oy in [*lo, *hi].
__device__ __forceinline__ void covering(int64_t i, int64_t pad, int64_t k, int64_t s, int64_t out, int64_t* lo,
                                         int64_t* hi) {
  // oy * s - pad <= i  and  i < oy * s - pad + k.
  const int64_t a = i + pad - k + 1;
  int64_t l = a <= 0 ? 0 : (a + s - 1) / s;
  int64_t h = (i + pad) / s;
  if (h > out - 1) h = out - 1;
  *lo = l;
  *hi = h;
}

// Offset of the first maximum of output (b, oy, ox)'s window in channel ch (argmax_window).
__device__ __forceinline__ int64_t first_max(const float* __restrict__ x, const PoolGeom& g, int64_t b, int64_t oy,
                                             int64_t ox, int64_t ch) {
  int64_t h0, h1, w0, w1;
  pool_window(g, oy, ox, &h0, &h1, &w0, &w1);
  float best = -3.402823466e+38f;  // lowest
  int64_t at = -1;
  for (int64_t ih = h0; ih < h1; ++ih)
    for (int64_t iw = w0; iw < w1; ++iw) {
      const int64_t off = ((b * g.h + ih) * g.w + iw) * g.c + ch;
      const float v = x[off];
      if (v > best || at < 0) {
        best = v;
        at = off;
      }
    }
  return at;
}

__global__ void max_pool_grad_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                     float* __restrict__ dx, PoolGeom g) {
  AF_GRID_LOOP(i, g.n * g.h * g.w * g.c) {
    const int64_t ch = i % g.c;
    int64_t rest = i / g.c;
    const int64_t iw = rest % g.w;
    rest /= g.w;
    const int64_t ih = rest % g.h;
    const int64_t b = rest / g.h;
    int64_t y0, y1, x0, x1;
    covering(ih, g.pad_t, g.kh, g.sh, g.oh, &y0, &y1);
    covering(iw, g.pad_l, g.kw, g.sw, g.ow, &x0, &x1);
    float acc = 0.f;
    for (int64_t oy = y0; oy <= y1; ++oy)
      for (int64_t ox = x0; ox <= x1; ++ox)
        if (first_max(x, g, b, oy, ox, ch) == i) acc = __fadd_rn(acc, dy[((b * g.oh + oy) * g.ow + ox) * g.c + ch]);
    dx[i] = acc;
  }
}

__global__ void avg_pool_grad_kernel(const float* __restrict__ dy, float* __restrict__ dx, PoolGeom g) {
  AF_GRID_LOOP(i, g.n * g.h * g.w * g.c) {
    const int64_t ch = i % g.c;
    int64_t rest = i / g.c;
    const int64_t iw = rest % g.w;
    rest /= g.w;
    const int64_t ih = rest % g.h;
    const int64_t b = rest / g.h;
    int64_t y0, y1, x0, x1;
    covering(ih, g.pad_t, g.kh, g.sh, g.oh, &y0, &y1);
    covering(iw, g.pad_l, g.kw, g.sw, g.ow, &x0, &x1);
    float acc = 0.f;
    for (int64_t oy = y0; oy <= y1; ++oy)
      for (int64_t ox = x0; ox <= x1; ++ox) {
        int64_t h0, h1, w0, w1;
        pool_window(g, oy, ox, &h0, &h1, &w0, &w1);
        const int64_t count = (h1 - h0) * (w1 - w0);
        if (count <= 0) continue;
        const float inv = __fdiv_rn(1.f, static_cast<float>(count));
        acc = __fadd_rn(acc, __fmul_rn(dy[((b * g.oh + oy) * g.ow + ox) * g.c + ch], inv));
      }
    dx[i] = acc;
  }
}

__global__ void bn_stat_grads_kernel(const float* __restrict__ x, const float* __restrict__ mean,
                                     const float* __restrict__ gm, const float* __restrict__ gv, float* __restrict__ dx,
                                     int64_t m, int64_t c) {
  const double inv_m = m > 0 ? 1.0 / static_cast<double>(m) : 0.0;
  const double inv_m1 = 1.0 / static_cast<double>(m > 1 ? m - 1 : 1);
  AF_GRID_LOOP(i, m * c) {
    const int64_t ch = i % c;
    const float u = static_cast<float>(2.0 * static_cast<double>(gv[ch]) * inv_m1);
    const float v = static_cast<float>(static_cast<double>(gm[ch]) * inv_m);
    dx[i] += u * (x[i] - mean[ch]) + v;
  }
}

// One block per channel: sums of dy and dy * xhat in double, then the per-channel outputs.
__global__ void bn_inference_sums_kernel(const float* __restrict__ dy, const float* __restrict__ x,
                                         const float* __restrict__ scale, const float* __restrict__ mean,
                                         const float* __restrict__ var, const float* __restrict__ gm,
                                         const float* __restrict__ gv, float* __restrict__ dscale,
                                         float* __restrict__ doffset, float* __restrict__ dmean,
                                         float* __restrict__ dvar, int64_t m, int64_t c, double epsilon) {
  __shared__ double s_dy[kThreads], s_dyx[kThreads];
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    const double mu = mean[ch];
    const double rstd = 1.0 / sqrt(static_cast<double>(var[ch]) + epsilon);
    double a = 0, b = 0;
    for (int64_t r = threadIdx.x; r < m; r += blockDim.x) {
      const double g = dy[r * c + ch];
      a += g;
      b += g * (static_cast<double>(x[r * c + ch]) - mu) * rstd;
    }
    s_dy[threadIdx.x] = a;
    s_dyx[threadIdx.x] = b;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half >>= 1) {
      if (threadIdx.x < half) {
        s_dy[threadIdx.x] += s_dy[threadIdx.x + half];
        s_dyx[threadIdx.x] += s_dyx[threadIdx.x + half];
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      const double sum_dy = s_dy[0], sum_dyx = s_dyx[0], sc = scale[ch];
      dscale[ch] = static_cast<float>(sum_dyx);
      doffset[ch] = static_cast<float>(sum_dy);
      dmean[ch] = static_cast<float>(-sc * rstd * sum_dy + (gm ? static_cast<double>(gm[ch]) : 0.0));
      dvar[ch] = static_cast<float>(-0.5 * sc * rstd * rstd * sum_dyx + (gv ? static_cast<double>(gv[ch]) : 0.0));
    }
    __syncthreads();  // the shared sums are reused by the next channel
  }
}

__global__ void bn_inference_dx_kernel(const float* __restrict__ dy, const float* __restrict__ scale,
                                       const float* __restrict__ var, float* __restrict__ dx, int64_t m, int64_t c,
                                       double epsilon) {
  AF_GRID_LOOP(i, m * c) {
    const int64_t ch = i % c;
    const float k = static_cast<float>(static_cast<double>(scale[ch]) / sqrt(static_cast<double>(var[ch]) + epsilon));
    dx[i] = __fmul_rn(k, dy[i]);
  }
}

// Philox4x32-10 (ops/cpu/random_philox.h).
__device__ __forceinline__ uint4 philox4x32_10(uint4 c, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    const uint32_t hi0 = __umulhi(kM0, c.x), lo0 = kM0 * c.x;
    const uint32_t hi1 = __umulhi(kM1, c.z), lo1 = kM1 * c.z;
    c = make_uint4(hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0);
  }
  return c;
}

__device__ __forceinline__ float u01(uint32_t x) { return static_cast<float>(x >> 8) * 0x1p-24f; }

__global__ void dropout_kernel(const float* __restrict__ x, float* __restrict__ y, float* __restrict__ mask, int64_t n,
                               uint32_t key0, uint32_t key1, double rate, float scale,
                               const unsigned long long* __restrict__ counter, const bool* __restrict__ training) {
  const bool train = training == nullptr || *training;
  const unsigned long long base = *counter;
  const int64_t groups = (n + 3) / 4;
  AF_GRID_LOOP(gi, groups) {
    const int64_t i0 = gi * 4;
    const int cnt = n - i0 < 4 ? static_cast<int>(n - i0) : 4;
    if (!train) {
      for (int j = 0; j < cnt; ++j) {
        y[i0 + j] = x[i0 + j];
        mask[i0 + j] = 1.f;
      }
      continue;
    }
    const unsigned long long block = base + static_cast<unsigned long long>(gi);
    const uint4 r = philox4x32_10(make_uint4(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0, 0),
                                  key0, key1);
    const uint32_t bits[4] = {r.x, r.y, r.z, r.w};
    for (int j = 0; j < cnt; ++j) {
      const float mk = static_cast<double>(u01(bits[j])) >= rate ? scale : 0.f;
      mask[i0 + j] = mk;
      y[i0 + j] = __fmul_rn(x[i0 + j], mk);
    }
  }
}

__global__ void advance_kernel(unsigned long long* counter, unsigned long long groups, const bool* training) {
  if (training == nullptr || *training) *counter += groups;
}

}  // namespace

cudaError_t launch_fill(float* p, float v, int64_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  fill_kernel<<<blocks_for(n), kThreads, 0, s>>>(p, v, n);
  return cudaGetLastError();
}

cudaError_t launch_transpose2d(const float* in, float* out, int64_t rows, int64_t cols, cudaStream_t s) {
  if (rows * cols == 0) return cudaSuccess;
  transpose2d_kernel<<<blocks_for(rows * cols), kThreads, 0, s>>>(in, out, rows, cols);
  return cudaGetLastError();
}

cudaError_t launch_pad_nhwc(const float* x, float* xp, int64_t n, int64_t h, int64_t w, int64_t c, int64_t pt,
                            int64_t pl, int64_t hp, int64_t wp, cudaStream_t s) {
  const int64_t total = n * hp * wp * c;
  if (total == 0) return cudaSuccess;
  pad_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, xp, n, h, w, c, pt, pl, hp, wp);
  return cudaGetLastError();
}

cudaError_t launch_crop_nhwc(const float* xp, float* x, int64_t n, int64_t h, int64_t w, int64_t c, int64_t pt,
                             int64_t pl, int64_t hp, int64_t wp, cudaStream_t s) {
  const int64_t total = n * h * w * c;
  if (total == 0) return cudaSuccess;
  crop_kernel<<<blocks_for(total), kThreads, 0, s>>>(xp, x, n, h, w, c, pt, pl, hp, wp);
  return cudaGetLastError();
}

cudaError_t launch_max_pool(const float* x, float* y, const PoolGeom& g, cudaStream_t s) {
  const int64_t total = g.n * g.oh * g.ow * g.c;
  if (total == 0) return cudaSuccess;
  max_pool_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, y, g);
  return cudaGetLastError();
}

cudaError_t launch_avg_pool(const float* x, float* y, const PoolGeom& g, cudaStream_t s) {
  const int64_t total = g.n * g.oh * g.ow * g.c;
  if (total == 0) return cudaSuccess;
  avg_pool_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, y, g);
  return cudaGetLastError();
}

cudaError_t launch_max_pool_grad(const float* x, const float* dy, float* dx, const PoolGeom& g, cudaStream_t s) {
  const int64_t total = g.n * g.h * g.w * g.c;
  if (total == 0) return cudaSuccess;
  max_pool_grad_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, dy, dx, g);
  return cudaGetLastError();
}

cudaError_t launch_avg_pool_grad(const float* dy, float* dx, const PoolGeom& g, cudaStream_t s) {
  const int64_t total = g.n * g.h * g.w * g.c;
  if (total == 0) return cudaSuccess;
  avg_pool_grad_kernel<<<blocks_for(total), kThreads, 0, s>>>(dy, dx, g);
  return cudaGetLastError();
}

cudaError_t launch_bn_stat_grads(const float* x, const float* mean, const float* gm, const float* gv, float* dx,
                                 int64_t m, int64_t c, cudaStream_t s) {
  if (m * c == 0) return cudaSuccess;
  bn_stat_grads_kernel<<<blocks_for(m * c), kThreads, 0, s>>>(x, mean, gm, gv, dx, m, c);
  return cudaGetLastError();
}

cudaError_t launch_bn_inference_grad(const float* dy, const float* x, const float* scale, const float* mean,
                                     const float* var, const float* gm, const float* gv, float* dx, float* dscale,
                                     float* doffset, float* dmean, float* dvar, int64_t m, int64_t c, double epsilon,
                                     cudaStream_t s) {
  if (c == 0) return cudaSuccess;
  const int blocks = static_cast<int>(c < 65536 ? c : 65536);
  bn_inference_sums_kernel<<<blocks, kThreads, 0, s>>>(dy, x, scale, mean, var, gm, gv, dscale, doffset, dmean, dvar,
                                                       m, c, epsilon);
  if (m * c > 0) bn_inference_dx_kernel<<<blocks_for(m * c), kThreads, 0, s>>>(dy, scale, var, dx, m, c, epsilon);
  return cudaGetLastError();
}

cudaError_t launch_dropout(const float* x, float* y, float* mask, int64_t n, uint32_t key0, uint32_t key1,
                           double rate, float scale, unsigned long long* counter, const bool* training,
                           cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  const int64_t groups = (n + 3) / 4;
  dropout_kernel<<<blocks_for(groups), kThreads, 0, s>>>(x, y, mask, n, key0, key1, rate, scale, counter, training);
  advance_kernel<<<1, 1, 0, s>>>(counter, static_cast<unsigned long long>(groups), training);
  return cudaGetLastError();
}

}  // namespace actorflow::gpu
