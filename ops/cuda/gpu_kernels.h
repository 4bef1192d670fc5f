// Launchers of the f32 CUDA kernels in gpu_elementwise.cu, for the OpKernels in
// gpu_kernels.cpp. Plain structs only: this header is compiled by both nvcc and g++.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace actorflow::gpu {

inline constexpr int kMaxDims = 8;

enum class UnaryOp { neg, abs, sign, square, relu, exp, log, sqrt, rsqrt, sigmoid, tanh, softplus };
enum class BinaryOp { add, sub, mul, div, pow, maximum, minimum, squared_difference };

// Collapsed output dims and, per input, the element stride of each (0 where broadcast).
struct BroadcastDims {
  int rank = 0;
  int64_t n = 0;
  int64_t dims[kMaxDims] = {};
  int64_t stride_a[kMaxDims] = {};
  int64_t stride_b[kMaxDims] = {};
  bool same_shape = false;  // both inputs laid out as the output: no index arithmetic
};

// The input split into kept dims (one per output element) and reduced dims, with the
// input's element strides of each.
struct ReduceDims {
  int kept_rank = 0, reduced_rank = 0;
  int64_t kept[kMaxDims] = {}, kept_stride[kMaxDims] = {};
  int64_t reduced[kMaxDims] = {}, reduced_stride[kMaxDims] = {};
  int64_t out_n = 0, reduced_n = 0;
};

cudaError_t launch_unary(UnaryOp op, const float* x, float* y, int64_t n, cudaStream_t s);
cudaError_t launch_binary(BinaryOp op, const float* a, const float* b, float* out, const BroadcastDims& d,
                          cudaStream_t s);
// y = x + bias[(i / inner) % channels]: inner is 1 for channels-last (NHWC).
cudaError_t launch_bias_add(const float* x, const float* bias, float* y, int64_t n, int64_t channels, int64_t inner,
                            cudaStream_t s);
// Sum (or mean, dividing by reduced_n) of each output's elements.
cudaError_t launch_reduce(bool mean, const float* x, float* y, const ReduceDims& d, cudaStream_t s);

}  // namespace actorflow::gpu
