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
// GB/s of a + b on two f32 tensors of `elements` (3 x 4 bytes moved per element).
TorchSide torch_add(int64_t elements, int reps);
// GB/s of sum() over f32 `elements` (4 bytes read per element).
TorchSide torch_sum(int64_t elements, int reps);

}  // namespace peers

namespace peers {

// Fashion-MNIST MLP 784-256-128-10 (ReLU), SGD lr 0.1, cross entropy, on the given
// batches (x: f32 [B,784] rows, y: class ids): seconds per `steps` training steps.
TorchSide torch_mlp_training(const std::vector<const float*>& xs, const std::vector<const int64_t*>& ys, int64_t batch,
                             int steps);

}  // namespace peers
