// Kernels flush denormal results to zero on every thread that runs them (the caller's,
// the actors', the intra-op pool's), and the caller's own floating-point mode is what it
// was once a run returns.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/denormal.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace af = actorflow;

namespace {

// Float math on this thread, out of the optimizer's reach: whether a denormal result
// survives here.
float product(float a, float b) {
  volatile float x = a, y = b;
  return x * y;
}

struct Case {
  std::string executor;
  int threads;
};

}  // namespace

TEST_CASE("denormal results are zero and normal ones exact, on every executor and pool thread") {
  REQUIRE(product(1e-20f, 1e-20f) != 0.0f);  // this thread does not flush before a run
  for (const Case& c : {Case{"", 1}, Case{"", 2}, Case{"sequential", 1}}) {
    CAPTURE(c.executor);
    CAPTURE(c.threads);
    af::Graph g;
    auto x = af::placeholder(g, af::f32, {-1}, "x");
    auto tiny = x * 1e-20;     // 1e-20 * 1e-20 = 1e-40, a denormal
    auto scaled = x * 1e10;    // a denormal fed in, times 1e10: 1e-30, a normal float
    af::SessionOptions o;
    o.executor = c.executor;
    o.intra_op_threads = c.threads;
    auto sess = af::Session::create(g, o).value();
    // Large enough that the multiply is split over the pool's threads.
    const int64_t n = int64_t{1} << 20;
    std::vector<float> small(static_cast<size_t>(n), 1e-20f);
    auto out = sess.run({tiny}, {{x, af::Tensor::from_vector(small)}});
    REQUIRE(out.ok());
    const std::vector<float> got = (*out)[0].to_vector<float>();
    int64_t nonzero = 0;
    for (float v : got) nonzero += v != 0.0f;
    CHECK(nonzero == 0);

    std::vector<float> fed{1e-40f, std::numeric_limits<float>::denorm_min(), 1e-30f};
    REQUIRE(std::fpclassify(fed[0]) == FP_SUBNORMAL);
    out = sess.run({scaled}, {{x, af::Tensor::from_vector(fed)}});
    REQUIRE(out.ok());
    const std::vector<float> s = (*out)[0].to_vector<float>();
#if defined(__x86_64__) || defined(__i386__)  // AArch64's one mode flushes inputs too
    CHECK(s[0] == doctest::Approx(1e-30f).scale(0).epsilon(1e-5));
    CHECK(s[1] / (fed[1] * 1e10f) == doctest::Approx(1.0).epsilon(1e-5));
#endif
    CHECK(s[2] == doctest::Approx(1e-20f).scale(0).epsilon(1e-6));

    // The caller's mode is its own again.
    CHECK_FALSE(af::denormals_flushed_on_this_thread());
    CHECK(product(1e-20f, 1e-20f) != 0.0f);
  }
}

TEST_CASE("ScopedFlushDenormal sets the mode for its lifetime and restores the thread's") {
  REQUIRE_FALSE(af::denormals_flushed_on_this_thread());
  {
    af::ScopedFlushDenormal flush;
    CHECK(af::denormals_flushed_on_this_thread());
    CHECK(product(1e-20f, 1e-20f) == 0.0f);
    {
      af::ScopedFlushDenormal nested;  // already set: leaves it set when it ends
    }
    CHECK(af::denormals_flushed_on_this_thread());
  }
  CHECK_FALSE(af::denormals_flushed_on_this_thread());
  CHECK(product(1e-20f, 1e-20f) != 0.0f);
}
