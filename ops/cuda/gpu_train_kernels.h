// Launchers of the CUDA kernels that training needs (gpu_train_kernels.cu), for the
// OpKernels of gpu_training.cpp: losses and their gradients, BiasAddGrad, comparisons
// and Select (the relu gradient is where(x > 0, g, 0)), BroadcastReduced (the gradient
// of Sum and Mean), Cast, fills and the optimizers' dense updates. Plain structs only:
// compiled by both nvcc and g++.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/gpu_kernels.h"

namespace actorflow::gpu {

// Output dims and the element strides of up to three inputs (0 where broadcast).
struct Broadcast3Dims {
  int rank = 0;
  int64_t n = 0;
  int64_t dims[kMaxDims] = {};
  int64_t stride[3][kMaxDims] = {};
};

enum class CompareOp { greater, greater_equal, less, less_equal };
enum class ElemType { f32, i32, i64, boolean };
enum class ApplyRule { gradient_descent, momentum, adagrad, adadelta, rmsprop, adam, ftrl };

// Per rule, as ops/train/apply_kernels.cpp computes them on the host from its scalars.
struct ApplyScalars {
  float a = 0, b = 0, c = 0, d = 0, e = 0;  // rule-specific, see gpu_training.cpp
  bool flag = false;                        // nesterov; for Ftrl: lr_power == -0.5
};

// Per row of [rows, classes] logits: loss = logsumexp(x) - x[label], backprop =
// softmax(x) - onehot(label). Labels are int32 or int64 (labels64). A label outside
// [0, classes) sets *bad (device memory) to 1 and gives NaN for that row.
cudaError_t launch_sparse_xent(const float* logits, const void* labels, bool labels64, float* loss, float* backprop,
                               int64_t rows, int64_t classes, int* bad, cudaStream_t s);
// Dense labels [rows, classes]: loss = sum(labels * (logsumexp(x) - x)), backprop = softmax(x) - labels.
cudaError_t launch_softmax_xent(const float* logits, const float* labels, float* loss, float* backprop, int64_t rows,
                                int64_t classes, cudaStream_t s);
// out[c] = sum of g over every element whose channel ((i / inner) % channels) is c.
cudaError_t launch_bias_add_grad(const float* g, float* out, int64_t n, int64_t channels, int64_t inner,
                                 cudaStream_t s);
cudaError_t launch_compare(CompareOp op, const float* a, const float* b, bool* out, const BroadcastDims& d,
                           cudaStream_t s);
cudaError_t launch_select(const bool* cond, const float* t, const float* e, float* out, const Broadcast3Dims& d,
                          cudaStream_t s);
// out[i] = a[sum_k idx_k * stride_a[k]] * scale over out's dims (stride_b unused).
cudaError_t launch_broadcast_scaled(const float* a, float* out, const BroadcastDims& d, float scale, cudaStream_t s);
cudaError_t launch_cast(ElemType from, const void* x, ElemType to, void* y, int64_t n, cudaStream_t s);
cudaError_t launch_fill(float* y, int64_t n, float value, cudaStream_t s);
// One rule's step on every element of w (and its slots s0, s1 where the rule has them).
cudaError_t launch_apply(ApplyRule rule, const ApplyScalars& k, float* w, float* s0, float* s1, const float* g,
                         int64_t n, cudaStream_t s);

}  // namespace actorflow::gpu
