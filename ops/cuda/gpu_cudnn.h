// Launchers of the CUDA kernels in gpu_cudnn_kernels.cu that work beside cuDNN for the
// OpKernels of gpu_cudnn_*.cpp: layout changes (filter transposes, explicit padding),
// pooling with the CPU kernels' exact rules, the batch-norm terms cuDNN has no call for,
// and dropout's Philox stream. Plain types only: compiled by both nvcc and g++.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace actorflow::gpu {

// p[0, n) = v.
cudaError_t launch_fill(float* p, float v, int64_t n, cudaStream_t s);

// out[c * rows + r] = in[r * cols + c]: [rows, cols] -> [cols, rows]. The conv kernels
// turn the [KH,KW,C,O] filter into cuDNN's [O,KH,KW,C] and back with it.
cudaError_t launch_transpose2d(const float* in, float* out, int64_t rows, int64_t cols, cudaStream_t s);

// NHWC [n, h, w, c] -> [n, h + pt + pb, w + pl + pr, c] with zeros around (TF's SAME
// padding is uneven when the total is odd; cuDNN pads both sides alike), and back.
cudaError_t launch_pad_nhwc(const float* x, float* xp, int64_t n, int64_t h, int64_t w, int64_t c, int64_t pt,
                            int64_t pl, int64_t hp, int64_t wp, cudaStream_t s);
cudaError_t launch_crop_nhwc(const float* xp, float* x, int64_t n, int64_t h, int64_t w, int64_t c, int64_t pt,
                             int64_t pl, int64_t hp, int64_t wp, cudaStream_t s);

// The geometry of a pooling op on NHWC input, as ops/cpu/pool_kernels.cpp's PoolShape.
struct PoolGeom {
  int64_t n = 0, h = 0, w = 0, c = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1;
  int64_t oh = 0, ow = 0, pad_t = 0, pad_l = 0;
};
cudaError_t launch_max_pool(const float* x, float* y, const PoolGeom& g, cudaStream_t s);
cudaError_t launch_avg_pool(const float* x, float* y, const PoolGeom& g, cudaStream_t s);
// dx from dy, each input element gathering the windows that route to it in the CPU
// kernel's order (no atomics: the sums are deterministic).
cudaError_t launch_max_pool_grad(const float* x, const float* dy, float* dx, const PoolGeom& g, cudaStream_t s);
cudaError_t launch_avg_pool_grad(const float* dy, float* dx, const PoolGeom& g, cudaStream_t s);

// Batch norm over x [m, c] (channels last).
// dx += 2 * gv[c] / max(m - 1, 1) * (x - mean[c]) + gm[c] / m: the gradients flowing into
// FusedBatchNorm's batch mean and (Bessel-corrected) variance outputs, in training.
cudaError_t launch_bn_stat_grads(const float* x, const float* mean, const float* gm, const float* gv, float* dx,
                                 int64_t m, int64_t c, cudaStream_t s);
// The inference-mode FusedBatchNormGrad (cuDNN's backward is for training only):
// dx = scale * rstd * dy, dscale = sum(dy * (x - mean) * rstd), doffset = sum(dy),
// dmean = -scale * rstd * sum(dy) + gm, dvar = -scale * rstd^2 * dscale / 2 + gv
// (gm, gv may be null), rstd = 1 / sqrt(var + epsilon). Sums in double, as the CPU.
cudaError_t launch_bn_inference_grad(const float* dy, const float* x, const float* scale, const float* mean,
                                     const float* var, const float* gm, const float* gv, float* dx, float* dscale,
                                     float* doffset, float* dmean, float* dvar, int64_t m, int64_t c, double epsilon,
                                     cudaStream_t s);

// Dropout(x, training): element i is kept when uniform_i >= rate (ops/cpu/dropout_kernels.cpp),
// uniform_i from Philox4x32-10 block (*counter + i / 4) under key. `training` is a device
// bool or null (training); when false, y = x and mask = 1, and the counter stays. After
// the draw *counter advances by the groups drawn, on the stream, so successive runs draw
// fresh masks in the CPU kernel's order.
cudaError_t launch_dropout(const float* x, float* y, float* mask, int64_t n, uint32_t key0, uint32_t key1,
                           double rate, float scale, unsigned long long* counter, const bool* training,
                           cudaStream_t s);

}  // namespace actorflow::gpu
