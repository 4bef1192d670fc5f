// f32 elementwise, bias and reduction kernels. One templated kernel per op keeps the
// inner loops free of switches; grid-stride loops cover any size with a bounded grid.
#include <cmath>

#include "cuda/gpu_kernels.h"

namespace actorflow::gpu {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  // Past this, each thread takes several elements; enough blocks to fill any GPU.
  return static_cast<int>(b < 65536 ? (b > 0 ? b : 1) : 65536);
}

template <UnaryOp Op>
__device__ __forceinline__ float unary(float x) {
  if constexpr (Op == UnaryOp::neg) return -x;
  if constexpr (Op == UnaryOp::abs) return fabsf(x);
  if constexpr (Op == UnaryOp::sign) return x > 0.f ? 1.f : (x < 0.f ? -1.f : x);
  if constexpr (Op == UnaryOp::square) return x * x;
  if constexpr (Op == UnaryOp::relu) return x > 0.f ? x : 0.f;
  if constexpr (Op == UnaryOp::exp) return expf(x);
  if constexpr (Op == UnaryOp::log) return logf(x);
  if constexpr (Op == UnaryOp::sqrt) return sqrtf(x);
  if constexpr (Op == UnaryOp::rsqrt) return rsqrtf(x);
  if constexpr (Op == UnaryOp::sigmoid) return 1.f / (1.f + expf(-x));
  if constexpr (Op == UnaryOp::tanh) return tanhf(x);
  // log(1 + e^x) without overflow for large x.
  if constexpr (Op == UnaryOp::softplus) return x > 20.f ? x : log1pf(expf(x));
  return x;
}

template <BinaryOp Op>
__device__ __forceinline__ float binary(float a, float b) {
  if constexpr (Op == BinaryOp::add) return a + b;
  if constexpr (Op == BinaryOp::sub) return a - b;
  if constexpr (Op == BinaryOp::mul) return a * b;
  if constexpr (Op == BinaryOp::div) return a / b;
  if constexpr (Op == BinaryOp::pow) return powf(a, b);
  if constexpr (Op == BinaryOp::maximum) return fmaxf(a, b);
  if constexpr (Op == BinaryOp::minimum) return fminf(a, b);
  if constexpr (Op == BinaryOp::squared_difference) return (a - b) * (a - b);
  return a;
}

template <UnaryOp Op>
__global__ void unary_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = unary<Op>(x[i]);
}

template <BinaryOp Op>
__global__ void binary_same_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out,
                                   int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = binary<Op>(a[i], b[i]);
}

template <BinaryOp Op>
__global__ void binary_broadcast_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                        float* __restrict__ out, BroadcastDims d) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < d.n; i += int64_t{gridDim.x} * blockDim.x) {
    int64_t rem = i, ia = 0, ib = 0;
    for (int k = d.rank - 1; k >= 0; --k) {
      const int64_t idx = rem % d.dims[k];
      rem /= d.dims[k];
      ia += idx * d.stride_a[k];
      ib += idx * d.stride_b[k];
    }
    out[i] = binary<Op>(a[ia], b[ib]);
  }
}

__global__ void bias_add_kernel(const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ y,
                                int64_t n, int64_t channels, int64_t inner) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    y[i] = x[i] + bias[(i / inner) % channels];
}

// One block per output element: threads stride over its reduced elements, then the
// block adds the partial sums (warp shuffles, then one value per warp).
__global__ void reduce_kernel(const float* __restrict__ x, float* __restrict__ y, ReduceDims d, bool mean) {
  __shared__ float warp_sums[kThreads / 32];
  for (int64_t o = blockIdx.x; o < d.out_n; o += gridDim.x) {
    int64_t base = 0, rem = o;
    for (int k = d.kept_rank - 1; k >= 0; --k) {
      base += (rem % d.kept[k]) * d.kept_stride[k];
      rem /= d.kept[k];
    }
    float sum = 0.f;
    for (int64_t r = threadIdx.x; r < d.reduced_n; r += blockDim.x) {
      int64_t off = 0, rr = r;
      for (int k = d.reduced_rank - 1; k >= 0; --k) {
        off += (rr % d.reduced[k]) * d.reduced_stride[k];
        rr /= d.reduced[k];
      }
      sum += x[base + off];
    }
    for (int s = 16; s > 0; s >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, s);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = sum;
    __syncthreads();
    if (threadIdx.x < 32) {
      sum = threadIdx.x < blockDim.x / 32 ? warp_sums[threadIdx.x] : 0.f;
      for (int s = 16; s > 0; s >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, s);
      // 0/0 gives NaN for the mean of nothing, as on the CPU.
      if (threadIdx.x == 0) y[o] = mean ? sum / static_cast<float>(d.reduced_n) : sum;
    }
    __syncthreads();  // warp_sums is reused by the next output
  }
}

template <UnaryOp Op>
void run_unary(const float* x, float* y, int64_t n, cudaStream_t s) {
  unary_kernel<Op><<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
}

template <BinaryOp Op>
void run_binary(const float* a, const float* b, float* out, const BroadcastDims& d, cudaStream_t s) {
  if (d.same_shape) binary_same_kernel<Op><<<blocks_for(d.n), kThreads, 0, s>>>(a, b, out, d.n);
  else binary_broadcast_kernel<Op><<<blocks_for(d.n), kThreads, 0, s>>>(a, b, out, d);
}

}  // namespace

cudaError_t launch_unary(UnaryOp op, const float* x, float* y, int64_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  switch (op) {
    case UnaryOp::neg: run_unary<UnaryOp::neg>(x, y, n, s); break;
    case UnaryOp::abs: run_unary<UnaryOp::abs>(x, y, n, s); break;
    case UnaryOp::sign: run_unary<UnaryOp::sign>(x, y, n, s); break;
    case UnaryOp::square: run_unary<UnaryOp::square>(x, y, n, s); break;
    case UnaryOp::relu: run_unary<UnaryOp::relu>(x, y, n, s); break;
    case UnaryOp::exp: run_unary<UnaryOp::exp>(x, y, n, s); break;
    case UnaryOp::log: run_unary<UnaryOp::log>(x, y, n, s); break;
    case UnaryOp::sqrt: run_unary<UnaryOp::sqrt>(x, y, n, s); break;
    case UnaryOp::rsqrt: run_unary<UnaryOp::rsqrt>(x, y, n, s); break;
    case UnaryOp::sigmoid: run_unary<UnaryOp::sigmoid>(x, y, n, s); break;
    case UnaryOp::tanh: run_unary<UnaryOp::tanh>(x, y, n, s); break;
    case UnaryOp::softplus: run_unary<UnaryOp::softplus>(x, y, n, s); break;
  }
  return cudaGetLastError();
}

cudaError_t launch_binary(BinaryOp op, const float* a, const float* b, float* out, const BroadcastDims& d,
                          cudaStream_t s) {
  if (d.n == 0) return cudaSuccess;
  switch (op) {
    case BinaryOp::add: run_binary<BinaryOp::add>(a, b, out, d, s); break;
    case BinaryOp::sub: run_binary<BinaryOp::sub>(a, b, out, d, s); break;
    case BinaryOp::mul: run_binary<BinaryOp::mul>(a, b, out, d, s); break;
    case BinaryOp::div: run_binary<BinaryOp::div>(a, b, out, d, s); break;
    case BinaryOp::pow: run_binary<BinaryOp::pow>(a, b, out, d, s); break;
    case BinaryOp::maximum: run_binary<BinaryOp::maximum>(a, b, out, d, s); break;
    case BinaryOp::minimum: run_binary<BinaryOp::minimum>(a, b, out, d, s); break;
    case BinaryOp::squared_difference: run_binary<BinaryOp::squared_difference>(a, b, out, d, s); break;
  }
  return cudaGetLastError();
}

cudaError_t launch_bias_add(const float* x, const float* bias, float* y, int64_t n, int64_t channels, int64_t inner,
                            cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  bias_add_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, bias, y, n, channels, inner);
  return cudaGetLastError();
}

cudaError_t launch_reduce(bool mean, const float* x, float* y, const ReduceDims& d, cudaStream_t s) {
  if (d.out_n == 0) return cudaSuccess;
  const int blocks = static_cast<int>(d.out_n < 65536 ? d.out_n : 65536);
  reduce_kernel<<<blocks, kThreads, 0, s>>>(x, y, d, mean);
  return cudaGetLastError();
}

}  // namespace actorflow::gpu
