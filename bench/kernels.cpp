// Kernel throughput through a session: f32 matmul (GFLOP/s, also as a fraction of the
// machine's peak), elementwise add and a full reduction (GB/s, also against memcpy
// measured in the same run). Ours runs each op as a one-node graph on fed inputs with
// intra_op_threads = bench::threads() (2 unless BENCH_THREADS says otherwise); the peers
// get the same shapes and as many threads. elementwise_chain is an internal ratio: a
// chain of elementwise nodes with the elementwise fusion pass on and off.
#include <actorflow/actorflow.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "harness/bench.h"

#ifdef AF_HAVE_TORCH
#include "peers/torch_peers.h"
#endif

namespace af = actorflow;

namespace {

std::string ours_threads() {
  return "ActorFlow local session, intra_op_threads=" + std::to_string(bench::threads()) +
         ", one-node graph on fed inputs, Session::make_callable";
}

struct Fixture {
  af::Graph g;
  std::unique_ptr<af::Session> sess;
  af::Output a, b, y;
  af::Tensor ta, tb;
  // The prepared step: what an inference loop would call (no plan lookup per run).
  af::Callable step;
};

std::unique_ptr<af::Session> make_session(af::Graph& g) {
  af::SessionOptions opts;
  opts.intra_op_threads = bench::threads();
  return std::make_unique<af::Session>(af::Session::create(g, opts).value());
}

// Threads for OpenBLAS (libtorch's sgemm) during the matmul cases: as many as ours
// gets, unless BENCH_LIBTORCH_BLAS_THREADS says otherwise (0: leave OPENBLAS_NUM_THREADS).
[[maybe_unused]] int libtorch_blas_threads() {
  const char* e = std::getenv("BENCH_LIBTORCH_BLAS_THREADS");
  return e ? std::atoi(e) : bench::threads();
}

bench::Prepared matmul(const bench::Params& p) {
  const int64_t n = p.at("n");
  const int reps = static_cast<int>(p.at("reps"));
  auto f = std::make_shared<Fixture>();
  f->a = af::placeholder(f->g, af::f32, {n, n}, "a");
  f->b = af::placeholder(f->g, af::f32, {n, n}, "b");
  f->y = af::matmul(f->a, f->b);
  f->sess = make_session(f->g);
  f->step = bench::must(f->sess->make_callable({f->y}, {f->a, f->b}), "make_callable");
  f->ta = af::Tensor::filled(af::f32, {n, n}, 1.0 / static_cast<double>(n));
  f->tb = af::Tensor::filled(af::f32, {n, n}, 1.0);
  bench::Prepared prep;
  prep.sides.push_back({"ours", ours_threads(), [f, n, reps] {
                          af::Result<std::vector<af::Tensor>> out = std::vector<af::Tensor>{};
                          auto t0 = bench::Clock::now();
                          for (int r = 0; r < reps; ++r) out = f->step({f->ta, f->tb});
                          double s = bench::seconds_since(t0);
                          float c00 = bench::must(out, "matmul")[0].data<float>()[0];
                          bench::check(std::abs(c00 - 1.0f) < 1e-3f, "matmul");
                          return 2.0 * static_cast<double>(n * n * n) * reps / s / 1e9;
                        }});
#ifdef AF_HAVE_TORCH
  peers::torch_set_threads(bench::threads());
  auto t = peers::torch_matmul(n, reps, libtorch_blas_threads());
  prep.sides.push_back({"libtorch", t.threads, t.sample});
#endif
  return prep;
}

// memcpy of `bytes` split over bench::threads() threads into a pre-faulted buffer; GB/s
// counts bytes read plus bytes written, as the kernels' figures do.
bench::Side memcpy_side(size_t bytes, int reps) {
  const int nt = bench::threads();
  auto src = std::make_shared<std::vector<char>>(bytes, 1);
  auto dst = std::make_shared<std::vector<char>>(bytes, 0);
  auto sample = [src, dst, bytes, reps, nt] {
    auto copy = [&](size_t begin, size_t end) { std::memcpy(dst->data() + begin, src->data() + begin, end - begin); };
    const size_t chunk = bytes / static_cast<size_t>(nt);
    auto t0 = bench::Clock::now();
    for (int r = 0; r < reps; ++r) {
      std::vector<std::thread> helpers;
      for (int i = 1; i < nt; ++i) helpers.emplace_back(copy, chunk * i, i + 1 == nt ? bytes : chunk * (i + 1));
      copy(0, nt == 1 ? bytes : chunk);
      for (auto& h : helpers) h.join();
    }
    double s = bench::seconds_since(t0);
    bench::check((*dst)[bytes - 1] == 1, "memcpy");
    return 2.0 * static_cast<double>(bytes) * reps / s / 1e9;
  };
  return {"memcpy",
          "std::memcpy of " + std::to_string(bytes >> 20) + " MiB split over " + std::to_string(nt) +
              " thread(s), pre-faulted destination, GB/s = (read + written) / s",
          sample};
}

bench::Prepared elementwise(const bench::Params& p) {
  const int64_t e = p.at("elements");
  const int reps = static_cast<int>(p.at("reps"));
  auto f = std::make_shared<Fixture>();
  f->a = af::placeholder(f->g, af::f32, {e}, "a");
  f->b = af::placeholder(f->g, af::f32, {e}, "b");
  f->y = f->a + f->b;
  f->sess = make_session(f->g);
  f->step = bench::must(f->sess->make_callable({f->y}, {f->a, f->b}), "make_callable");
  f->ta = af::Tensor::filled(af::f32, {e}, 1.0);
  f->tb = af::Tensor::filled(af::f32, {e}, 2.0);
  bench::Prepared prep;
  prep.sides.push_back({"ours", ours_threads(), [f, e, reps] {
                          af::Result<std::vector<af::Tensor>> out = std::vector<af::Tensor>{};
                          auto t0 = bench::Clock::now();
                          for (int r = 0; r < reps; ++r) out = f->step({f->ta, f->tb});
                          double s = bench::seconds_since(t0);
                          bench::check(bench::must(out, "add")[0].data<float>()[e - 1] == 3.0f, "add");
                          return 3.0 * 4.0 * static_cast<double>(e) * reps / s / 1e9;
                        }});
#ifdef AF_HAVE_TORCH
  peers::torch_set_threads(bench::threads());
  auto t = peers::torch_add(e, reps);
  prep.sides.push_back({"libtorch", t.threads, t.sample});
#endif
  prep.sides.push_back(memcpy_side(static_cast<size_t>(e) * 4, reps));
  return prep;
}

// GELU in its tanh form, 0.5 x (1 + tanh(0.79788456 (x + 0.044715 x^3))), written as 9
// elementwise nodes: run as one _FusedElementwise node (the elementwise fusion pass) and
// with the pass off, 9 nodes and 8 intermediate tensors. An internal ratio.
bench::Prepared elementwise_chain(const bench::Params& p) {
  const int64_t e = p.at("elements");
  const int reps = static_cast<int>(p.at("reps"));
  struct Chain {
    af::Graph g;
    af::Output x, y;
    std::unique_ptr<af::Session> fused, unfused;
    af::Callable fused_step, unfused_step;
    af::Tensor in;
  };
  auto f = std::make_shared<Chain>();
  f->x = af::placeholder(f->g, af::f32, {e}, "x");
  af::Output cube = f->x * f->x * f->x;
  f->y = f->x * (af::tanh((f->x + cube * 0.044715) * 0.79788456) + 1.0) * 0.5;
  af::SessionOptions opts;
  opts.intra_op_threads = bench::threads();
  f->fused = std::make_unique<af::Session>(af::Session::create(f->g, opts).value());
  opts.optimizer.fuse_elementwise = false;
  f->unfused = std::make_unique<af::Session>(af::Session::create(f->g, opts).value());
  f->fused_step = bench::must(f->fused->make_callable({f->y}, {f->x}), "make_callable");
  f->unfused_step = bench::must(f->unfused->make_callable({f->y}, {f->x}), "make_callable");
  f->in = af::Tensor::filled(af::f32, {e}, 1.0);
  auto side = [f, e, reps](bool fused) {
    return [f, e, reps, fused] {
      af::Result<std::vector<af::Tensor>> out = std::vector<af::Tensor>{};
      auto t0 = bench::Clock::now();
      for (int r = 0; r < reps; ++r) out = (fused ? f->fused_step : f->unfused_step)({f->in});
      double s = bench::seconds_since(t0);
      const float got = bench::must(out, "gelu")[0].data<float>()[e - 1];
      bench::check(std::fabs(got - 0.8411920f) < 1e-5f, "gelu");
      return s * 1e3 / reps;
    };
  };
  bench::Prepared prep;
  std::string words = "ActorFlow local session, intra_op_threads=" + std::to_string(bench::threads()) + ", Session::make_callable";
  prep.sides.push_back({"ours", words + ", the chain as one fused node", side(true)});
  prep.sides.push_back({"unfused", words + ", fuse_elementwise off: 9 nodes", side(false)});
  return prep;
}

bench::Prepared reduction(const bench::Params& p) {
  const int64_t e = p.at("elements");
  const int reps = static_cast<int>(p.at("reps"));
  auto f = std::make_shared<Fixture>();
  f->a = af::placeholder(f->g, af::f32, {e}, "a");
  f->y = af::reduce_sum(f->a);
  f->sess = make_session(f->g);
  f->step = bench::must(f->sess->make_callable({f->y}, {f->a}), "make_callable");
  f->ta = af::Tensor::filled(af::f32, {e}, 1.0);
  bench::Prepared prep;
  prep.sides.push_back({"ours", ours_threads(), [f, e, reps] {
                          af::Result<std::vector<af::Tensor>> out = std::vector<af::Tensor>{};
                          auto t0 = bench::Clock::now();
                          for (int r = 0; r < reps; ++r) out = f->step({f->ta});
                          double s = bench::seconds_since(t0);
                          float got = bench::must(out, "sum")[0].item<float>();
                          bench::check(std::abs(got - static_cast<float>(e)) < 1e-3f * static_cast<float>(e), "sum");
                          return 4.0 * static_cast<double>(e) * reps / s / 1e9;
                        }});
#ifdef AF_HAVE_TORCH
  peers::torch_set_threads(bench::threads());
  auto t = peers::torch_sum(e, reps);
  prep.sides.push_back({"libtorch", t.threads, t.sample});
#endif
  prep.sides.push_back(memcpy_side(static_cast<size_t>(e) * 4, reps));
  return prep;
}

bench::Case matmul_case(int64_t n, int reps, bool skip_in_quick) {
  std::string s = std::to_string(n);
  return bench::Case{.name = "matmul_" + s,
                     .unit = "GFLOP/s",
                     .higher_is_better = true,
                     .work = "f32 [" + s + "," + s + "] x [" + s + "," + s + "], 2n^3 FLOP",
                     .params = [n, reps](bool) {
                       return bench::Params{{{"n", n}, {"reps", reps}}, {{"kind", "matmul"}}};
                     },
                     .prepare = matmul,
                     .skip_in_quick = skip_in_quick};
}

constexpr int64_t k16M = int64_t{1} << 24;

BENCH_CASE(matmul_case(256, 40, false));
BENCH_CASE(matmul_case(1024, 2, false));
BENCH_CASE(matmul_case(4096, 1, true));

BENCH_CASE(bench::Case{.name = "elementwise",
                       .unit = "GB/s",
                       .higher_is_better = true,
                       .work = "f32 a + b, 16M elements each (3 x 64 MiB moved)",
                       .params = [](bool) {
                         return bench::Params{{{"elements", k16M}, {"reps", 2}}, {{"kind", "add"}}};
                       },
                       .prepare = elementwise});

BENCH_CASE(bench::Case{.name = "elementwise_chain",
                       .unit = "ms",
                       .higher_is_better = false,
                       .work = "GELU (tanh form) as 9 f32 elementwise nodes over 4M elements",
                       .params = [](bool) {
                         return bench::Params{{{"elements", int64_t{1} << 22}, {"reps", 5}}, {{"kind", "gelu"}}};
                       },
                       .prepare = elementwise_chain,
                       .note = "internal ratio: fused / unfused",
                       .internal = true});

BENCH_CASE(bench::Case{.name = "reduction",
                       .unit = "GB/s",
                       .higher_is_better = true,
                       .work = "f32 sum of 16M elements to a scalar (64 MiB read)",
                       .params = [](bool) {
                         return bench::Params{{{"elements", k16M}, {"reps", 4}}, {{"kind", "sum"}}};
                       },
                       .prepare = reduction});

}  // namespace

int main(int argc, char** argv) { return bench::main(argc, argv); }
