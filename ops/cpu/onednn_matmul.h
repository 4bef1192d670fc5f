// f32 matrix products through oneDNN (the library TensorFlow and PyTorch use on CPUs),
// beside the Eigen contraction of matmul_kernels.cpp, and the choice between the two.
// Without oneDNN at configure time (AF_HAVE_ONEDNN undefined) everything here still
// links: onednn_available() is false and the automatic choice is always Eigen.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

#include "actorflow/tensor.h"

namespace actorflow {
class DeviceContext;
}
#ifdef AF_HAVE_ONEDNN
namespace dnnl {
struct engine;
}
#endif

namespace actorflow::cpu {

// c[m,n] = op(a) * op(b), row-major. lda/ldb/ldc are the row strides of a, b and c as
// stored (a is [k,m] when ta, else [m,k]); 0 means packed.
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  int64_t lda = 0, ldb = 0, ldc = 0;
  // Operands rounded to bfloat16, sums in float32 (compute_type bfloat16), where
  // onednn_bf16_available(); float32 elsewhere.
  bool bf16 = false;
  // In bfloat16, the buffers a and b lie in, when known: a variable's operand is then read
  // from its kept bfloat16 mirror (bf16_mirror.h) instead of being converted per call.
  std::shared_ptr<Buffer> a_source, b_source;
  int64_t macs() const { return m * n * k; }
  int64_t a_stride() const { return lda ? lda : (ta ? m : k); }
  int64_t b_stride() const { return ldb ? ldb : (tb ? k : n); }
  int64_t c_stride() const { return ldc ? ldc : n; }
};

bool onednn_available();
#ifdef AF_HAVE_ONEDNN
// The CPU engine all of this process's oneDNN primitives and reorders run on.
dnnl::engine& onednn_engine();
#endif
// Whether oneDNN is in and this processor has AMX, its bfloat16 matrix units: only there
// do bfloat16 operands pay. Elsewhere oneDNN emulates them or, with AVX512-BF16 alone,
// multiplies them no faster than float32 and converts them on top (measured 1.5-3x
// slower, onednn_matmul.cpp), so the kernels asked for bfloat16 run float32 there.
bool onednn_bf16_available();

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

// Multiply-adds (2^23) from which MatMul and _FusedMatMul band one f32 oneDNN product
// over the device's pool threads, one single-threaded primitive per band; smaller
// products run on the calling thread. (Eigen's contraction, f64 and the fallbacks, is
// threaded from 2^24 as before.)
int64_t threaded_product_macs();

// Band i of `bands` of the product `whole`: its shape (strides of the whole kept) and
// where its a, b, c and bias start, in elements. Products of 2^24 multiply-adds and up are
// cut into one band per thread, of columns when n >= m and of rows otherwise (a band of
// rows reads all of b, one of columns all of a: the larger operand is read once); smaller
// ones (from threaded_product_macs) into two bands of columns whatever the pool's threads, so that
// their bits (an MLP training step's 64x784x256 products and gradients: the samples'
// figures) do not depend on how many threads run them. (That the column bands also give
// one primitive's bits held on AVX2 machines, not on AVX-512 ones, where oneDNN blocks a
// half-width product differently: tests/ops/test_ops_matmul.cpp checks threads, not that.)
struct GemmBand {
  GemmShape shape;
  int64_t a_offset = 0, b_offset = 0, c_offset = 0, bias_offset = 0;
};
GemmBand gemm_band(const GemmShape& whole, int64_t i, int64_t bands);
// How many bands `threads` pool threads cut `whole` into (at most one per row or column):
// one per thread from 2^24 multiply-adds, else two (fixed_bands).
int64_t gemm_bands(const GemmShape& whole, int threads);
// True when `whole` (from threaded_product_macs) is cut into the same bands on any number
// of threads, one thread included: its bits do not depend on the pool's size.
bool fixed_bands(const GemmShape& whole);

// Runs band(i) for every i in [0, bands) on the calling thread and up to bands - 1 of the
// device's pool threads, each claiming the next band from a shared counter. The caller
// waits only for bands that another thread has claimed and is running: a pool thread
// that starts late (asleep, or preempted by another process on a loaded machine) leaves
// its bands to the caller instead of holding the product at a barrier, and a late task
// finds nothing left to do. False if a band returned false or threw. (matmul_kernels.cpp)
bool run_bands(const DeviceContext* device, int64_t bands, const std::function<bool(int64_t)>& band);

// The Eigen contraction MatMul runs when oneDNN is not chosen, single-threaded (packed
// operands, lda/ldb ignored): for benchmarks comparing the two kernels without a session.
void eigen_gemm_f32(const GemmShape& g, const float* a, const float* b, float* c);

// Primitives currently cached (tests check that a repeated shape reuses its primitive).
int64_t onednn_cached_primitives();

}  // namespace actorflow::cpu
