// f32 matrix products through oneDNN (the library TensorFlow and PyTorch use on CPUs),
// beside the Eigen contraction of matmul_kernels.cpp, and the choice between the two.
// Without oneDNN at configure time (AF_HAVE_ONEDNN undefined) everything here still
// links: onednn_available() is false and the automatic choice is always Eigen.
#pragma once
#include <cstdint>

namespace actorflow::cpu {

// c[m,n] = op(a) * op(b), row-major. lda/ldb are the row strides of a and b as stored
// (a is [k,m] when ta, else [m,k]); 0 means packed. c is packed [m,n].
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  int64_t lda = 0, ldb = 0;
  int64_t macs() const { return m * n * k; }
  int64_t a_stride() const { return lda ? lda : (ta ? m : k); }
  int64_t b_stride() const { return ldb ? ldb : (tb ? k : n); }
};

bool onednn_available();

// c = op(a) * op(b) (+ bias[n] on every row) (then relu), through a oneDNN matmul
// primitive cached per shape and post-ops (the cache is shared by all threads). Runs on
// the calling thread only: oneDNN here is built on OpenMP, whose own team beside our
// intra-op pool would put four busy threads on two cores, so callers shard rows over our
// pool instead (see matmul_kernels.cpp). Returns false (c untouched) when oneDNN is not
// built in or rejects the shape.
bool onednn_gemm_f32(const GemmShape& g, const float* a, const float* b, const float* bias, bool relu, float* c);

// Which implementation MatMul's f32 kernel uses. `automatic` picks per shape class by
// the thresholds below; the others force one (benchmarks and tests compare them).
enum class MatmulBackend { automatic, eigen, onednn };
void set_matmul_backend(MatmulBackend b);
MatmulBackend matmul_backend();

// The automatic choice for one product of this shape on `threads` pool threads: true
// when oneDNN is available and measured faster for its shape class: two rows or more and
// at least 2^17 multiply-adds (2^16 with a transpose); see onednn_matmul.cpp and
// bench/README.md, "Matmul backends".
bool prefer_onednn(const GemmShape& g, int threads);

// The Eigen contraction MatMul runs when oneDNN is not chosen, single-threaded (packed
// operands, lda/ldb ignored): for benchmarks comparing the two kernels without a session.
void eigen_gemm_f32(const GemmShape& g, const float* a, const float* b, float* c);

// Primitives currently cached (tests check that a repeated shape reuses its primitive).
int64_t onednn_cached_primitives();

}  // namespace actorflow::cpu
