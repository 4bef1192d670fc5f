// CPU kernel of MatMul. f32 products go through oneDNN where it measured faster for the
// shape class (cpu/onednn_matmul.h: prefer_onednn), with rows sharded over our pool;
// the rest, and every f64 product, through Eigen's tensor contraction, whose
// ThreadPoolDevice evaluator packs panels and shards them over the device's pool
// (the same GEBP micro-kernels as Eigen's Matrix products, plus threading). Transposes
// are expressed as contraction index pairs (strides for oneDNN), so no operand is ever
// materialized transposed. This is the only matmul translation unit that includes Eigen:
// keep it so.
#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

// GCC 12 reports a false -Wmaybe-uninitialized inside Eigen's AVX-512 packet code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "cpu/compute_type.h"
#include "cpu/eigen_device.h"
#include "cpu/onednn_matmul.h"

namespace actorflow {
namespace {

// Per-matrix multiply-adds above which one matrix is worth the whole pool (Eigen itself
// only starts threading a contraction at about 190^3). Smaller matrices, or batches
// long enough to balance, are sharded over the pool one matrix per thread.
constexpr int64_t kThreadedProduct = int64_t{1} << 22;

struct Gemm {
  int64_t m = 0, n = 0, k = 0;
  bool ta = false, tb = false;
  bool bf16 = false;  // compute_type bfloat16: oneDNN's bfloat16 products (cpu::GemmShape)
  std::shared_ptr<Buffer> a_source, b_source;  // in bfloat16: the operands' buffers (cpu::GemmShape)
  int64_t macs() const { return m * n * k; }
};

// c[m,n] = op(a) * op(b) with naive loops; the j loop is unit-stride in c (and in b when
// !tb) so it vectorizes. Integers only: for floats even 4x4 products are no slower
// through the contraction (measured), and larger ones are far faster.
template <typename T>
void gemm_loops(const Gemm& g, const T* a, const T* b, T* c, int64_t row_begin, int64_t row_end) {
  const int64_t lda = g.ta ? g.m : g.k;
  const int64_t ldb = g.tb ? g.k : g.n;
  for (int64_t i = row_begin; i < row_end; ++i) {
    T* ci = c + i * g.n;
    for (int64_t j = 0; j < g.n; ++j) ci[j] = T(0);
    for (int64_t p = 0; p < g.k; ++p) {
      const T av = g.ta ? a[p * lda + i] : a[i * lda + p];
      if (g.tb) {
        for (int64_t j = 0; j < g.n; ++j) ci[j] = static_cast<T>(ci[j] + av * b[j * ldb + p]);
      } else {
        const T* bp = b + p * ldb;
        for (int64_t j = 0; j < g.n; ++j) ci[j] = static_cast<T>(ci[j] + av * bp[j]);
      }
    }
  }
}

template <typename T>
void gemm_eigen(const Eigen::ThreadPoolDevice& dev, const Gemm& g, const T* a, const T* b, T* c) {
  using ConstMap = Eigen::TensorMap<Eigen::Tensor<const T, 2, Eigen::RowMajor>, Eigen::Unaligned>;
  using Map = Eigen::TensorMap<Eigen::Tensor<T, 2, Eigen::RowMajor>, Eigen::Unaligned>;
  ConstMap ea(a, g.ta ? g.k : g.m, g.ta ? g.m : g.k);
  ConstMap eb(b, g.tb ? g.n : g.k, g.tb ? g.k : g.n);
  Map ec(c, g.m, g.n);
  // Contract a's k axis with b's k axis; the free axes (m of a, then n of b) remain.
  Eigen::array<Eigen::IndexPair<Eigen::Index>, 1> dims{
      {Eigen::IndexPair<Eigen::Index>(g.ta ? 0 : 1, g.tb ? 1 : 0)}};
  ec.device(dev) = ea.contract(eb, dims);
}

// One product: on the whole pool when `dev` has several threads (Eigen's cost model
// still runs small ones inline), single-threaded when it has one.
cpu::GemmShape gemm_shape(const Gemm& g) {
  cpu::GemmShape s;
  s.m = g.m;
  s.n = g.n;
  s.k = g.k;
  s.ta = g.ta;
  s.tb = g.tb;
  s.bf16 = g.bf16;
  s.a_source = g.a_source;
  s.b_source = g.b_source;
  return s;
}

template <typename T>
void gemm_one(const Eigen::ThreadPoolDevice& dev, const Gemm& g, const T* a, const T* b, T* c) {
  if constexpr (std::is_same_v<T, float>) {
    // Single-threaded products only: the threaded oneDNN path shards rows (product()).
    const cpu::GemmShape s = gemm_shape(g);
    if (dev.numThreads() == 1 && cpu::prefer_onednn(s, 1) && cpu::onednn_gemm_f32(s, a, b, nullptr, false, c)) return;
  }
  if constexpr (std::is_floating_point_v<T>) gemm_eigen(dev, g, a, b, c);
  else gemm_loops(g, a, b, c, 0, g.m);
}

// A large f32 product through oneDNN on the caller and the pool threads: oneDNN's own
// threads are an OpenMP team we do not size with the pool, so each thread runs a
// single-threaded primitive on the bands it claims (cpu::gemm_band: rows or columns,
// strides kept; cpu::run_bands). False when oneDNN is not chosen or
// fails.
bool product_onednn_threaded(OpKernelContext& ctx, const Gemm& g, const float* a, const float* b, float* c) {
  const int threads = ctx.device()->num_threads();
  const cpu::GemmShape whole = gemm_shape(g);
  if (!cpu::prefer_onednn(whole, threads)) return false;
  const int64_t bands = cpu::gemm_bands(whole, threads);
  return cpu::run_bands(ctx.device(), bands, [&](int64_t i) {
    const cpu::GemmBand band = cpu::gemm_band(whole, i, bands);
    return cpu::onednn_gemm_f32(band.shape, a + band.a_offset, b + band.b_offset, nullptr, false, c + band.c_offset);
  });
}

// Row-major strides of `dims` aligned to the right of a rank-`r` batch shape, 0 where a
// dim is broadcast (size 1) or absent.
std::vector<int64_t> batch_strides(const std::vector<int64_t>& dims, int r, int64_t matrix_size) {
  std::vector<int64_t> s(static_cast<size_t>(r), 0);
  int off = r - static_cast<int>(dims.size());
  int64_t stride = matrix_size;
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    s[static_cast<size_t>(i + off)] = dims[static_cast<size_t>(i)] == 1 ? 0 : stride;
    stride *= dims[static_cast<size_t>(i)];
  }
  return s;
}

class MatMulKernel : public OpKernel {
 public:
  explicit MatMulKernel(const Node& n)
      : OpKernel(n), ta_(n.attr_bool("transpose_a")), tb_(n.attr_bool("transpose_b")),
        bf16_(cpu::bf16_compute(n, &attr_error_)) {}

  void compute(OpKernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (!attr_error_.empty()) return ctx.fail(attr_error_);
    if (a.dtype() != b.dtype()) {
      ctx.fail(std::string("inputs have different dtypes: ") + dtype_name(a.dtype()) + " and " + dtype_name(b.dtype()));
      return;
    }
    if (a.rank() < 2 || b.rank() < 2) {
      ctx.fail("inputs must have rank >= 2, got " + a.shape().to_string() + " and " + b.shape().to_string());
      return;
    }
    const int ra = a.rank(), rb = b.rank();
    Gemm g;
    g.ta = ta_;
    g.tb = tb_;
    g.bf16 = bf16_;
    if (bf16_) {
      g.a_source = a.buffer();
      g.b_source = b.buffer();
    }
    g.m = ta_ ? a.dim(ra - 1) : a.dim(ra - 2);
    g.k = ta_ ? a.dim(ra - 2) : a.dim(ra - 1);
    const int64_t kb = tb_ ? b.dim(rb - 1) : b.dim(rb - 2);
    g.n = tb_ ? b.dim(rb - 2) : b.dim(rb - 1);
    if (g.k != kb) {
      ctx.fail("inner dimensions differ: " + a.shape().to_string() + " and " + b.shape().to_string() +
               (ta_ || tb_ ? std::string(" (transpose_a=") + (ta_ ? "true" : "false") + ", transpose_b=" +
                                 (tb_ ? "true" : "false") + ")"
                           : std::string()));
      return;
    }
    std::vector<int64_t> bat_a(a.shape().dims().begin(), a.shape().dims().end() - 2);
    std::vector<int64_t> bat_b(b.shape().dims().begin(), b.shape().dims().end() - 2);
    Shape batch;
    if (!broadcast_shapes(Shape(bat_a), Shape(bat_b), &batch)) {
      ctx.fail("batch dimensions cannot be broadcast: " + a.shape().to_string() + " and " + b.shape().to_string());
      return;
    }
    std::vector<int64_t> out_dims = batch.dims();
    out_dims.push_back(g.m);
    out_dims.push_back(g.n);
    Tensor& out = ctx.allocate_output(0, a.dtype(), Shape(out_dims));
    bool ok = true;
    switch (a.dtype()) {
      case DType::f32: run<float>(ctx, g, a, b, out, batch, bat_a, bat_b); break;
      case DType::f64: run<double>(ctx, g, a, b, out, batch, bat_a, bat_b); break;
      case DType::i32: run<int32_t>(ctx, g, a, b, out, batch, bat_a, bat_b); break;
      case DType::i64: run<int64_t>(ctx, g, a, b, out, batch, bat_a, bat_b); break;
      default: ok = false;
    }
    if (!ok) ctx.fail(std::string("unsupported dtype ") + dtype_name(a.dtype()));
  }

 private:
  template <typename T>
  static void run(OpKernelContext& ctx, Gemm g, const Tensor& a, const Tensor& b, Tensor& out, const Shape& batch,
                  const std::vector<int64_t>& bat_a, const std::vector<int64_t>& bat_b) {
    if (out.num_elements() == 0) return;
    T* pc = out.data<T>();
    if (g.k == 0) {
      std::fill(pc, pc + out.num_elements(), T(0));
      return;
    }
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    const int64_t num_batches = batch.num_elements();
    const bool b_unbatched = std::all_of(bat_b.begin(), bat_b.end(), [](int64_t d) { return d == 1; });
    // A batch of a against one b is a single taller product when a's rows are contiguous.
    if (!g.ta && b_unbatched) {
      g.m *= num_batches;
      product<T>(ctx, g, pa, pb, pc);
      return;
    }
    if (num_batches == 1) {
      product<T>(ctx, g, pa, pb, pc);
      return;
    }
    const int r = batch.rank();
    const std::vector<int64_t> sa = batch_strides(bat_a, r, g.m * g.k);
    const std::vector<int64_t> sb = batch_strides(bat_b, r, g.k * g.n);
    auto offsets = [&](int64_t i, int64_t* oa, int64_t* ob) {
      *oa = 0;
      *ob = 0;
      for (int d = r - 1; d >= 0; --d) {
        int64_t dim = batch.dim(d);
        int64_t idx = i % dim;
        i /= dim;
        *oa += idx * sa[static_cast<size_t>(d)];
        *ob += idx * sb[static_cast<size_t>(d)];
      }
    };
    const int64_t mn = g.m * g.n;
    const int threads = ctx.device()->num_threads();
    if (g.macs() >= kThreadedProduct && num_batches < 4 * threads) {
      for (int64_t i = 0; i < num_batches; ++i) {
        int64_t oa, ob;
        offsets(i, &oa, &ob);
        product<T>(ctx, g, pa + oa, pb + ob, pc + i * mn);
      }
      return;
    }
    // Many small products: one per pool task, each on a single thread.
    const Eigen::ThreadPoolDevice& pool = eigen_cpu(ctx);
    Eigen::ThreadPoolDevice single(pool.getPool(), 1);
    // Cost in ns: ~32 multiply-adds per ns on one core, plus the contraction's setup.
    ctx.device()->parallel_for(num_batches, g.macs() / 32 + 500, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        int64_t oa, ob;
        offsets(i, &oa, &ob);
        gemm_one<T>(single, g, pa + oa, pb + ob, pc + i * mn);
      }
    });
  }

  // One (possibly large) product using the device's parallelism.
  template <typename T>
  static void product(OpKernelContext& ctx, const Gemm& g, const T* a, const T* b, T* c) {
    if constexpr (std::is_floating_point_v<T>) {
      // Below 8M multiply-adds (cpu::threaded_product_macs) a second thread gains little
      // against the cost of waking a pool thread; larger f32 products on oneDNN (an MLP's
      // 64x784x256 and its gradients) are banded over the pool. Eigen's contraction is
      // threaded from 16M (256^3) only, as before: its threaded evaluation may sum in
      // another order, and the samples' figures rest on these bits.
      const bool threads = ctx.device()->num_threads() > 1;
      if constexpr (std::is_same_v<T, float>) {
        // Column bands run on one thread too: the same bits on any pool (cpu::fixed_bands).
        if ((threads || cpu::fixed_bands(gemm_shape(g))) && g.macs() >= cpu::threaded_product_macs() &&
            product_onednn_threaded(ctx, g, a, b, c))
          return;
      }
      if (!threads || g.macs() < (int64_t{1} << 24)) {
        Eigen::ThreadPoolDevice single(eigen_cpu(ctx).getPool(), 1);
        gemm_one<T>(single, g, a, b, c);
        return;
      }
      gemm_one<T>(eigen_cpu(ctx), g, a, b, c);
    } else {
      ctx.device()->parallel_for(g.m, g.n * g.k + 10,
                                 [&](int64_t r0, int64_t r1) { gemm_loops(g, a, b, c, r0, r1); });
    }
  }

  bool ta_, tb_;
  std::string attr_error_;  // before bf16_, which its initializer fills
  bool bf16_;
};

AF_REGISTER_KERNEL("MatMul", DeviceType::CPU, MatMulKernel);

}  // namespace

bool cpu::run_bands(const DeviceContext* device, int64_t bands, const std::function<bool(int64_t)>& band) {
  struct State {
    std::atomic<int64_t> next{0}, done{0};
    std::atomic<bool> ok{true};
    int64_t bands = 0;
    std::function<bool(int64_t)> band;
  };
  auto state = std::make_shared<State>();
  state->bands = bands;
  state->band = band;  // its captures are the caller's: only called for a band it waits for
  auto work = [](State& s) {
    for (int64_t i = s.next.fetch_add(1); i < s.bands; i = s.next.fetch_add(1)) {
      bool ok = false;
      try {
        ok = s.band(i);
      } catch (...) {
        ok = false;
      }
      if (!ok) s.ok.store(false);
      s.done.fetch_add(1, std::memory_order_acq_rel);
    }
  };
  const int64_t helpers = std::min<int64_t>(device->num_threads(), bands) - 1;
  if (helpers > 0) {
    Eigen::ThreadPoolInterface* pool =
        static_cast<const Eigen::ThreadPoolDevice*>(device->native_handle())->getPool();
    for (int64_t h = 0; h < helpers; ++h) pool->Schedule([state, work] { work(*state); });
  }
  work(*state);
  // Only bands other threads have claimed and are running remain.
  while (state->done.load(std::memory_order_acquire) < bands) std::this_thread::yield();
  return state->ok.load();
}

void cpu::eigen_gemm_f32(const cpu::GemmShape& s, const float* a, const float* b, float* c) {
  // A pool is needed only to build the device; one thread runs the product inline.
  static Eigen::ThreadPool pool(1);
  Eigen::ThreadPoolDevice single(&pool, 1);
  Gemm g;
  g.m = s.m;
  g.n = s.n;
  g.k = s.k;
  g.ta = s.ta;
  g.tb = s.tb;
  gemm_eigen(single, g, a, b, c);
}

}  // namespace actorflow
