// oneDNN kernels against the Eigen path and naive loops on random inputs: MatMul with the
// backend forced to Eigen, to oneDNN and left automatic, on shapes on both sides of every
// shape-class threshold, each transpose combination, batched and threaded; the fused
// bias + relu post-ops; the primitive cache (reuse per shape, concurrent callers).
#include <atomic>
#include <random>
#include <tuple>
#include <stdexcept>
#include <thread>

#include "actorflow/ops/cpu_device.h"

#include "../../ops/cpu/onednn_conv.h"
#include "../../ops/cpu/onednn_matmul.h"
#include "test_util.h"

namespace af = actorflow;
namespace cpu = actorflow::cpu;

namespace {

std::vector<float> random_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = u(rng);
  return v;
}

// C = op(A) * op(B) in double, A stored [m,k] (or [k,m] when ta), B [k,n] (or [n,k]).
std::vector<double> naive(const std::vector<float>& a, const std::vector<float>& b, int64_t m, int64_t n, int64_t k,
                          bool ta, bool tb) {
  std::vector<double> c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) {
      const double x = ta ? a[static_cast<size_t>(p * m + i)] : a[static_cast<size_t>(i * k + p)];
      for (int64_t j = 0; j < n; ++j)
        c[static_cast<size_t>(i * n + j)] += x * (tb ? b[static_cast<size_t>(j * k + p)] : b[static_cast<size_t>(p * n + j)]);
    }
  return c;
}

// Restores the automatic choice when a test case ends, even when it fails.
struct BackendGuard {
  explicit BackendGuard(cpu::MatmulBackend b) { cpu::set_matmul_backend(b); }
  ~BackendGuard() { cpu::set_matmul_backend(cpu::MatmulBackend::automatic); }
  BackendGuard(const BackendGuard&) = delete;
  BackendGuard& operator=(const BackendGuard&) = delete;
};

std::vector<float> run_matmul(cpu::MatmulBackend backend, const af::Tensor& a, const af::Tensor& b, bool ta, bool tb,
                              int threads) {
  BackendGuard guard(backend);
  af::Graph g;
  auto y = af::matmul(af::constant(g, a), af::constant(g, b), ta, tb);
  af::SessionOptions o;
  o.intra_op_threads = threads;
  af::Tensor t = aft::eval(g, {y}, {}, o)[0];
  return std::vector<float>(t.data<float>(), t.data<float>() + t.num_elements());
}

// Float sums of k products differ from the double reference by ~k ulps at worst.
void check_near(const std::vector<float>& got, const std::vector<double>& want, int64_t k, const char* what) {
  REQUIRE(got.size() == want.size());
  const double tol = 1e-6 * static_cast<double>(k) + 1e-5;
  size_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::abs(got[i] - want[i]);
    worst = std::max(worst, d);
    bad += d > tol * (1 + std::abs(want[i]));
  }
  INFO(what << ": worst difference " << worst << " (tolerance " << tol << ")");
  CHECK(bad == 0);
}

struct Case {
  int64_t m, n, k;
};

// Shapes on both sides of each boundary the kernels use ({m, n, k}): one row against two
// (kMinRows), 2^16 and 2^17 multiply-adds (prefer_onednn's thresholds with and without a
// transpose), 2^24 (the threaded, row-banded product), plus odd sizes that leave
// remainders in every blocking.
const std::vector<Case> kShapes = {
    {1, 1, 1},     {1, 784, 256},  {2, 784, 256},   {31, 32, 64},   {32, 32, 64},    {63, 32, 64},
    {64, 32, 64},  {64, 784, 256}, {127, 129, 127}, {255, 256, 256}, {256, 256, 256}, {300, 70, 1000},
};

}  // namespace

TEST_CASE("onednn: a forced oneDNN choice holds exactly when oneDNN is built in and runs") {
  BackendGuard guard(cpu::MatmulBackend::onednn);
  cpu::GemmShape s;
  s.m = s.n = s.k = 8;
  auto v = random_values(64, 3);
  std::vector<float> c(64);
  CHECK(cpu::onednn_gemm_f32(s, v.data(), v.data(), nullptr, false, c.data()) == cpu::onednn_available());
  CHECK(cpu::prefer_onednn(s, 1) == cpu::onednn_available());
  cpu::set_matmul_backend(cpu::MatmulBackend::eigen);
  CHECK_FALSE(cpu::prefer_onednn(s, 1));
}

TEST_CASE("onednn: the automatic choice follows the measured shape classes") {
  auto shape = [](int64_t m, int64_t n, int64_t k, bool transposed) {
    cpu::GemmShape s;
    s.m = m;
    s.n = n;
    s.k = k;
    s.ta = transposed;
    return s;
  };
  const bool on = cpu::onednn_available();
  CHECK_FALSE(cpu::prefer_onednn(shape(1, 784, 256, false), 2));  // one row: Eigen's GEMV
  CHECK(cpu::prefer_onednn(shape(2, 784, 256, false), 2) == on);
  CHECK_FALSE(cpu::prefer_onednn(shape(63, 32, 64, false), 1));  // just under 2^17
  CHECK(cpu::prefer_onednn(shape(64, 32, 64, false), 1) == on);  // 2^17
  CHECK_FALSE(cpu::prefer_onednn(shape(31, 32, 64, true), 1));   // just under 2^16
  CHECK(cpu::prefer_onednn(shape(32, 32, 64, true), 1) == on);   // 2^16, transposed
  CHECK(cpu::prefer_onednn(shape(1024, 1024, 1024, false), 2) == on);
}

TEST_CASE("onednn: MatMul through oneDNN, Eigen and the automatic choice agree with naive loops") {
  uint32_t seed = 1;
  for (const Case& c : kShapes) {
    for (int flags = 0; flags < 4; ++flags) {
      const bool ta = flags & 1, tb = flags & 2;
      // The largest shapes once, untransposed and fully transposed: the naive loop is slow.
      if (c.m * c.n * c.k > (int64_t{1} << 24) && flags != 0 && flags != 3) continue;
      CAPTURE(c.m);
      CAPTURE(c.n);
      CAPTURE(c.k);
      CAPTURE(ta);
      CAPTURE(tb);
      auto va = random_values(c.m * c.k, seed++);
      auto vb = random_values(c.k * c.n, seed++);
      af::Tensor a = af::Tensor::from_vector(va, ta ? af::Shape{c.k, c.m} : af::Shape{c.m, c.k});
      af::Tensor b = af::Tensor::from_vector(vb, tb ? af::Shape{c.n, c.k} : af::Shape{c.k, c.n});
      const auto want = naive(va, vb, c.m, c.n, c.k, ta, tb);
      for (int threads : {1, 2}) {
        CAPTURE(threads);
        check_near(run_matmul(cpu::MatmulBackend::eigen, a, b, ta, tb, threads), want, c.k, "eigen");
        check_near(run_matmul(cpu::MatmulBackend::onednn, a, b, ta, tb, threads), want, c.k, "onednn");
        check_near(run_matmul(cpu::MatmulBackend::automatic, a, b, ta, tb, threads), want, c.k, "automatic");
      }
    }
  }
}

TEST_CASE("onednn: batched MatMul (many small products, broadcast b) agrees with Eigen") {
  auto va = random_values(6 * 2 * 17 * 9, 11);
  auto vb = random_values(2 * 9 * 13, 12);
  af::Tensor a = af::Tensor::from_vector(va, {6, 2, 17, 9});
  af::Tensor b = af::Tensor::from_vector(vb, {2, 9, 13});
  for (int threads : {1, 2}) {
    auto eigen = run_matmul(cpu::MatmulBackend::eigen, a, b, false, false, threads);
    auto onednn = run_matmul(cpu::MatmulBackend::onednn, a, b, false, false, threads);
    std::vector<double> want(eigen.begin(), eigen.end());
    check_near(onednn, want, 9, "batched");
  }
}

TEST_CASE("onednn: fused bias and relu post-ops, and strided (row band) operands") {
  if (!cpu::onednn_available()) {
    cpu::GemmShape s;
    s.m = s.n = s.k = 2;
    float c[4] = {7, 7, 7, 7};
    const float a[4] = {1, 2, 3, 4};
    CHECK_FALSE(cpu::onednn_gemm_f32(s, a, a, nullptr, false, c));
    CHECK(c[0] == 7);
    return;
  }
  for (Case c : {Case{1, 10, 128}, Case{64, 256, 784}, Case{37, 19, 5}}) {
    for (int flags = 0; flags < 4; ++flags) {
      const bool ta = flags & 1, tb = flags & 2;
      CAPTURE(c.m);
      CAPTURE(ta);
      CAPTURE(tb);
      auto va = random_values(c.m * c.k, 21 + flags);
      auto vb = random_values(c.k * c.n, 31 + flags);
      auto bias = random_values(c.n, 41 + flags);
      auto want = naive(va, vb, c.m, c.n, c.k, ta, tb);
      cpu::GemmShape s;
      s.m = c.m;
      s.n = c.n;
      s.k = c.k;
      s.ta = ta;
      s.tb = tb;
      std::vector<float> got(static_cast<size_t>(c.m * c.n));
      REQUIRE(cpu::onednn_gemm_f32(s, va.data(), vb.data(), bias.data(), true, got.data()));
      std::vector<double> fused(want.size());
      for (size_t i = 0; i < want.size(); ++i) fused[i] = std::max(0.0, want[i] + bias[i % static_cast<size_t>(c.n)]);
      check_near(got, fused, c.k, "bias+relu");
      REQUIRE(cpu::onednn_gemm_f32(s, va.data(), vb.data(), bias.data(), false, got.data()));
      for (size_t i = 0; i < want.size(); ++i) fused[i] = want[i] + bias[i % static_cast<size_t>(c.n)];
      check_near(got, fused, c.k, "bias");
      // The second half of the rows as a band: a row offset (a column offset, stride kept,
      // when a is stored transposed), as the threaded product shards them.
      if (c.m >= 2) {
        const int64_t r0 = c.m / 2;
        cpu::GemmShape band = s;
        band.m = c.m - r0;
        band.lda = s.a_stride();
        const float* ai = ta ? va.data() + r0 : va.data() + r0 * c.k;
        std::vector<float> part(static_cast<size_t>(band.m * c.n));
        REQUIRE(cpu::onednn_gemm_f32(band, ai, vb.data(), nullptr, false, part.data()));
        check_near(part, std::vector<double>(want.begin() + r0 * c.n, want.end()), c.k, "band");
      }
    }
  }
}

TEST_CASE("onednn: a few rows times a long transposed b (run as c^T = b a^T) agree with naive loops, strides kept") {
  if (!cpu::onednn_available()) return;
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{5, 300, 33}, {64, 3136, 40}, {1, 8, 3}}) {
    CAPTURE(m);
    CAPTURE(n);
    auto va = random_values(m * k, 51);
    auto vb = random_values(n * k, 52);
    const auto want = naive(va, vb, m, n, k, false, true);
    cpu::GemmShape s;
    s.m = m;
    s.n = n;
    s.k = k;
    s.tb = true;
    std::vector<float> got(static_cast<size_t>(m * n));
    REQUIRE(cpu::onednn_gemm_f32(s, va.data(), vb.data(), nullptr, false, got.data()));
    check_near(got, want, k, "c^T = b a^T");
    // The same inside wider rows: a, b and c each with 3 more columns than they use.
    std::vector<float> wa(static_cast<size_t>(m * (k + 3))), wb(static_cast<size_t>(n * (k + 3)));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p) wa[static_cast<size_t>(i * (k + 3) + p)] = va[static_cast<size_t>(i * k + p)];
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) wb[static_cast<size_t>(j * (k + 3) + p)] = vb[static_cast<size_t>(j * k + p)];
    s.lda = s.ldb = k + 3;
    s.ldc = n + 3;
    std::vector<float> wc(static_cast<size_t>(m * (n + 3)), -7.f);
    REQUIRE(cpu::onednn_gemm_f32(s, wa.data(), wb.data(), nullptr, false, wc.data()));
    std::vector<float> packed;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) packed.push_back(wc[static_cast<size_t>(i * (n + 3) + j)]);
      for (int64_t j = n; j < n + 3; ++j) CHECK(wc[static_cast<size_t>(i * (n + 3) + j)] == -7.f);  // untouched
    }
    check_near(packed, want, k, "strided");
  }
}

TEST_CASE("onednn: banded products cover the whole; below 2^24 two column bands on any number of threads") {
  if (!cpu::onednn_available()) return;
  struct BandCase {
    int64_t m, n, k;
    bool ta, tb;
    bool fixed;    // two column bands whatever the threads
    bool columns;  // else rows
  };
  // An MLP's forward product and its weight gradient (12.8M multiply-adds: two column
  // bands), a forward product with b transposed; from 2^24 one band per thread across the
  // operand read once: 256^3 (columns when n >= m) and a weight gradient with many rows.
  for (BandCase c : {BandCase{64, 256, 784, false, false, true, true}, BandCase{784, 256, 64, true, false, true, true},
                     BandCase{64, 256, 784, false, true, true, true}, BandCase{256, 256, 256, false, false, false, true},
                     BandCase{1024, 64, 256, true, false, false, false}}) {
    CAPTURE(c.m);
    CAPTURE(c.n);
    CAPTURE(c.ta);
    CAPTURE(c.tb);
    cpu::GemmShape s;
    s.m = c.m;
    s.n = c.n;
    s.k = c.k;
    s.ta = c.ta;
    s.tb = c.tb;
    CHECK(s.macs() >= cpu::threaded_product_macs());
    auto va = random_values(c.m * c.k, 61);
    auto vb = random_values(c.k * c.n, 62);
    auto bias = random_values(c.n, 63);
    for (bool with_bias : {false, true}) {
      std::vector<float> whole(static_cast<size_t>(c.m * c.n)), banded(whole.size(), -7.0f);
      const float* pbias = with_bias ? bias.data() : nullptr;
      REQUIRE(cpu::onednn_gemm_f32(s, va.data(), vb.data(), pbias, with_bias, whole.data()));
      const int64_t bands = cpu::gemm_bands(s, 2);
      REQUIRE(bands == 2);
      // Fixed bands do not follow the thread count (their bits must not); the others do.
      CHECK(cpu::fixed_bands(s) == c.fixed);
      CHECK(cpu::gemm_bands(s, 1) == (c.fixed ? 2 : 1));
      CHECK(cpu::gemm_bands(s, 8) == (c.fixed ? 2 : 8));
      for (int64_t i = 0; i < bands; ++i) {
        const cpu::GemmBand b = cpu::gemm_band(s, i, bands);
        CHECK((c.columns ? b.shape.n : b.shape.m) == (c.columns ? c.n : c.m) / 2);
        REQUIRE(cpu::onednn_gemm_f32(b.shape, va.data() + b.a_offset, vb.data() + b.b_offset,
                                     with_bias ? bias.data() + b.bias_offset : nullptr, with_bias,
                                     banded.data() + b.c_offset));
      }
      auto want = naive(va, vb, c.m, c.n, c.k, c.ta, c.tb);
      if (with_bias)
        for (size_t i = 0; i < want.size(); ++i) want[i] = std::max(0.0, want[i] + bias[i % static_cast<size_t>(c.n)]);
      check_near(banded, want, c.k, "bands");
      check_near(whole, want, c.k, "whole");
    }
  }
}

TEST_CASE("run_bands: every band once, on the caller and pool threads; failures and throws reported") {
  for (int threads : {1, 2}) {
    af::CpuDevice dev(threads);
    for (int64_t bands : {1, 2, 3, 64}) {
      CAPTURE(threads);
      CAPTURE(bands);
      std::vector<std::atomic<int>> runs(static_cast<size_t>(bands));
      CHECK(cpu::run_bands(&dev, bands, [&](int64_t i) {
        runs[static_cast<size_t>(i)].fetch_add(1);
        return true;
      }));
      for (auto& r : runs) CHECK(r.load() == 1);
      // A pool thread that starts late finds nothing to do; the caller never waits for it.
      CHECK_FALSE(cpu::run_bands(&dev, bands, [&](int64_t i) { return i != bands - 1; }));
      CHECK_FALSE(cpu::run_bands(&dev, bands, [&](int64_t i) -> bool {
        if (i == 0) throw std::runtime_error("band 0");
        return true;
      }));
    }
  }
}

TEST_CASE("onednn: primitives are cached per shape and shared by concurrent callers") {
  if (!cpu::onednn_available()) {
    CHECK(cpu::onednn_cached_primitives() == 0);
    return;
  }
  cpu::GemmShape s;
  s.m = 23;
  s.n = 29;
  s.k = 31;
  auto va = random_values(s.m * s.k, 51);
  auto vb = random_values(s.k * s.n, 52);
  const auto want = naive(va, vb, s.m, s.n, s.k, false, false);
  std::vector<float> c(static_cast<size_t>(s.m * s.n));
  REQUIRE(cpu::onednn_gemm_f32(s, va.data(), vb.data(), nullptr, false, c.data()));
  const int64_t cached = cpu::onednn_cached_primitives();
  REQUIRE(cpu::onednn_gemm_f32(s, va.data(), vb.data(), nullptr, false, c.data()));
  CHECK(cpu::onednn_cached_primitives() == cached);
  s.n = 30;
  auto vb2 = random_values(s.k * s.n, 53);
  std::vector<float> c2(static_cast<size_t>(s.m * s.n));
  REQUIRE(cpu::onednn_gemm_f32(s, va.data(), vb2.data(), nullptr, false, c2.data()));
  CHECK(cpu::onednn_cached_primitives() == cached + 1);
  s.n = 29;

  // Four threads on the same primitive at once, each with its own output.
  std::vector<std::vector<float>> outs(4, std::vector<float>(c.size()));
  std::vector<std::thread> workers;
  std::atomic<int> failures{0};
  for (auto& out : outs)
    workers.emplace_back([&, o = out.data()] {
      for (int r = 0; r < 50; ++r)
        if (!cpu::onednn_gemm_f32(s, va.data(), vb.data(), nullptr, false, o)) ++failures;
    });
  for (auto& w : workers) w.join();
  CHECK(failures == 0);
  for (auto& out : outs) check_near(out, want, s.k, "concurrent");
}

// ---- Conv2D forward ----

namespace {

struct BackendConvGuard {
  explicit BackendConvGuard(cpu::ConvBackend b) { cpu::set_conv_backend(b); }
  ~BackendConvGuard() { cpu::set_conv_backend(cpu::ConvBackend::automatic); }
  BackendConvGuard(const BackendConvGuard&) = delete;
  BackendConvGuard& operator=(const BackendConvGuard&) = delete;
};

std::vector<float> run_conv(cpu::ConvBackend backend, const af::Tensor& x, const af::Tensor& w,
                            std::vector<int64_t> strides, const std::string& padding, int threads) {
  BackendConvGuard guard(backend);
  af::Graph g;
  auto y = af::conv2d(af::constant(g, x), af::constant(g, w), strides, padding);
  af::SessionOptions o;
  o.intra_op_threads = threads;
  af::Tensor t = aft::eval(g, {y}, {}, o)[0];
  return std::vector<float>(t.data<float>(), t.data<float>() + t.num_elements());
}

struct ConvCase {
  int64_t n, h, w, c, kh, kw, o, s;
  const char* padding;
};

}  // namespace

TEST_CASE("onednn: Conv2D forward through oneDNN agrees with the im2col + Eigen path") {
  const std::vector<ConvCase> cases = {
      {50, 28, 28, 1, 5, 5, 32, 1, "SAME"},  // the CNN's first layer
      {5, 14, 14, 32, 5, 5, 64, 1, "SAME"},  // its second, fewer images
      {3, 9, 7, 3, 3, 3, 4, 2, "SAME"},      // stride 2, odd sizes: uneven padding
      {2, 9, 7, 3, 3, 2, 5, 2, "VALID"},     // VALID with input left unread (Eigen only)
      {4, 6, 6, 8, 1, 1, 16, 1, "VALID"},    // 1x1: the im2col path's direct case
      {1, 5, 5, 2, 5, 5, 3, 1, "VALID"},     // window = image: one output pixel
  };
  uint32_t seed = 100;
  for (const ConvCase& c : cases) {
    CAPTURE(c.n);
    CAPTURE(c.h);
    CAPTURE(c.c);
    CAPTURE(c.kh);
    CAPTURE(c.s);
    CAPTURE(std::string(c.padding));
    auto vx = random_values(c.n * c.h * c.w * c.c, seed++);
    auto vw = random_values(c.kh * c.kw * c.c * c.o, seed++);
    af::Tensor x = af::Tensor::from_vector(vx, {c.n, c.h, c.w, c.c});
    af::Tensor w = af::Tensor::from_vector(vw, {c.kh, c.kw, c.c, c.o});
    for (int threads : {1, 2}) {
      CAPTURE(threads);
      auto eigen = run_conv(cpu::ConvBackend::eigen, x, w, {c.s, c.s}, c.padding, threads);
      std::vector<double> want(eigen.begin(), eigen.end());
      const int64_t k = c.kh * c.kw * c.c;
      check_near(run_conv(cpu::ConvBackend::onednn, x, w, {c.s, c.s}, c.padding, threads), want, k, "onednn");
      check_near(run_conv(cpu::ConvBackend::automatic, x, w, {c.s, c.s}, c.padding, threads), want, k, "automatic");
    }
  }
}

TEST_CASE("onednn: Conv2D's input and filter gradients through oneDNN agree with the Eigen path") {
  // loss = sum(conv2d(x, w) * r): its gradients are Conv2DBackpropInput(w, r) and
  // Conv2DBackpropFilter(x, r), with r random so that no weight of the sum is uniform.
  const std::vector<ConvCase> cases = {
      {50, 28, 28, 1, 5, 5, 32, 1, "SAME"},  // the CNN's first layer
      {6, 14, 14, 32, 5, 5, 64, 1, "SAME"},  // its second
      {3, 9, 7, 3, 3, 3, 4, 2, "SAME"},      // stride 2, uneven padding
      {2, 9, 7, 3, 3, 2, 5, 2, "VALID"},     // input left unread: Eigen only
      {1, 6, 6, 8, 1, 1, 16, 1, "VALID"},    // 1x1, one image (one band)
      // Stride 1 runs the input gradient as a forward convolution of the turned filter:
      // VALID (full padding there), and even sizes whose SAME padding is uneven.
      {2, 8, 7, 3, 3, 2, 5, 1, "VALID"},
      {2, 7, 8, 4, 2, 4, 3, 1, "SAME"},
  };
  uint32_t seed = 300;
  for (const ConvCase& c : cases) {
    CAPTURE(c.n);
    CAPTURE(c.h);
    CAPTURE(c.c);
    CAPTURE(c.s);
    CAPTURE(std::string(c.padding));
    auto vx = random_values(c.n * c.h * c.w * c.c, seed++);
    auto vw = random_values(c.kh * c.kw * c.c * c.o, seed++);
    af::Tensor x = af::Tensor::from_vector(vx, {c.n, c.h, c.w, c.c});
    af::Tensor w = af::Tensor::from_vector(vw, {c.kh, c.kw, c.c, c.o});
    const bool same = std::string(c.padding) == "SAME";
    const int64_t oh = same ? (c.h + c.s - 1) / c.s : (c.h - c.kh) / c.s + 1;
    const int64_t ow = same ? (c.w + c.s - 1) / c.s : (c.w - c.kw) / c.s + 1;
    auto vr = random_values(c.n * oh * ow * c.o, seed++);
    auto grads = [&](cpu::ConvBackend backend, int threads) {
      BackendConvGuard guard(backend);
      af::Graph g;
      auto xc = af::constant(g, x);
      auto wc = af::constant(g, w);
      auto y = af::conv2d(xc, wc, {c.s, c.s}, c.padding);
      auto r = af::constant(g, af::Tensor::from_vector(vr, {c.n, oh, ow, c.o}));
      auto dxdw = af::gradients({af::reduce_sum(y * r)}, {xc, wc});
      af::SessionOptions o;
      o.intra_op_threads = threads;
      return aft::eval(g, dxdw, {}, o);
    };
    for (int threads : {1, 2}) {
      CAPTURE(threads);
      auto eigen = grads(cpu::ConvBackend::eigen, threads);
      auto onednn = grads(cpu::ConvBackend::onednn, threads);
      for (int i = 0; i < 2; ++i) {
        const af::Tensor& e = eigen[static_cast<size_t>(i)];
        const af::Tensor& d = onednn[static_cast<size_t>(i)];
        REQUIRE(e.shape() == d.shape());
        std::vector<double> want(e.data<float>(), e.data<float>() + e.num_elements());
        // The filter gradient sums over every output position of every image.
        const int64_t k = i == 0 ? c.kh * c.kw * c.o : c.n * c.h * c.w;
        check_near(std::vector<float>(d.data<float>(), d.data<float>() + d.num_elements()), want, k,
                   i == 0 ? "input gradient" : "filter gradient");
      }
    }
  }
}

TEST_CASE("onednn: a direct oneDNN convolution matches a naive one, and refuses what it cannot do") {
  cpu::ConvDims d{2, 6, 5, 3, 3, 3, 4, 6, 5, 1, 1, 1, 1};  // SAME, stride 1
  auto vx = random_values(d.n * d.h * d.w * d.c, 7);
  auto vw = random_values(d.kh * d.kw * d.c * d.o, 8);
  std::vector<float> y(static_cast<size_t>(d.n * d.oh * d.ow * d.o), -9.f);
  if (!cpu::onednn_available()) {
    CHECK_FALSE(cpu::onednn_conv2d_f32(d, vx.data(), vw.data(), y.data()));
    CHECK(y[0] == -9.f);
    return;
  }
  REQUIRE(cpu::onednn_conv2d_f32(d, vx.data(), vw.data(), y.data()));
  // The gradients for an upstream gradient gy: dx = sum gy * w, dw = sum x * gy, over the
  // same (image, output pixel, tap) triples as the forward sum.
  auto gy = random_values(static_cast<int64_t>(y.size()), 9);
  std::vector<float> dx(vx.size(), -9.f), dw(vw.size(), -9.f);
  REQUIRE(cpu::onednn_conv2d_backprop_input_f32(d, vw.data(), gy.data(), dx.data()));
  REQUIRE(cpu::onednn_conv2d_backprop_filter_f32(d, vx.data(), gy.data(), dw.data()));
  std::vector<double> want_dx(dx.size(), 0.0), want_dw(dw.size(), 0.0);
  std::vector<double> want(y.size(), 0.0);
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t i = 0; i < d.oh; ++i)
      for (int64_t j = 0; j < d.ow; ++j)
        for (int64_t o = 0; o < d.o; ++o) {
          double s = 0;
          for (int64_t a = 0; a < d.kh; ++a)
            for (int64_t b = 0; b < d.kw; ++b)
              for (int64_t c = 0; c < d.c; ++c) {
                const int64_t r = i + a - d.pad_t, q = j + b - d.pad_l;
                if (r < 0 || r >= d.h || q < 0 || q >= d.w) continue;
                const size_t xi = static_cast<size_t>(((n * d.h + r) * d.w + q) * d.c + c);
                const size_t wi = static_cast<size_t>(((a * d.kw + b) * d.c + c) * d.o + o);
                const size_t yi = static_cast<size_t>(((n * d.oh + i) * d.ow + j) * d.o + o);
                s += vx[xi] * vw[wi];
                want_dx[xi] += gy[yi] * vw[wi];
                want_dw[wi] += vx[xi] * gy[yi];
              }
          want[static_cast<size_t>(((n * d.oh + i) * d.ow + j) * d.o + o)] = s;
        }
  check_near(y, want, d.kh * d.kw * d.c, "naive conv");
  check_near(dx, want_dx, d.kh * d.kw * d.o, "naive input gradient");
  check_near(dw, want_dw, d.n * d.oh * d.ow, "naive filter gradient");
  // VALID, stride 2 over 6 rows with a 3-row window leaves the last row unread: a
  // negative trailing padding oneDNN does not take; the kernel falls back to Eigen.
  cpu::ConvDims v{1, 6, 6, 1, 3, 3, 1, 2, 2, 2, 2, 0, 0};
  std::vector<float> out(4, -9.f);
  CHECK_FALSE(cpu::onednn_conv2d_f32(v, vx.data(), vw.data(), out.data()));
  CHECK(out[0] == -9.f);
  std::vector<float> grad(9, -9.f);
  CHECK_FALSE(cpu::onednn_conv2d_backprop_filter_f32(v, vx.data(), vw.data(), grad.data()));
  CHECK(grad[0] == -9.f);
}
