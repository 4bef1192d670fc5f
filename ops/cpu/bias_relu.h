// The bias-and-relu epilogue of the fused MatMul and Conv2D kernels, where oneDNN's
// post-ops do not run (f64, shapes it refuses, a build without it): the same arithmetic
// as BiasAdd then Relu, so fused and unfused graphs give the same bits.
#pragma once
#include <cstdint>

namespace actorflow::cpu {

// Rows [0, rows) of y, n values each: y[r, j] += bias[j], then max(0, .) when relu. NaN
// stays NaN, as Relu's kernel leaves it.
template <typename T>
void add_bias_relu_rows(T* y, const T* bias, int64_t rows, int64_t n, bool relu) {
  for (int64_t r = 0; r < rows; ++r) {
    T* yr = y + r * n;
    if (relu) {
      for (int64_t j = 0; j < n; ++j) {
        const T v = yr[j] + bias[j];
        yr[j] = v < T(0) ? T(0) : v;
      }
    } else {
      for (int64_t j = 0; j < n; ++j) yr[j] += bias[j];
    }
  }
}

}  // namespace actorflow::cpu
