// The fold of a pooled Relu's gradient into the max-pool gradient (_FusedMaxPoolGrad):
// Select(Greater(r, 0), MaxPoolGrad(r, pool, g), 0) runs as one node with the same bits,
// on tiled and overlapping windows, f32 and f64, with NaN, signed zeros and ties in r;
// the pattern is left alone where the fold would change the result or a removed node is
// needed (another threshold, a -0 else-value, another tensor tested, the gradient fetched).
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "fusion_test_util.h"

namespace af = actorflow;
using aft::OneActorPerNode;
using aft::run_counted;

namespace {

af::SessionOptions fusing(bool on) {
  af::SessionOptions o;
  o.optimizer.fuse_conv_bias_relu = on;  // the switch this fold shares
  o.intra_op_threads = 2;
  return o;
}

bool same_bits(const af::Tensor& a, const af::Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw_data(), b.raw_data(), a.bytes()) == 0;
}

// r as a Relu's output looks, and worse: many +0 (ties at 0 in a window), -0, repeated
// positive values (ties at the maximum), negatives and NaN.
af::Tensor relu_like(af::DType t, const af::Shape& shape, std::mt19937& rng) {
  af::Tensor x(t, shape);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double values[] = {0.0, 0.0, 0.0, -0.0, 0.5, 1.0, 1.0, 2.0, 0.25, -1.0, nan};
  std::uniform_int_distribution<int> pick(0, 10);
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    const double v = values[pick(rng)];
    if (t == af::f32) x.data<float>()[i] = static_cast<float>(v);
    else x.data<double>()[i] = v;
  }
  return x;
}

struct Pool {
  int64_t n, h, w, c, k, s;
  const char* padding;
};

// Select(Greater(r, threshold), dr, zero) where dr = MaxPoolGrad(r, max_pool(r), w), the
// gradient of sum(max_pool(r) * w) with respect to r.
struct Pattern {
  af::Graph g;
  af::Output r, dr, selected;
  af::FeedDict feeds;
};

void build(Pattern& p, af::DType t, const Pool& q, double threshold, double zero, std::mt19937& rng,
           bool test_other_tensor = false) {
  p.r = af::placeholder(p.g, t, {q.n, q.h, q.w, q.c}, "r");
  auto pooled = af::max_pool2d(p.r, {q.k, q.k}, {q.s, q.s}, q.padding, "pool");
  const af::Shape out = pooled.shape();
  auto w = af::placeholder(p.g, t, out, "w");
  p.dr = af::gradients({af::reduce_sum(pooled * w)}, {p.r})[0];
  REQUIRE(p.dr.node().op == "MaxPoolGrad");
  auto other = af::placeholder(p.g, t, {q.n, q.h, q.w, q.c}, "other");
  auto tested = test_other_tensor ? other : p.r;
  p.selected = af::where(tested > threshold, p.dr, af::constant(p.g, zero, t, "zero"));
  af::Tensor wv = aft::random_tensor(t, out, rng);
  af::Tensor rv = relu_like(t, {q.n, q.h, q.w, q.c}, rng);
  p.feeds = {{p.r, rv}, {w, wv}, {other, rv}};
}

}  // namespace

TEST_CASE_FIXTURE(OneActorPerNode, "a pooled Relu's gradient folded into the max-pool gradient: the same bits, 2 nodes fewer") {
  std::mt19937 rng(11);
  // The CNN's pools (2x2/2 tiling the input), a tiling window on an odd size (SAME pads
  // the last window), overlapping windows (3x3/2 SAME as Inception's, 3x3/1 VALID),
  // channel counts off the vector width.
  const std::vector<Pool> pools{{3, 8, 8, 32, 2, 2, "SAME"}, {2, 6, 4, 5, 2, 2, "VALID"}, {2, 7, 5, 3, 2, 2, "SAME"},
                                {2, 9, 9, 17, 3, 2, "SAME"}, {1, 6, 7, 4, 3, 1, "VALID"}};
  for (auto dtype : {af::f32, af::f64}) {
    for (const Pool& q : pools) {
      INFO(std::string(af::dtype_name(dtype)) << " r=[" << q.n << "," << q.h << "," << q.w << "," << q.c << "] window "
                                              << q.k << "/" << q.s << " " << std::string(q.padding));
      Pattern p;
      build(p, dtype, q, 0.0, 0.0, rng);
      auto on = run_counted(p.g, fusing(true), {p.selected}, p.feeds);
      auto off = run_counted(p.g, fusing(false), {p.selected}, p.feeds);
      CHECK(on.actors == off.actors - 2);  // the Greater and the MaxPoolGrad
      CHECK(same_bits(on.out[0], off.out[0]));
      // Not vacuous: some gradient passed the test, and some maximum was masked (0).
      int64_t passed = 0, masked = 0;
      auto dr = run_counted(p.g, fusing(false), {p.dr}, p.feeds).out[0];
      for (int64_t i = 0; i < dr.num_elements(); ++i) {
        const double v = on.out[0].element_as_double(i), unmasked = dr.element_as_double(i);
        if (v != 0) ++passed;
        if (v == 0 && unmasked != 0) ++masked;
      }
      CHECK(passed > 0);
      CHECK(masked > 0);
    }
  }
}

TEST_CASE_FIXTURE(OneActorPerNode, "a pooled Relu's gradient: patterns the fold must leave alone") {
  std::mt19937 rng(12);
  const Pool q{2, 8, 8, 6, 2, 2, "VALID"};
  auto unfused = [&](Pattern& p, const std::vector<af::Fetch>& fetches) {
    auto on = run_counted(p.g, fusing(true), fetches, p.feeds);
    auto off = run_counted(p.g, fusing(false), fetches, p.feeds);
    CHECK(on.actors == off.actors);
    for (size_t i = 0; i < fetches.size(); ++i) CHECK(same_bits(on.out[i], off.out[i]));
  };
  SUBCASE("a threshold other than 0") {
    Pattern p;
    build(p, af::f32, q, 0.5, 0.0, rng);
    unfused(p, {p.selected});
  }
  SUBCASE("-0 as the else-value: the Select writes it, sign and all") {
    Pattern p;
    build(p, af::f32, q, 0.0, -0.0, rng);
    unfused(p, {p.selected});
    auto out = run_counted(p.g, fusing(true), {p.selected}, p.feeds).out[0];
    int64_t negative_zeros = 0;
    for (int64_t i = 0; i < out.num_elements(); ++i)
      negative_zeros += out.data<float>()[i] == 0 && std::signbit(out.data<float>()[i]);
    CHECK(negative_zeros > 0);
  }
  SUBCASE("the test reads another tensor than the pooling") {
    Pattern p;
    build(p, af::f32, q, 0.0, 0.0, rng, /*test_other_tensor=*/true);
    unfused(p, {p.selected});
  }
  SUBCASE("the max-pool gradient is fetched too") {
    Pattern p;
    build(p, af::f32, q, 0.0, 0.0, rng);
    unfused(p, {p.selected, p.dr});
  }
}
