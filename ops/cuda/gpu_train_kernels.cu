// The CUDA kernels of gpu_train_kernels.h. Softmax rows use one block each (a block-wide
// max and sum in shared memory); everything else is a grid-stride loop.
#include <cmath>

#include "cuda/gpu_train_kernels.h"

namespace actorflow::gpu {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65536 ? (b > 0 ? b : 1) : 65536);
}

#define AF_GRID_LOOP(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

// Block-wide reduction of one value per thread (kThreads threads).
template <bool Max>
__device__ float block_reduce(float v, float* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) {
      const float o = shared[threadIdx.x + w];
      shared[threadIdx.x] = Max ? fmaxf(shared[threadIdx.x], o) : shared[threadIdx.x] + o;
    }
    __syncthreads();
  }
  const float r = shared[0];
  __syncthreads();
  return r;
}

template <typename L>
__global__ void sparse_xent_kernel(const float* __restrict__ logits, const L* __restrict__ labels, float* loss,
                                   float* backprop, int64_t classes, int* bad) {
  __shared__ float shared[kThreads];
  const int64_t row = blockIdx.x;
  const float* x = logits + row * classes;
  float* bp = backprop + row * classes;
  const L label = labels[row];
  const bool ok = label >= 0 && static_cast<int64_t>(label) < classes;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < classes; j += kThreads) m = fmaxf(m, x[j]);
  m = block_reduce<true>(m, shared);
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < classes; j += kThreads) sum += expf(x[j] - m);
  sum = block_reduce<false>(sum, shared);
  const float log_sum = logf(sum);
  for (int64_t j = threadIdx.x; j < classes; j += kThreads) {
    const float p = expf(x[j] - m) / sum;
    bp[j] = ok ? p - (j == static_cast<int64_t>(label) ? 1.f : 0.f) : NAN;
  }
  if (threadIdx.x == 0) {
    if (ok) {
      loss[row] = log_sum - (x[label] - m);
    } else {
      loss[row] = NAN;
      *bad = 1;
    }
  }
}

__global__ void softmax_xent_kernel(const float* __restrict__ logits, const float* __restrict__ labels, float* loss,
                                    float* backprop, int64_t classes) {
  __shared__ float shared[kThreads];
  const int64_t row = blockIdx.x;
  const float* x = logits + row * classes;
  const float* z = labels + row * classes;
  float* bp = backprop + row * classes;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < classes; j += kThreads) m = fmaxf(m, x[j]);
  m = block_reduce<true>(m, shared);
  float sum = 0.f;
  for (int64_t j = threadIdx.x; j < classes; j += kThreads) sum += expf(x[j] - m);
  sum = block_reduce<false>(sum, shared);
  const float log_sum = logf(sum);
  float l = 0.f;
  for (int64_t j = threadIdx.x; j < classes; j += kThreads) {
    l += z[j] * (log_sum - (x[j] - m));
    bp[j] = expf(x[j] - m) / sum - z[j];
  }
  l = block_reduce<false>(l, shared);
  if (threadIdx.x == 0) loss[row] = l;
}

// One block per channel; its threads stride over the channel's elements.
__global__ void bias_add_grad_kernel(const float* __restrict__ g, float* out, int64_t n, int64_t channels,
                                     int64_t inner) {
  __shared__ float shared[kThreads];
  const int64_t c = blockIdx.x;
  const int64_t per = channels * inner;  // elements between two runs of this channel
  const int64_t runs = per == 0 ? 0 : n / per;
  float acc = 0.f;
  for (int64_t k = threadIdx.x; k < runs * inner; k += kThreads) {
    const int64_t run = k / inner, j = k % inner;
    acc += g[run * per + c * inner + j];
  }
  acc = block_reduce<false>(acc, shared);
  if (threadIdx.x == 0) out[c] = acc;
}

__device__ __forceinline__ int64_t offset_of(int64_t i, int rank, const int64_t* dims, const int64_t* stride) {
  int64_t off = 0;
  for (int d = rank - 1; d >= 0; --d) {
    const int64_t idx = i % dims[d];
    i /= dims[d];
    off += idx * stride[d];
  }
  return off;
}

template <CompareOp Op>
__global__ void compare_kernel(const float* a, const float* b, bool* out, BroadcastDims d) {
  AF_GRID_LOOP(i, d.n) {
    const float x = a[d.same_shape ? i : offset_of(i, d.rank, d.dims, d.stride_a)];
    const float y = b[d.same_shape ? i : offset_of(i, d.rank, d.dims, d.stride_b)];
    bool r;
    if constexpr (Op == CompareOp::greater) r = x > y;
    else if constexpr (Op == CompareOp::greater_equal) r = x >= y;
    else if constexpr (Op == CompareOp::less) r = x < y;
    else r = x <= y;
    out[i] = r;
  }
}

__global__ void select_kernel(const bool* cond, const float* t, const float* e, float* out, Broadcast3Dims d) {
  AF_GRID_LOOP(i, d.n) {
    const bool c = cond[offset_of(i, d.rank, d.dims, d.stride[0])];
    out[i] = c ? t[offset_of(i, d.rank, d.dims, d.stride[1])] : e[offset_of(i, d.rank, d.dims, d.stride[2])];
  }
}

__global__ void broadcast_scaled_kernel(const float* a, float* out, BroadcastDims d, float scale) {
  AF_GRID_LOOP(i, d.n) out[i] = a[offset_of(i, d.rank, d.dims, d.stride_a)] * scale;
}

template <typename From, typename To>
__global__ void cast_kernel(const From* x, To* y, int64_t n) {
  AF_GRID_LOOP(i, n) {
    if constexpr (std::is_same_v<To, bool>) y[i] = x[i] != From(0);
    else y[i] = static_cast<To>(x[i]);
  }
}

__global__ void fill_kernel(float* y, int64_t n, float v) {
  AF_GRID_LOOP(i, n) y[i] = v;
}

// The rules of ops/train/apply_kernels.cpp, in float.
template <ApplyRule R>
__global__ void apply_kernel(ApplyScalars k, float* __restrict__ w, float* __restrict__ s0, float* __restrict__ s1,
                             const float* __restrict__ g, int64_t n) {
  AF_GRID_LOOP(i, n) {
    const float gi = g[i];
    if constexpr (R == ApplyRule::gradient_descent) {
      w[i] -= k.a * gi;
    } else if constexpr (R == ApplyRule::momentum) {
      // a = lr, b = momentum
      const float acc = s0[i] * k.b + gi;
      s0[i] = acc;
      if (k.flag) w[i] -= gi * k.a + acc * k.b * k.a;
      else w[i] -= k.a * acc;
    } else if constexpr (R == ApplyRule::adagrad) {
      const float acc = s0[i] + gi * gi;
      s0[i] = acc;
      w[i] -= k.a * gi / sqrtf(acc);
    } else if constexpr (R == ApplyRule::adadelta) {
      // a = lr, b = rho, c = epsilon
      const float acc = s0[i] * k.b + gi * gi * (1.f - k.b);
      s0[i] = acc;
      const float update = sqrtf(s1[i] + k.c) / sqrtf(acc + k.c) * gi;
      s1[i] = s1[i] * k.b + update * update * (1.f - k.b);
      w[i] -= update * k.a;
    } else if constexpr (R == ApplyRule::rmsprop) {
      // a = lr, b = rho, c = momentum, d = epsilon
      float ms = s0[i];
      ms += (gi * gi - ms) * (1.f - k.b);
      s0[i] = ms;
      const float mom = s1[i] * k.c + k.a * gi / sqrtf(ms + k.d);
      s1[i] = mom;
      w[i] -= mom;
    } else if constexpr (R == ApplyRule::adam) {
      // a = lr_t, b = beta1, c = beta2, d = epsilon
      float m = s0[i], v = s1[i];
      m += (gi - m) * (1.f - k.b);
      v += (gi * gi - v) * (1.f - k.c);
      s0[i] = m;
      s1[i] = v;
      const float num = k.flag ? m * k.b + (1.f - k.b) * gi : m;
      w[i] -= k.a * num / (sqrtf(v) + k.d);
    } else {
      // Ftrl: a = lr, b = l1, c = l2, d = lr_power
      const float acc = s0[i], acc_new = acc + gi * gi;
      const float pow_new = k.flag ? sqrtf(acc_new) : powf(acc_new, -k.d);
      const float pow_old = k.flag ? sqrtf(acc) : powf(acc, -k.d);
      float lin = s1[i] + gi - (pow_new - pow_old) / k.a * w[i];
      s1[i] = lin;
      const float quadratic = pow_new / k.a + 2.f * k.c;
      w[i] = fabsf(lin) > k.b ? ((lin > 0 ? k.b : -k.b) - lin) / quadratic : 0.f;
      s0[i] = acc_new;
    }
  }
}

}  // namespace

cudaError_t launch_sparse_xent(const float* logits, const void* labels, bool labels64, float* loss, float* backprop,
                               int64_t rows, int64_t classes, int* bad, cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>(rows);
  if (labels64)
    sparse_xent_kernel<int64_t><<<grid, kThreads, 0, s>>>(logits, static_cast<const int64_t*>(labels), loss, backprop,
                                                          classes, bad);
  else
    sparse_xent_kernel<int32_t><<<grid, kThreads, 0, s>>>(logits, static_cast<const int32_t*>(labels), loss, backprop,
                                                          classes, bad);
  return cudaGetLastError();
}

cudaError_t launch_softmax_xent(const float* logits, const float* labels, float* loss, float* backprop, int64_t rows,
                                int64_t classes, cudaStream_t s) {
  if (rows == 0) return cudaSuccess;
  softmax_xent_kernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(logits, labels, loss, backprop, classes);
  return cudaGetLastError();
}

cudaError_t launch_bias_add_grad(const float* g, float* out, int64_t n, int64_t channels, int64_t inner,
                                 cudaStream_t s) {
  if (channels == 0) return cudaSuccess;
  bias_add_grad_kernel<<<static_cast<unsigned>(channels), kThreads, 0, s>>>(g, out, n, channels, inner);
  return cudaGetLastError();
}

cudaError_t launch_compare(CompareOp op, const float* a, const float* b, bool* out, const BroadcastDims& d,
                           cudaStream_t s) {
  if (d.n == 0) return cudaSuccess;
  const int grid = blocks_for(d.n);
  switch (op) {
    case CompareOp::greater: compare_kernel<CompareOp::greater><<<grid, kThreads, 0, s>>>(a, b, out, d); break;
    case CompareOp::greater_equal: compare_kernel<CompareOp::greater_equal><<<grid, kThreads, 0, s>>>(a, b, out, d); break;
    case CompareOp::less: compare_kernel<CompareOp::less><<<grid, kThreads, 0, s>>>(a, b, out, d); break;
    case CompareOp::less_equal: compare_kernel<CompareOp::less_equal><<<grid, kThreads, 0, s>>>(a, b, out, d); break;
  }
  return cudaGetLastError();
}

cudaError_t launch_select(const bool* cond, const float* t, const float* e, float* out, const Broadcast3Dims& d,
                          cudaStream_t s) {
  if (d.n == 0) return cudaSuccess;
  select_kernel<<<blocks_for(d.n), kThreads, 0, s>>>(cond, t, e, out, d);
  return cudaGetLastError();
}

cudaError_t launch_broadcast_scaled(const float* a, float* out, const BroadcastDims& d, float scale, cudaStream_t s) {
  if (d.n == 0) return cudaSuccess;
  broadcast_scaled_kernel<<<blocks_for(d.n), kThreads, 0, s>>>(a, out, d, scale);
  return cudaGetLastError();
}

namespace {
template <typename From>
cudaError_t cast_from(const From* x, ElemType to, void* y, int64_t n, cudaStream_t s) {
  const int grid = blocks_for(n);
  switch (to) {
    case ElemType::f32: cast_kernel<From, float><<<grid, kThreads, 0, s>>>(x, static_cast<float*>(y), n); break;
    case ElemType::i32: cast_kernel<From, int32_t><<<grid, kThreads, 0, s>>>(x, static_cast<int32_t*>(y), n); break;
    case ElemType::i64: cast_kernel<From, int64_t><<<grid, kThreads, 0, s>>>(x, static_cast<int64_t*>(y), n); break;
    case ElemType::boolean: cast_kernel<From, bool><<<grid, kThreads, 0, s>>>(x, static_cast<bool*>(y), n); break;
  }
  return cudaGetLastError();
}
}  // namespace

cudaError_t launch_cast(ElemType from, const void* x, ElemType to, void* y, int64_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  switch (from) {
    case ElemType::f32: return cast_from(static_cast<const float*>(x), to, y, n, s);
    case ElemType::i32: return cast_from(static_cast<const int32_t*>(x), to, y, n, s);
    case ElemType::i64: return cast_from(static_cast<const int64_t*>(x), to, y, n, s);
    case ElemType::boolean: return cast_from(static_cast<const bool*>(x), to, y, n, s);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_fill(float* y, int64_t n, float value, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  fill_kernel<<<blocks_for(n), kThreads, 0, s>>>(y, n, value);
  return cudaGetLastError();
}

cudaError_t launch_apply(ApplyRule rule, const ApplyScalars& k, float* w, float* s0, float* s1, const float* g,
                         int64_t n, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  const int grid = blocks_for(n);
  switch (rule) {
    case ApplyRule::gradient_descent: apply_kernel<ApplyRule::gradient_descent><<<grid, kThreads, 0, s>>>(k, w, s0, s1, g, n); break;
    case ApplyRule::momentum: apply_kernel<ApplyRule::momentum><<<grid, kThreads, 0, s>>>(k, w, s0, s1, g, n); break;
    case ApplyRule::adagrad: apply_kernel<ApplyRule::adagrad><<<grid, kThreads, 0, s>>>(k, w, s0, s1, g, n); break;
    case ApplyRule::adadelta: apply_kernel<ApplyRule::adadelta><<<grid, kThreads, 0, s>>>(k, w, s0, s1, g, n); break;
    case ApplyRule::rmsprop: apply_kernel<ApplyRule::rmsprop><<<grid, kThreads, 0, s>>>(k, w, s0, s1, g, n); break;
    case ApplyRule::adam: apply_kernel<ApplyRule::adam><<<grid, kThreads, 0, s>>>(k, w, s0, s1, g, n); break;
    case ApplyRule::ftrl: apply_kernel<ApplyRule::ftrl><<<grid, kThreads, 0, s>>>(k, w, s0, s1, g, n); break;
  }
  return cudaGetLastError();
}

}  // namespace actorflow::gpu
