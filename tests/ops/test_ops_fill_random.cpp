// Fill, ZerosLike, OnesLike and the random ops: values, dtypes, seeding rules and the
// statistics of the draws.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include <actorflow/op_registry.h>

#include "../../ops/cpu/random_philox.h"
#include "test_util.h"

namespace af = actorflow;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

template <typename F>
std::string build_error(F&& f) {
  try {
    f();
  } catch (const af::Error& e) {
    return e.what();
  }
  return "";
}

struct Moments {
  double mean = 0, stddev = 0, min = 0, max = 0;
};

Moments moments(const af::Tensor& t) {
  Moments m;
  const int64_t n = t.num_elements();
  double sum = 0, sq = 0;
  m.min = m.max = t.element_as_double(0);
  for (int64_t i = 0; i < n; ++i) {
    double v = t.element_as_double(i);
    sum += v;
    sq += v * v;
    m.min = std::min(m.min, v);
    m.max = std::max(m.max, v);
  }
  m.mean = sum / static_cast<double>(n);
  m.stddev = std::sqrt(std::max(0.0, sq / static_cast<double>(n) - m.mean * m.mean));
  return m;
}

// Runs the enclosing test case once per session backend (doctest re-enters the case for
// each SUBCASE): the actor runtime (the default) and the sequential reference evaluator.
af::SessionOptions each_backend() {
  af::SessionOptions o;
  SUBCASE("actor runtime") { o.executor = ""; }
  SUBCASE("sequential") { o.executor = "sequential"; }
  return o;
}

af::Tensor run_once(af::Graph& g, const af::Output& y, af::SessionOptions opts = {}) {
  auto sess = af::Session::create(g, opts).value();
  auto r = sess.eval(y);
  if (!r.ok()) FAIL(r.status().to_string());
  return *r;
}

}  // namespace

TEST_CASE("fill makes a tensor of one value in every dtype") {
  af::Graph g;
  auto a = af::fill(g, {2, 3}, 1.5);
  auto b = af::fill(g, {4}, -2.25, af::f64);
  auto c = af::fill(g, {2, 2}, 7, af::i32);
  auto d = af::fill(g, {3}, -9e15, af::i64);
  auto e = af::fill(g, {2}, 255, af::u8);
  auto f = af::fill(g, {2}, 3, af::boolean);
  auto s = af::fill(g, {}, 4);
  auto z = af::fill(g, {0, 5}, 1);
  CHECK(a.shape() == af::Shape{2, 3});
  CHECK(c.dtype() == af::i32);
  auto out = aft::eval(g, {a, b, c, d, e, f, s, z});
  CHECK(out[0].to_vector<float>() == std::vector<float>(6, 1.5f));
  CHECK(out[1].to_vector<double>() == std::vector<double>(4, -2.25));
  CHECK(out[2].to_vector<int32_t>() == std::vector<int32_t>(4, 7));
  CHECK(out[3].to_vector<int64_t>() == std::vector<int64_t>(3, -9000000000000000LL));
  CHECK(out[4].to_vector<uint8_t>() == std::vector<uint8_t>(2, 255));
  CHECK(out[5].to_vector<bool>() == std::vector<bool>{true, true});
  CHECK(out[6].shape() == af::Shape{});
  CHECK(out[6].item<float>() == 4.0f);
  CHECK(out[7].shape() == af::Shape{0, 5});
}

TEST_CASE("fill of a large tensor is complete") {
  af::Graph g;
  auto a = af::fill(g, {1000, 1000}, 0.5);
  auto t = run_once(g, a);
  const float* p = t.data<float>();
  CHECK(std::all_of(p, p + t.num_elements(), [](float v) { return v == 0.5f; }));
}

TEST_CASE("fill: build-time errors name the node") {
  af::Graph g;
  std::string e = build_error([&] { af::fill(g, {-1, 2}, 1.0, af::f32, "partial"); });
  CHECK(contains(e, "partial"));
  CHECK(contains(e, "[?,2]"));
  CHECK(contains(build_error([&] { af::fill(g, {2}, 300, af::u8, "big"); }), "big"));
  CHECK_THROWS_AS(af::fill(g, {2}, 1.5e10, af::i32), af::Error);
  CHECK_THROWS_AS(af::fill(g, {2}, std::nan(""), af::i64), af::Error);
  CHECK_THROWS_AS(af::fill(g, {2}, 1, af::string), af::Error);
  CHECK_THROWS_AS(af::fill(g, af::Shape::unknown_rank(), 1), af::Error);
  // NaN and infinities are legitimate floats.
  auto inf = af::fill(g, {1}, INFINITY);
  CHECK(std::isinf(run_once(g, inf).item<float>()));
}

TEST_CASE("zeros_like and ones_like keep dtype and shape") {
  af::Graph g;
  auto x = af::constant(g, std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  auto xi = af::constant(g, af::Tensor::from_vector<int64_t>({5, 6}, {2}));
  auto xb = af::constant(g, af::Tensor::from_vector<bool>({true, false, true}, {3}));
  auto xd = af::constant(g, af::Tensor::scalar<double>(3.0));
  auto xu = af::constant(g, af::Tensor::from_vector<uint8_t>({9}, {1, 1}));
  auto empty = af::constant(g, af::Tensor::from_vector<int32_t>({}, {0, 3}));
  std::vector<af::Output> ys = {af::zeros_like(x), af::ones_like(x), af::zeros_like(xi), af::ones_like(xi),
                                af::zeros_like(xb), af::ones_like(xb), af::ones_like(xd), af::ones_like(xu),
                                af::zeros_like(empty)};
  CHECK(ys[2].dtype() == af::i64);
  CHECK(ys[1].shape() == af::Shape{2, 3});
  auto out = aft::eval(g, ys);
  CHECK(out[0].to_vector<float>() == std::vector<float>(6, 0.f));
  CHECK(out[1].to_vector<float>() == std::vector<float>(6, 1.f));
  CHECK(out[1].shape() == af::Shape{2, 3});
  CHECK(out[2].to_vector<int64_t>() == std::vector<int64_t>{0, 0});
  CHECK(out[3].to_vector<int64_t>() == std::vector<int64_t>{1, 1});
  CHECK(out[4].to_vector<bool>() == std::vector<bool>{false, false, false});
  CHECK(out[5].to_vector<bool>() == std::vector<bool>{true, true, true});
  CHECK(out[6].dtype() == af::f64);
  CHECK(out[6].item<double>() == 1.0);
  CHECK(out[7].to_vector<uint8_t>() == std::vector<uint8_t>{1});
  CHECK(out[8].shape() == af::Shape{0, 3});

  auto p = af::placeholder(g, af::f32, {-1, 2}, "p");
  auto z = af::zeros_like(p);
  CHECK(z.shape() == af::Shape{-1, 2});
  auto zt = aft::eval1(g, z, {{p, af::Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2})}});
  CHECK(zt.shape() == af::Shape{3, 2});
  auto str = af::constant(g, "text", "text");
  CHECK(contains(build_error([&] { af::ones_like(str); }), "'text' (string[])"));
}

TEST_CASE("Philox4x32-10 matches the Random123 known-answer vectors") {
  using actorflow::rng::philox4x32_10;
  auto r = philox4x32_10({0, 0, 0, 0}, {0, 0});
  CHECK(r == actorflow::rng::PhiloxCounter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
  r = philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu});
  CHECK(r == actorflow::rng::PhiloxCounter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
  r = philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u});
  CHECK(r == actorflow::rng::PhiloxCounter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
}

TEST_CASE("Philox4x32-10 in lanes gives each block's own words, across the counter's 32-bit carry") {
  using namespace actorflow::rng;
  constexpr int L = kPhiloxLanes;
  for (uint64_t first : {uint64_t{0}, uint64_t{0xfffffff8u}, (uint64_t{1} << 40) + 5}) {
    for (PhiloxKey key : {PhiloxKey{0, 0}, PhiloxKey{0xa4093822u, 0x299f31d0u}}) {
      uint32_t words[4][L];
      philox4x32_10_lanes(first, key, words);
      for (int l = 0; l < L; ++l) {
        const uint64_t block = first + static_cast<uint64_t>(l);
        const PhiloxCounter one =
            philox4x32_10({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0, 0}, key);
        CAPTURE(block);
        CHECK(PhiloxCounter{words[0][l], words[1][l], words[2][l], words[3][l]} == one);
      }
    }
  }
}

TEST_CASE("random ops draw element group g from Philox block g of their seeds' key, on any thread count") {
  using namespace actorflow::rng;
  // More groups than a few lanes' worth, and a partial last group: 4 x 16 x 3 + 7 floats.
  constexpr int64_t n = 199;
  af::Graph g;
  auto u = af::random_uniform(g, {n}, -2, 3, 21);
  auto z = af::random_normal(g, {n}, 1, 0.5, 22);
  auto t = af::truncated_normal(g, {n}, 0, 1, 23);
  auto key_of = [](const af::Output& o) {
    const uint64_t k = mix64(mix64(static_cast<uint64_t>(o.node().attr_int("seed"))) ^
                             static_cast<uint64_t>(o.node().attr_int("seed2")));
    return PhiloxKey{static_cast<uint32_t>(k), static_cast<uint32_t>(k >> 32)};
  };
  auto block = [](int64_t group, uint64_t sub, PhiloxKey key) {
    return philox4x32_10({static_cast<uint32_t>(group), 0, static_cast<uint32_t>(sub), 0}, key);
  };
  std::vector<float> want_u(n), want_z(n), want_t;
  for (int64_t grp = 0; grp * 4 < n; ++grp) {
    float v[4], w[4];
    uniforms<float>(block(grp, 0, key_of(u)), v);
    normals<float>(block(grp, 0, key_of(z)), w);
    for (int64_t j = 0; j < 4 && grp * 4 + j < n; ++j) {
      want_u[static_cast<size_t>(grp * 4 + j)] = static_cast<float>(-2 + 5.0 * static_cast<double>(v[j]));
      want_z[static_cast<size_t>(grp * 4 + j)] = static_cast<float>(1 + 0.5 * static_cast<double>(w[j]));
    }
    const int64_t cnt = std::min<int64_t>(4, n - grp * 4);
    int64_t filled = 0;
    for (uint64_t sub = 0; filled < cnt; ++sub) {
      normals<float>(block(grp, sub, key_of(t)), w);
      for (int j = 0; j < 4 && filled < cnt; ++j)
        if (std::fabs(w[j]) < 2.0f) want_t.push_back(w[j]), ++filled;
    }
  }
  for (int threads : {1, 3}) {
    CAPTURE(threads);
    af::SessionOptions o;
    o.intra_op_threads = threads;
    auto check = [&](const af::Output& y, const std::vector<float>& want) {
      const af::Tensor got = run_once(g, y, o);
      REQUIRE(got.num_elements() == n);
      for (int64_t i = 0; i < n; ++i) {
        CAPTURE(i);
        CHECK(got.data<float>()[i] == want[static_cast<size_t>(i)]);
      }
    };
    check(u, want_u);
    check(z, want_z);
    check(t, want_t);
  }
}

TEST_CASE("random ops with the same seeds give the same tensors in fresh sessions") {
  auto build = [](af::Graph& g) {
    return std::vector<af::Output>{af::random_normal(g, {3, 5}, 0, 1, 42),
                                   af::random_uniform(g, {7}, -1, 1, 42),
                                   af::truncated_normal(g, {2, 9}, 0, 1, 42, af::f64)};
  };
  af::Graph g1, g2;
  auto y1 = build(g1);
  auto y2 = build(g2);
  for (size_t i = 0; i < y1.size(); ++i) {
    af::Tensor a = run_once(g1, y1[i]);
    af::Tensor b = run_once(g1, y1[i]);
    af::Tensor c = run_once(g2, y2[i]);
    CHECK(a.equals(b));
    CHECK(a.equals(c));
  }
  // The whole sequence replays, not just the first draw.
  af::SessionOptions opts = each_backend();
  auto s1 = af::Session::create(g1, opts).value();
  auto s2 = af::Session::create(g2, opts).value();
  for (int step = 0; step < 3; ++step) CHECK(s1.eval(y1[0])->equals(*s2.eval(y2[0])));
  // A graph seed alone seeds every op deterministically, each op differently.
  af::Graph h1, h2;
  h1.set_seed(7);
  h2.set_seed(7);
  auto a1 = af::random_normal(h1, {4});
  auto b1 = af::random_normal(h1, {4});
  auto a2 = af::random_normal(h2, {4});
  CHECK(run_once(h1, a1).equals(run_once(h2, a2)));
  CHECK_FALSE(run_once(h1, a1).equals(run_once(h1, b1)));
}

TEST_CASE("random ops: different seeds differ, and no seed at all is nondeterministic") {
  af::Graph g;
  auto a = af::random_uniform(g, {16}, 0, 1, 1);
  auto b = af::random_uniform(g, {16}, 0, 1, 2);
  auto free = af::random_uniform(g, {16});
  CHECK(free.node().attr_int("seed") == 0);
  CHECK(free.node().attr_int("seed2") == 0);
  CHECK_FALSE(run_once(g, a).equals(run_once(g, b)));
  CHECK_FALSE(run_once(g, free).equals(run_once(g, free)));
}

TEST_CASE("two runs in one session draw different values") {
  af::Graph g;
  std::vector<af::Output> ys = {af::random_normal(g, {10}, 0, 1, 3), af::random_uniform(g, {10}, 0, 1, 3),
                                af::truncated_normal(g, {10}, 0, 1, 3)};
  auto sess = af::Session::create(g, each_backend()).value();
  for (auto& y : ys) {
    auto first = sess.eval(y);
    auto second = sess.eval(y);
    REQUIRE(first.ok());
    REQUIRE(second.ok());
    CHECK_FALSE(first->equals(*second));
  }
}

TEST_CASE("random values do not depend on the number of threads") {
  af::Graph g;
  auto y = af::random_normal(g, {300, 301}, 0, 1, 11);
  auto z = af::truncated_normal(g, {100001}, 0, 1, 11);
  af::SessionOptions one;
  one.intra_op_threads = 1;
  af::SessionOptions four;
  four.intra_op_threads = 4;
  CHECK(run_once(g, y, one).equals(run_once(g, y, four)));
  CHECK(run_once(g, z, one).equals(run_once(g, z, four)));
}

TEST_CASE("random_normal: mean and stddev of 100k draws") {
  af::Graph g;
  auto a = af::random_normal(g, {100000}, 3, 2, 5);
  auto b = af::random_normal(g, {100, 1000}, -1, 0.5, 6, af::f64);
  CHECK(a.dtype() == af::f32);
  CHECK(b.dtype() == af::f64);
  auto out = aft::eval(g, {a, b});
  Moments ma = moments(out[0]), mb = moments(out[1]);
  CHECK(ma.mean == doctest::Approx(3).epsilon(0.01));
  CHECK(ma.stddev == doctest::Approx(2).epsilon(0.01));
  CHECK(mb.mean == doctest::Approx(-1).epsilon(0.005));
  CHECK(mb.stddev == doctest::Approx(0.5).epsilon(0.01));
  // A normal has tails: 100k draws reach beyond 4 sigma on at least one side.
  CHECK(std::max(ma.max - 3, 3 - ma.min) > 4 * 2);
}

TEST_CASE("random_uniform: 100k draws lie in [min, max) with the right moments") {
  af::Graph g;
  auto a = af::random_uniform(g, {100000}, -2, 3, 8);
  auto b = af::random_uniform(g, {100000}, 0, 1, 9, af::f64);
  auto out = aft::eval(g, {a, b});
  Moments ma = moments(out[0]), mb = moments(out[1]);
  CHECK(ma.min >= -2);
  CHECK(ma.max < 3);
  CHECK(ma.min < -1.99);
  CHECK(ma.max > 2.99);
  CHECK(ma.mean == doctest::Approx(0.5).epsilon(0.03));
  CHECK(ma.stddev == doctest::Approx(5 / std::sqrt(12.0)).epsilon(0.01));
  CHECK(mb.min >= 0);
  CHECK(mb.max < 1);
  CHECK(mb.mean == doctest::Approx(0.5).epsilon(0.01));
  // Values on a tiny range still stay below maxval after rounding to f32.
  auto tight = af::random_uniform(g, {10000}, 1, 1.0000001, 10);
  auto t = aft::eval1(g, tight);
  const float* p = t.data<float>();
  CHECK(std::all_of(p, p + t.num_elements(), [](float v) { return v >= 1.0f && v < 1.0000001f; }));
}

TEST_CASE("truncated_normal never goes beyond 2 stddev") {
  af::Graph g;
  auto a = af::truncated_normal(g, {100000}, 1, 2, 12);
  auto b = af::truncated_normal(g, {1001}, 0, 0.1, 13, af::f64);
  auto out = aft::eval(g, {a, b});
  Moments ma = moments(out[0]), mb = moments(out[1]);
  CHECK(ma.min >= 1 - 4 - 1e-5);
  CHECK(ma.max <= 1 + 4 + 1e-5);
  CHECK(ma.min < -2.9);  // close to the bound: the draws do reach it
  CHECK(ma.max > 4.9);
  CHECK(ma.mean == doctest::Approx(1).epsilon(0.02));
  // The stddev of a standard normal truncated at +-2 is 0.87962566.
  CHECK(ma.stddev == doctest::Approx(2 * 0.87962566).epsilon(0.01));
  CHECK(mb.min >= -0.2);
  CHECK(mb.max <= 0.2);
}

TEST_CASE("random ops: empty and scalar shapes, and build-time errors") {
  af::Graph g;
  auto e = af::random_normal(g, {0, 3}, 0, 1, 1);
  auto s = af::random_uniform(g, {}, 5, 6, 1);
  auto out = aft::eval(g, {e, s});
  CHECK(out[0].shape() == af::Shape{0, 3});
  CHECK(out[1].shape() == af::Shape{});
  CHECK(out[1].item<float>() >= 5.0f);
  CHECK(out[1].item<float>() < 6.0f);

  CHECK(contains(build_error([&] { af::random_normal(g, {-1, 3}); }), "[?,3]"));
  CHECK(contains(build_error([&] { af::random_normal(g, {2}, 0, -1); }), "stddev"));
  CHECK(contains(build_error([&] { af::random_uniform(g, {2}, 1, 0); }), "maxval"));
  CHECK_THROWS_AS(af::random_uniform(g, {2}, 0, 1, -1, af::i32), af::Error);
  CHECK_THROWS_AS(af::truncated_normal(g, {2}, std::nan(""), 1), af::Error);
  const af::OpDef* def = af::OpRegistry::global().find("RandomNormal");
  REQUIRE(def);
  CHECK(def->stateful);
  CHECK(af::OpRegistry::global().find("RandomUniform")->stateful);
  CHECK(af::OpRegistry::global().find("TruncatedNormal")->stateful);
}
