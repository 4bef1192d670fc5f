// The f32 matmul backends per shape class: ActorFlow's automatic choice ("ours"), Eigen
// forced, oneDNN forced, OpenBLAS's cblas_sgemm and libxsmm's JIT kernels, on
// the shapes the models and benchmarks multiply. The thresholds of
// ops/cpu/onednn_matmul.cpp come from these figures (bench/README.md, "Matmul backends").
//
// Below 2^24 multiply-adds MatMul runs single-threaded, and a session's per-step cost (a
// few us, far more under load) would drown the kernels' difference on the small shapes:
// there the sides call the kernels directly on one thread (OpenBLAS with 1 thread). From
// 2^24 on, MatMul uses the whole pool: the sides run the one-node graph through a
// prepared step with the backend forced, and OpenBLAS gets as many threads. libxsmm is a
// small-GEMM library without a thread pool of its own: it is measured on the one-thread
// shapes only.
#include <actorflow/actorflow.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cpu/onednn_matmul.h"
#include "harness/bench.h"

#ifdef AF_HAVE_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
extern "C" int openblas_get_num_threads();
#endif

#ifdef AF_HAVE_LIBXSMM
#include <libxsmm.h>
#endif

namespace af = actorflow;
namespace cpu = actorflow::cpu;

namespace {

struct Fixture {
  af::Graph g;
  std::unique_ptr<af::Session> sess;
  af::Output a, b, y;
  af::Tensor ta, tb;
  af::Callable step;
};

double gflops(int64_t m, int64_t n, int64_t k, int reps, double s) {
  return 2.0 * static_cast<double>(m * n * k) * reps / s / 1e9;
}

// One side of ours: the graph's MatMul with the backend forced (or automatic) during the
// sample, restored to automatic after it.
bench::Side backend_side(const std::shared_ptr<Fixture>& f, const std::string& name, cpu::MatmulBackend backend,
                         int64_t m, int64_t n, int64_t k, int reps) {
  std::string words = "ActorFlow MatMul, intra_op_threads=" + std::to_string(bench::threads()) + ", backend " + name +
                      (backend == cpu::MatmulBackend::onednn && !cpu::onednn_available() ? " (not built in: Eigen)" : "");
  return {name, words, [f, backend, m, n, k, reps] {
            cpu::set_matmul_backend(backend);
            af::Result<std::vector<af::Tensor>> out = std::vector<af::Tensor>{};
            auto t0 = bench::Clock::now();
            for (int r = 0; r < reps; ++r) out = f->step({f->ta, f->tb});
            double s = bench::seconds_since(t0);
            cpu::set_matmul_backend(cpu::MatmulBackend::automatic);
            float c00 = bench::must(out, "matmul")[0].data<float>()[0];
            bench::check(std::abs(c00 - 1.0f) < 1e-3f, "matmul " + std::to_string(m) + "x" + std::to_string(k));
            return gflops(m, n, k, reps, s);
          }};
}

constexpr int64_t kThreadedMacs = int64_t{1} << 24;

// One kernel side: `reps` products on this thread, checked after timing.
bench::Side kernel_side(const std::string& name, const std::string& words, std::shared_ptr<std::vector<float>> a,
                        std::shared_ptr<std::vector<float>> b, cpu::GemmShape g, int reps,
                        std::function<void(const cpu::GemmShape&, const float*, const float*, float*)> gemm) {
  auto c = std::make_shared<std::vector<float>>(static_cast<size_t>(g.m * g.n));
  return {name, words, [a, b, c, g, reps, gemm] {
            auto t0 = bench::Clock::now();
            for (int r = 0; r < reps; ++r) gemm(g, a->data(), b->data(), c->data());
            double s = bench::seconds_since(t0);
            // Every element of C is 1 (A = 1/k, B = 1): the first and the last checked.
            bench::check(std::abs((*c)[0] - 1.0f) < 1e-3f && std::abs(c->back() - 1.0f) < 1e-3f, "gemm");
            return gflops(g.m, g.n, g.k, reps, s);
          }};
}

bench::Prepared prepare_kernels(int64_t m, int64_t n, int64_t k, int reps) {
  auto a = std::make_shared<std::vector<float>>(static_cast<size_t>(m * k), 1.0f / static_cast<float>(k));
  auto b = std::make_shared<std::vector<float>>(static_cast<size_t>(k * n), 1.0f);
  cpu::GemmShape g;
  g.m = m;
  g.n = n;
  g.k = k;
  const bool onednn = cpu::prefer_onednn(g, 1);
  bench::Prepared prep;
  prep.sides.push_back(kernel_side("ours", std::string("MatMul's automatic choice, one thread: ") + (onednn ? "onednn" : "eigen"),
                                   a, b, g, reps, [onednn](const cpu::GemmShape& s, const float* x, const float* y, float* z) {
                                     if (!onednn || !cpu::onednn_gemm_f32(s, x, y, nullptr, false, z)) cpu::eigen_gemm_f32(s, x, y, z);
                                   }));
  prep.sides.push_back(kernel_side("eigen", "Eigen tensor contraction, one thread", a, b, g, reps, cpu::eigen_gemm_f32));
  if (cpu::onednn_available())
    prep.sides.push_back(kernel_side("onednn", "oneDNN matmul primitive (cached), one thread", a, b, g, reps,
                                     [](const cpu::GemmShape& s, const float* x, const float* y, float* z) {
                                       bench::check(cpu::onednn_gemm_f32(s, x, y, nullptr, false, z), "onednn");
                                     }));
#ifdef AF_HAVE_OPENBLAS
  prep.sides.push_back(kernel_side("openblas", "cblas_sgemm, openblas_set_num_threads(1) during the sample", a, b, g, reps,
                                   [](const cpu::GemmShape& s, const float* x, const float* y, float* z) {
                                     const int before = openblas_get_num_threads();
                                     openblas_set_num_threads(1);
                                     cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(s.m),
                                                 static_cast<int>(s.n), static_cast<int>(s.k), 1.0f, x, static_cast<int>(s.k),
                                                 y, static_cast<int>(s.n), 0.0f, z, static_cast<int>(s.n));
                                     openblas_set_num_threads(before);
                                   }));
#endif
#ifdef AF_HAVE_LIBXSMM
  // libxsmm is column-major: the row-major C = A B is, in its terms, C^T = B^T A^T with
  // (m, n, k) = (n, m, k), B first (ld n), A second (ld k), C with ld n. The kernel is
  // JIT-compiled once per shape here, before timing (beta 0: C is overwritten).
  {
    const float alpha = 1.0f, beta = 0.0f;
    const libxsmm_blasint xm = static_cast<libxsmm_blasint>(n), xn = static_cast<libxsmm_blasint>(m),
                          xk = static_cast<libxsmm_blasint>(k);
    const libxsmm_blasint lda = xm, ldb = xk, ldc = xm;
    const int flags = LIBXSMM_GEMM_FLAG_NONE;
    libxsmm_smmfunction kernel = libxsmm_smmdispatch(xm, xn, xk, &lda, &ldb, &ldc, &alpha, &beta, &flags, nullptr);
    if (kernel != nullptr)
      prep.sides.push_back(
          kernel_side("libxsmm", "libxsmm_smmdispatch JIT kernel (made before timing), one thread", a, b, g, reps,
                      [kernel](const cpu::GemmShape&, const float* x, const float* y, float* z) { kernel(y, x, z); }));
    else
      std::cerr << "SKIP matmul_backends_" << m << "x" << k << "x" << n
                << " vs libxsmm: libxsmm_smmdispatch made no kernel\n";
  }
#else
  std::cerr << "SKIP matmul_backends_" << m << "x" << k << "x" << n
            << " vs libxsmm: not built in (Debian's libxsmm-dev; bench/run installs it)\n";
#endif
  return prep;
}

bench::Prepared prepare(const bench::Params& p) {
  const int64_t m = p.at("m"), n = p.at("n"), k = p.at("k");
  const int reps = static_cast<int>(p.at("reps"));
  if (m * n * k < kThreadedMacs) return prepare_kernels(m, n, k, reps);
  auto f = std::make_shared<Fixture>();
  f->a = af::placeholder(f->g, af::f32, {m, k}, "a");
  f->b = af::placeholder(f->g, af::f32, {k, n}, "b");
  f->y = af::matmul(f->a, f->b);
  af::SessionOptions o;
  o.intra_op_threads = bench::threads();
  f->sess = std::make_unique<af::Session>(af::Session::create(f->g, o).value());
  f->step = bench::must(f->sess->make_callable({f->y}, {f->a, f->b}), "make_callable");
  f->ta = af::Tensor::filled(af::f32, {m, k}, 1.0 / static_cast<double>(k));
  f->tb = af::Tensor::filled(af::f32, {k, n}, 1.0);
  bench::Prepared prep;
  std::cerr << "SKIP matmul_backends_" << m << "x" << k << "x" << n
            << " vs libxsmm: from 2^24 multiply-adds MatMul is threaded; libxsmm is measured below that only\n";
  prep.sides.push_back(backend_side(f, "ours", cpu::MatmulBackend::automatic, m, n, k, reps));
  prep.sides.push_back(backend_side(f, "eigen", cpu::MatmulBackend::eigen, m, n, k, reps));
  if (cpu::onednn_available()) prep.sides.push_back(backend_side(f, "onednn", cpu::MatmulBackend::onednn, m, n, k, reps));
#ifdef AF_HAVE_OPENBLAS
  auto c = std::make_shared<std::vector<float>>(static_cast<size_t>(m * n));
  const int nt = bench::threads();
  prep.sides.push_back({"openblas",
                        "cblas_sgemm called directly, openblas_set_num_threads(" + std::to_string(nt) +
                            ") during the sample, no session",
                        [f, c, m, n, k, reps, nt] {
                          const int before = openblas_get_num_threads();
                          openblas_set_num_threads(nt);
                          const float* a = f->ta.data<float>();
                          const float* b = f->tb.data<float>();
                          auto t0 = bench::Clock::now();
                          for (int r = 0; r < reps; ++r)
                            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
                                        static_cast<int>(k), 1.0f, a, static_cast<int>(k), b, static_cast<int>(n), 0.0f,
                                        c->data(), static_cast<int>(n));
                          double s = bench::seconds_since(t0);
                          openblas_set_num_threads(before);
                          bench::check(std::abs((*c)[0] - 1.0f) < 1e-3f, "sgemm");
                          return gflops(m, n, k, reps, s);
                        }});
#endif
  return prep;
}

// reps: about 20 ms of work a sample at ~50 GFLOP/s.
bench::Case shape_case(const char* what, int64_t m, int64_t k, int64_t n) {
  const int64_t macs = m * n * k;
  const int64_t reps = std::max<int64_t>(1, (int64_t{500} << 20) / macs);
  std::string dims = std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n);
  return bench::Case{.name = "matmul_backends_" + dims,
                     .unit = "GFLOP/s",
                     .higher_is_better = true,
                     .work = std::string("f32 [m,k] x [k,n] = ") + dims + ", " + what + " (" +
                             std::to_string(macs) + " multiply-adds)",
                     .params = [m, n, k, reps](bool) {
                       return bench::Params{{{"m", m}, {"n", n}, {"k", k}, {"reps", reps}}, {{"kind", "matmul_backends"}}};
                     },
                     .prepare = prepare,
                     .skip_in_quick = true,
                     .note = "Eigen, oneDNN, OpenBLAS, libxsmm per shape class (sets ops/cpu/onednn_matmul.cpp's thresholds)",
                     .internal = true};
}

BENCH_CASE(shape_case("32^3: tiny", 32, 32, 32));
BENCH_CASE(shape_case("MLP training, last layer", 64, 128, 10));
BENCH_CASE(shape_case("64^3", 64, 64, 64));
BENCH_CASE(shape_case("one inference row, first MLP layer", 1, 784, 256));
BENCH_CASE(shape_case("256 inference rows, first MLP layer", 256, 784, 256));
BENCH_CASE(shape_case("MLP training, second layer", 64, 256, 128));
BENCH_CASE(shape_case("MLP training, first layer", 64, 784, 256));
BENCH_CASE(shape_case("128^3", 128, 128, 128));
BENCH_CASE(shape_case("256^3 (first threaded size)", 256, 256, 256));
BENCH_CASE(shape_case("CNN dense layer", 50, 3136, 1024));
BENCH_CASE(shape_case("1024^3", 1024, 1024, 1024));

}  // namespace

int main(int argc, char** argv) { return bench::main(argc, argv); }
