// oneDNN matmul primitives, cached per shape, and the per-shape-class choice between
// oneDNN and Eigen for MatMul's f32 kernel. See onednn_matmul.h.
#include "cpu/onednn_matmul.h"
#include "cpu/aligned_buffer.h"
#include "cpu/bf16_mirror.h"
#include "actorflow/environment.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#ifdef AF_HAVE_ONEDNN
#include <omp.h>

#include <cstring>
#include <dnnl.hpp>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>
#endif

namespace actorflow::cpu {
namespace {

// AF_MATMUL_BACKEND=eigen|onednn forces one for the process (A/B runs of a whole model,
// e.g. bench/run mlp_training with each); unset or anything else: automatic.
MatmulBackend backend_from_env() {
  const char* e = environment_switch(EnvironmentSwitch::matmul_backend);
  if (e && std::strcmp(e, "eigen") == 0) return MatmulBackend::eigen;
  if (e && std::strcmp(e, "onednn") == 0) return MatmulBackend::onednn;
  return MatmulBackend::automatic;
}

std::atomic<MatmulBackend> g_backend{backend_from_env()};

// Where oneDNN measured faster than Eigen, one thread each (Zen 4 VM, 2026-11-30 23:25
// UTC, load ~2 from another compile; bench/README.md, "Matmul backends", has the table
// and bench `matmul_backends_*` re-measures it through MatMul):
//   * one row (m = 1, a GEMV: 1x784x256, 1x256x128): Eigen, 28 against 25 GFLOP/s and
//     43 against 21; oneDNN's call costs more than the product;
//   * below 2^16 multiply-adds (32^3, 1x128x10): Eigen, 36 against 16;
//   * 2^16 to 2^17 untransposed (64x128x10): Eigen, 32 against 24; transposed (the
//     gradients' products, 128x64x10 ta): oneDNN, 31 against 19;
//   * from 2^17 on: oneDNN, 1.2x to 2.5x (64^3 49 against 42, 64x784x256 89 against 46,
//     its ta/tb gradients 70-86 against 50-54, 50x3136x1024 76 against 31).
// Products of 2^23 and up run on every pool thread (gemm_band; matmul_kernels.cpp): an
// MLP training step's 64x784x256 products (12.8M) took ~290-310 us each on one thread,
// ~150-190 us per band of two (rows or columns alike); banded, they cut the epoch from
// ~1.1-1.3 s to ~1.0-1.1 s once the step ran on the caller's thread (2026-12-01 07:17
// UTC, load 1.8-3.7, alternating runs), and 2^20 (which also bands the 2M products)
// gained nothing more. Below 2^24 the bands are two of columns on any number of threads,
// so the MLP's products have the same bits on one thread as on two.
constexpr int64_t kMinRows = 2;
constexpr int64_t kMinMacsTransposed = int64_t{1} << 16;
constexpr int64_t kMinMacs = int64_t{1} << 17;
constexpr int64_t kThreadedMacs = int64_t{1} << 23;
constexpr int64_t kRowBandMacs = int64_t{1} << 24;

}  // namespace

int64_t threaded_product_macs() { return kThreadedMacs; }

namespace {
bool fixed_count(const GemmShape& whole) { return whole.macs() < kRowBandMacs; }
// Every band of rows reads all of b, every band of columns all of a (and each converts
// it to bfloat16 in that mode): the large products are cut across the operand that is
// read once. fc1's 64x3136x1024 forward product in row bands read its 12.8 MB weight
// (and converted it) once per band.
bool by_columns(const GemmShape& whole) { return fixed_count(whole) || whole.n >= whole.m; }
}  // namespace

constexpr int64_t kColumnBands = 2;

int64_t gemm_bands(const GemmShape& whole, int threads) {
  if (fixed_count(whole)) return std::max<int64_t>(1, std::min<int64_t>(kColumnBands, whole.n));
  return std::max<int64_t>(1, std::min<int64_t>(threads, by_columns(whole) ? whole.n : whole.m));
}

bool fixed_bands(const GemmShape& whole) { return whole.macs() >= kThreadedMacs && fixed_count(whole); }

GemmBand gemm_band(const GemmShape& whole, int64_t i, int64_t bands) {
  GemmBand b;
  b.shape = whole;
  b.shape.lda = whole.a_stride();
  b.shape.ldb = whole.b_stride();
  b.shape.ldc = whole.c_stride();
  if (by_columns(whole)) {
    const int64_t q0 = whole.n * i / bands, q1 = whole.n * (i + 1) / bands;
    b.shape.n = q1 - q0;
    b.b_offset = whole.tb ? q0 * b.shape.ldb : q0;
    b.c_offset = q0;
    b.bias_offset = q0;
  } else {
    const int64_t r0 = whole.m * i / bands, r1 = whole.m * (i + 1) / bands;
    b.shape.m = r1 - r0;
    b.a_offset = whole.ta ? r0 : r0 * b.shape.lda;
    b.c_offset = r0 * b.shape.ldc;
  }
  return b;
}

void set_matmul_backend(MatmulBackend b) { g_backend.store(b, std::memory_order_relaxed); }
MatmulBackend matmul_backend() { return g_backend.load(std::memory_order_relaxed); }

bool prefer_onednn(const GemmShape& g, int threads) {
  (void)threads;  // the classes measured the same for the threaded (banded) products
  if (!onednn_available()) return false;
  switch (matmul_backend()) {
    case MatmulBackend::eigen: return false;
    case MatmulBackend::onednn: return true;
    case MatmulBackend::automatic: break;
  }
  if (g.m < kMinRows) return false;
  return g.macs() >= (g.ta || g.tb ? kMinMacsTransposed : kMinMacs);
}

#ifdef AF_HAVE_ONEDNN

namespace {

struct Key {
  int64_t m, n, k, lda, ldb, ldc;
  bool ta, tb, bias, relu, bf16;
  bool a_mirror = false, b_mirror = false;  // bfloat16 operand read from a mirror, strided as stored
  bool operator==(const Key&) const = default;
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = 1469598103934665603ull;
    for (int64_t v : {k.m, k.n, k.k, k.lda, k.ldb, k.ldc,
                      int64_t{k.ta} | int64_t{k.tb} << 1 | int64_t{k.bias} << 2 | int64_t{k.relu} << 3 |
                          int64_t{k.bf16} << 4 | int64_t{k.a_mirror} << 5 | int64_t{k.b_mirror} << 6})
      h = (h ^ static_cast<size_t>(v)) * 1099511628211ull;
    return h;
  }
};

// One compiled primitive and the descriptors its memories are built from. Immutable once
// made, so threads execute it concurrently; each brings its own scratchpad (user mode),
// which the library's shared scratchpad would not allow.
//
// In bfloat16 (Key::bf16) the primitive reads dense row-major bfloat16 copies of a and b
// (a_in, b_in), which the two reorders make per call from the operands as stored; or, for
// an operand read from its mirror (Key::a_mirror, b_mirror), the mirror strided as the
// operand is stored (no reorder).
struct Entry {
  dnnl::memory::desc a, b, bias, c, scratch;
  dnnl::memory::desc a_in, b_in;
  dnnl::reorder a_convert, b_convert;
  dnnl::matmul prim;
  size_t scratch_bytes = 0;
};

// Bounded: a graph fed many batch sizes must not grow it forever. When full it starts
// over (entries in use stay alive through their shared_ptr).
constexpr size_t kMaxEntries = 512;
std::mutex g_mu;
std::unordered_map<Key, std::shared_ptr<const Entry>, KeyHash> g_cache;

std::shared_ptr<const Entry> make_entry(const Key& key) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  auto e = std::make_shared<Entry>();
  // Transposes are strides: a stored [k,m] read as [m,k] has strides {1, lda}.
  e->a = dnnl::memory::desc(dims{key.m, key.k}, dt::f32, key.ta ? dims{1, key.lda} : dims{key.lda, 1});
  e->b = dnnl::memory::desc(dims{key.k, key.n}, dt::f32, key.tb ? dims{1, key.ldb} : dims{key.ldb, 1});
  e->c = dnnl::memory::desc(dims{key.m, key.n}, dt::f32, dims{key.ldc, 1});
  if (key.bias) e->bias = dnnl::memory::desc(dims{1, key.n}, dt::f32, dims{key.n, 1});
  if (key.bf16) {
    if (key.a_mirror) {
      e->a_in = dnnl::memory::desc(dims{key.m, key.k}, dt::bf16, key.ta ? dims{1, key.lda} : dims{key.lda, 1});
    } else {
      e->a_in = dnnl::memory::desc(dims{key.m, key.k}, dt::bf16, dims{key.k, 1});
      e->a_convert = dnnl::reorder(dnnl::reorder::primitive_desc(onednn_engine(), e->a, onednn_engine(), e->a_in));
    }
    if (key.b_mirror) {
      e->b_in = dnnl::memory::desc(dims{key.k, key.n}, dt::bf16, key.tb ? dims{1, key.ldb} : dims{key.ldb, 1});
    } else {
      e->b_in = dnnl::memory::desc(dims{key.k, key.n}, dt::bf16, dims{key.n, 1});
      e->b_convert = dnnl::reorder(dnnl::reorder::primitive_desc(onednn_engine(), e->b, onednn_engine(), e->b_in));
    }
  }
  const dnnl::memory::desc& a_op = key.bf16 ? e->a_in : e->a;
  const dnnl::memory::desc& b_op = key.bf16 ? e->b_in : e->b;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (key.relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(ops);
  }
  dnnl::matmul::desc d = key.bias ? dnnl::matmul::desc(a_op, b_op, e->bias, e->c) : dnnl::matmul::desc(a_op, b_op, e->c);
  dnnl::matmul::primitive_desc pd(d, attr, onednn_engine());
  // bfloat16 through a reference loop would be far slower than float32.
  if (key.bf16 && std::string(pd.impl_info_str()).rfind("ref", 0) == 0) return nullptr;
  e->scratch = pd.scratchpad_desc();
  e->scratch_bytes = e->scratch.get_size();
  e->prim = dnnl::matmul(pd);
  return e;
}

std::shared_ptr<const Entry> lookup(const Key& key) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_cache.find(key);
    if (it != g_cache.end()) return it->second;
  }
  // Compiled outside the lock (a JIT compile takes ~100 us); a racing thread may compile
  // the same shape too, and the first one stored wins.
  auto e = make_entry(key);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_cache.size() >= kMaxEntries) g_cache.clear();
  return g_cache.emplace(key, std::move(e)).first->second;
}

// The mirror of `source` when the operand at `p` ([rows, cols] as stored, row stride ld)
// lies inside it; *at is then the operand's first element in the mirror.
std::shared_ptr<const Bf16Mirror> mirror_of(const std::shared_ptr<Buffer>& source, const float* p, int64_t rows,
                                            int64_t cols, int64_t ld, const uint16_t** at) {
  *at = nullptr;
  if (!source || rows <= 0 || cols <= 0) return nullptr;
  const float* base = static_cast<const float*>(source->data());
  const int64_t floats = static_cast<int64_t>(source->size() / sizeof(float));
  if (p < base || p >= base + floats) return nullptr;
  const int64_t offset = p - base;
  if (offset + (rows - 1) * ld + cols > floats) return nullptr;
  auto m = bf16_mirror(source);
  if (m) *at = m->data() + offset;
  return m;
}

}  // namespace

bool onednn_available() { return true; }

dnnl::engine& onednn_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

bool onednn_bf16_available() {
  // AVX512-BF16 alone does not pay: its dot products do no more multiply-adds a cycle
  // than float32's two FMA ports, and the operands' conversions and oneDNN's less tuned
  // kernels come on top. On a processor with AVX512-BF16 and no AMX (one pinned core, the
  // CNN's primitives, ms a call, bfloat16 against float32): conv2's forward 13.1 / 7.1,
  // its input gradient 25.7 / 8.2, its filter gradient 22.2 / 7.8, fc1's products 5.4-10.8
  // / 3.5-5.4; two CNN workers trained at 1,386 ex/s against 2,133 in float32.
  static const bool yes = dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx;
  return yes;
}

int64_t onednn_cached_primitives() {
  std::lock_guard<std::mutex> lock(g_mu);
  return static_cast<int64_t>(g_cache.size());
}

bool onednn_gemm_f32(const GemmShape& g, const float* a, const float* b, const float* bias, bool relu, float* c) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0) return false;
  // A few rows times a long transposed b (a dense layer's input gradient, dy * W^T):
  // oneDNN reads such a b across its rows, which cost fc1's input gradient 7.2 ms against
  // 4.6 for its forward product. c^T = b * a^T reads the long operand as it is stored, and
  // the small result is transposed back.
  if (g.tb && !g.ta && !bias && !relu && g.m * 8 <= g.n && g.m <= 256) {
    GemmShape t;
    t.m = g.n;
    t.n = g.m;
    t.k = g.k;
    t.tb = true;
    t.lda = g.b_stride();
    t.ldb = g.a_stride();
    t.bf16 = g.bf16;
    t.a_source = g.b_source;
    t.b_source = g.a_source;
    thread_local AlignedBuffer ct_buffer;
    float* ct = static_cast<float*>(ct_buffer.get(static_cast<size_t>(g.n * g.m) * sizeof(float)));
    if (!onednn_gemm_f32(t, b, a, nullptr, false, ct)) return false;
    const int64_t ldc = g.c_stride();
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) c[i * ldc + j] = ct[static_cast<size_t>(j * g.m + i)];
    return true;
  }
  // One thread: this call's OpenMP team is the calling thread alone (the ICV is per
  // thread, so other threads' settings are untouched). Set before the primitive is made:
  // oneDNN fixes a primitive's thread count when it creates it, and runs that many.
  if (omp_get_max_threads() != 1) omp_set_num_threads(1);
  const bool bf16 = g.bf16 && onednn_bf16_available();
  // A variable's operand from its kept bfloat16 mirror, at the same element offset.
  std::shared_ptr<const Bf16Mirror> a_mirror, b_mirror;
  const uint16_t* a16 = nullptr;
  const uint16_t* b16 = nullptr;
  if (bf16) {
    a_mirror = mirror_of(g.a_source, a, g.ta ? g.k : g.m, g.ta ? g.m : g.k, g.a_stride(), &a16);
    b_mirror = mirror_of(g.b_source, b, g.tb ? g.n : g.k, g.tb ? g.k : g.n, g.b_stride(), &b16);
  }
  Key key{g.m, g.n, g.k, g.a_stride(), g.b_stride(), g.c_stride(), g.ta, g.tb, bias != nullptr, relu, bf16};
  key.a_mirror = a16 != nullptr;
  key.b_mirror = b16 != nullptr;
  std::shared_ptr<const Entry> e;
  try {
    e = lookup(key);
  } catch (const dnnl::error&) {
    e = nullptr;
  }
  if (!e && bf16) {
    GemmShape f32 = g;
    f32.bf16 = false;
    return onednn_gemm_f32(f32, a, b, bias, relu, c);
  }
  if (!e) return false;
  // Every buffer the primitive reads or writes besides the caller's is 64-byte aligned
  // (aligned_buffer.h).
  thread_local dnnl::stream stream(onednn_engine());
  thread_local AlignedBuffer scratch;
  dnnl::engine& eng = onednn_engine();
  dnnl::memory ma(e->a, eng, const_cast<float*>(a));
  dnnl::memory mb(e->b, eng, const_cast<float*>(b));
  if (bf16) {
    thread_local AlignedBuffer a_in, b_in;
    auto convert = [&](dnnl::memory& m, const dnnl::memory::desc& in, const dnnl::reorder& r, AlignedBuffer& buf) {
      dnnl::memory c16(in, eng, buf.get(in.get_size()));
      r.execute(stream, m, c16);
      m = c16;
    };
    if (a16) ma = dnnl::memory(e->a_in, eng, const_cast<uint16_t*>(a16));
    else convert(ma, e->a_in, e->a_convert, a_in);
    if (b16) mb = dnnl::memory(e->b_in, eng, const_cast<uint16_t*>(b16));
    else convert(mb, e->b_in, e->b_convert, b_in);
  }
  dnnl::memory mc(e->c, eng, c);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(e->bias, eng, const_cast<float*>(bias)));
  if (e->scratch_bytes) args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(e->scratch, eng, scratch.get(e->scratch_bytes)));
  e->prim.execute(stream, args);
  stream.wait();
  return true;
}

#else  // no oneDNN

bool onednn_available() { return false; }
bool onednn_bf16_available() { return false; }
int64_t onednn_cached_primitives() { return 0; }
bool onednn_gemm_f32(const GemmShape&, const float*, const float*, const float*, bool, float*) { return false; }

#endif

}  // namespace actorflow::cpu
