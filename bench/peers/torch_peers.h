// The libtorch side of the benchmarks, compiled in its own translation unit (torch's
// headers are heavy) and exposed through plain functions. Each returns a sampler that
// runs `reps` operations and returns the case's unit, plus the thread settings in words.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace peers {

struct TorchSide {
  std::function<double()> sample;
  std::string threads;
};

// Sets libtorch's intra-op threads (at::set_num_threads) for every peer below.
void torch_set_threads(int n);

// Microseconds per eager scalar add in a chain of `n` adds, averaged over `reps` chains.
TorchSide torch_scalar_chain(int n, int reps);
// Microseconds per eager call of one op (neg) on a scalar, averaged over `reps` calls.
TorchSide torch_one_op(int reps);
// GFLOP/s of torch::mm on f32 [n,n] x [n,n], `reps` products per sample. OpenBLAS runs
// with `blas_threads` threads during the case (openblas_set_num_threads), then goes back
// to what OPENBLAS_NUM_THREADS set.
TorchSide torch_matmul(int64_t n, int reps, int blas_threads);
// GB/s of a + b on two f32 tensors of `elements` (3 x 4 bytes moved per element), written
// by torch::add_out into one output reused across ops.
TorchSide torch_add(int64_t elements, int reps);
// GB/s of sum() over f32 `elements` (4 bytes read per element).
TorchSide torch_sum(int64_t elements, int reps);

}  // namespace peers

namespace peers {

// Fashion-MNIST MLP 784-256-128-10 (ReLU), SGD lr 0.1, cross entropy, on the given
// batches (x: f32 [B,784] rows, y: class ids): seconds per `steps` training steps.
TorchSide torch_mlp_training(const std::vector<const float*>& xs, const std::vector<const int64_t*>& ys, int64_t batch,
                             int steps);

// Fashion-MNIST CNN as samples/fashion_mnist --model cnn builds it (NCHW here): conv 5x5
// 32 (padding 2) relu, max pool 2x2/2, conv 5x5 64 relu, max pool, linear 3136-1024 relu,
// dropout 0.5 (train mode), linear 1024-10, cross entropy, Adam 1e-3, on the given
// batches (x: f32 [B,784] rows, y: class ids): seconds per `steps` training steps. OpenBLAS
// runs with `blas_threads` threads during a sample (0: as OPENBLAS_NUM_THREADS set it).
// A non-finite loss at the end of a sample fails it.
TorchSide torch_cnn_training(const std::vector<const float*>& xs, const std::vector<const int64_t*>& ys, int64_t batch,
                             int steps, int blas_threads);

// The MLP 784-256-128-10 (ReLU) forward with the given weights (kernels [in,out] row-major
// as ActorFlow stores them, biases), then argmax over the 10 logits, under NoGradGuard, on
// x (f32 [batch,784]): microseconds per forward, averaged over `reps`. The predictions are
// checked against `expected` (ties aside). OpenBLAS threads as torch_cnn_training.
TorchSide torch_mlp_inference(const std::vector<std::vector<float>>& kernels, const std::vector<std::vector<float>>& biases,
                              const float* x, int64_t batch, const std::vector<int64_t>& expected, int reps,
                              int blas_threads);

}  // namespace peers
