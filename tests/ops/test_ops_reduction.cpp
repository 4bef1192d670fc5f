// Reductions (Sum, Mean, Max, Min, Prod) and ArgMax/ArgMin.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "test_util.h"

namespace af = actorflow;
using aft::check_close;
using aft::eval1;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

template <typename T>
af::Output c(af::Graph& g, const std::vector<T>& v, af::Shape s) {
  return af::constant(g, af::Tensor::from_vector(v, std::move(s)));
}

using ReduceFn = af::Output (*)(const af::Output&, std::vector<int64_t>, bool, const std::string&);
struct Kind {
  const char* name;
  ReduceFn fn;
};
const Kind kKinds[] = {{"Sum", af::reduce_sum}, {"Mean", af::reduce_mean}, {"Max", af::reduce_max},
                       {"Min", af::reduce_min}, {"Prod", af::reduce_prod}};

// Reference: reduce `x` of shape `dims` over `axes` (empty = all) in double.
std::vector<double> reference(const std::string& kind, const std::vector<double>& x, const std::vector<int64_t>& dims,
                              std::vector<int64_t> axes) {
  const int r = static_cast<int>(dims.size());
  std::vector<bool> red(static_cast<size_t>(r), axes.empty());
  for (int64_t a : axes) red[static_cast<size_t>(a < 0 ? a + r : a)] = true;
  int64_t out_n = 1;
  for (int i = 0; i < r; ++i)
    if (!red[static_cast<size_t>(i)]) out_n *= dims[static_cast<size_t>(i)];
  double init = kind == "Prod" ? 1 : kind == "Max" ? -kInf : kind == "Min" ? kInf : 0;
  std::vector<double> acc(static_cast<size_t>(out_n), init);
  std::vector<int64_t> cnt(static_cast<size_t>(out_n), 0);
  std::vector<int64_t> idx(static_cast<size_t>(r), 0);
  for (size_t e = 0; e < x.size(); ++e) {
    int64_t o = 0;
    for (int i = 0; i < r; ++i)
      if (!red[static_cast<size_t>(i)]) o = o * dims[static_cast<size_t>(i)] + idx[static_cast<size_t>(i)];
    double& a = acc[static_cast<size_t>(o)];
    double v = x[e];
    if (kind == "Sum" || kind == "Mean") a += v;
    else if (kind == "Prod") a *= v;
    else if (kind == "Max") a = std::max(a, v);
    else a = std::min(a, v);
    ++cnt[static_cast<size_t>(o)];
    for (int i = r - 1; i >= 0 && ++idx[static_cast<size_t>(i)] == dims[static_cast<size_t>(i)]; --i) idx[static_cast<size_t>(i)] = 0;
  }
  if (kind == "Mean")
    for (size_t i = 0; i < acc.size(); ++i) acc[i] /= static_cast<double>(cnt[i]);
  return acc;
}

std::vector<float> ramp(int64_t n, float lo, float hi, uint64_t seed = 12345) {
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    x = lo + (hi - lo) * static_cast<float>((seed >> 40) & 0xffffff) / 16777216.0f;
  }
  return v;
}

std::vector<double> as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

}  // namespace

TEST_CASE("reductions of a [2,3] f32 tensor: every kind, axis lists, negative axes, keepdims") {
  af::Graph g;
  auto x = c<float>(g, {1, -2, 3, 4, 5, -6}, af::Shape{2, 3});
  auto out = aft::eval(g, {af::reduce_sum(x), af::reduce_sum(x, {0}), af::reduce_sum(x, {1}), af::reduce_sum(x, {-1}),
                           af::reduce_sum(x, {0, 1}), af::reduce_sum(x, {-2, -1}, true), af::reduce_sum(x, {1}, true),
                           af::reduce_mean(x, {0}), af::reduce_mean(x, {1}), af::reduce_max(x, {1}), af::reduce_min(x, {0}),
                           af::reduce_prod(x, {1}), af::reduce_prod(x), af::reduce_max(x), af::reduce_min(x, {-1}, true)});
  CHECK(out[0].shape() == af::Shape{});
  check_close(out[0], {5});
  CHECK(out[1].shape() == af::Shape{3});
  check_close(out[1], {5, 3, -3});
  check_close(out[2], {2, 3});
  check_close(out[3], {2, 3});
  check_close(out[4], {5});
  CHECK(out[5].shape() == af::Shape{1, 1});
  check_close(out[5], {5});
  CHECK(out[6].shape() == af::Shape{2, 1});
  check_close(out[6], {2, 3});
  check_close(out[7], {2.5, 1.5, -1.5});
  check_close(out[8], {2.0 / 3, 1});
  check_close(out[9], {3, 5});
  check_close(out[10], {1, -2, -6});
  check_close(out[11], {-6, -120});
  check_close(out[12], {720});
  check_close(out[13], {5});
  CHECK(out[14].shape() == af::Shape{2, 1});
  check_close(out[14], {-2, -6});
}

TEST_CASE("reductions on f64, i32, i64 and u8; integer mean truncates toward zero") {
  af::Graph g;
  auto d = c<double>(g, {1.5, 2.5, -1, 4}, af::Shape{2, 2});
  auto i = c<int32_t>(g, {1, 2, -1, -2, 7, 8}, af::Shape{3, 2});
  auto l = c<int64_t>(g, {3000000000LL, 3000000000LL, -5, 2}, af::Shape{2, 2});
  auto u = c<uint8_t>(g, {200, 100, 50, 7}, af::Shape{4});
  auto big = c<int32_t>(g, {2000000000, 2000000000}, af::Shape{2});
  auto out = aft::eval(g, {af::reduce_sum(d, {0}), af::reduce_mean(d), af::reduce_prod(d, {1}), af::reduce_max(d, {0}),
                           af::reduce_mean(i, {1}), af::reduce_sum(i, {0}), af::reduce_max(i), af::reduce_min(i, {0}),
                           af::reduce_prod(i, {1}), af::reduce_sum(l, {1}), af::reduce_mean(l, {0}), af::reduce_min(l),
                           af::reduce_sum(u), af::reduce_max(u), af::reduce_mean(u), af::reduce_sum(big),
                           af::reduce_mean(big)});
  check_close(out[0], {0.5, 6.5}, 1e-15);
  check_close(out[1], {1.75}, 1e-15);
  check_close(out[2], {3.75, -4}, 1e-15);
  check_close(out[3], {1.5, 4}, 1e-15);
  CHECK(out[4].dtype() == af::i32);
  CHECK(out[4].to_vector<int32_t>() == std::vector<int32_t>{1, -1, 7});  // 3/2 = 1, -3/2 = -1
  CHECK(out[5].to_vector<int32_t>() == std::vector<int32_t>{7, 8});
  CHECK(out[6].item<int32_t>() == 8);
  CHECK(out[7].to_vector<int32_t>() == std::vector<int32_t>{-1, -2});
  CHECK(out[8].to_vector<int32_t>() == std::vector<int32_t>{2, 2, 56});
  CHECK(out[9].to_vector<int64_t>() == std::vector<int64_t>{6000000000LL, -3});
  CHECK(out[10].to_vector<int64_t>() == std::vector<int64_t>{1499999997LL, 1500000001LL});
  CHECK(out[11].item<int64_t>() == -5);
  CHECK(out[12].dtype() == af::u8);
  CHECK(out[12].item<uint8_t>() == static_cast<uint8_t>(357));  // wraps like TF
  CHECK(out[13].item<uint8_t>() == 200);
  CHECK(out[14].item<uint8_t>() == 89);  // 357 / 4, from the unwrapped sum
  CHECK(out[15].item<int32_t>() == static_cast<int32_t>(4000000000LL - 4294967296LL));  // wraps
  CHECK(out[16].item<int32_t>() == 2000000000);
}

TEST_CASE("reductions of a 3-D tensor over every axis combination match a reference") {
  // Shapes chosen to hit each internal path: rows, columns, middle axes, strided mixes,
  // and dims of size 1 that must be ignored.
  const std::vector<std::vector<int64_t>> shapes = {{4, 5, 6}, {3, 1, 7}, {2, 3, 1}, {5, 17, 33}};
  const std::vector<std::vector<int64_t>> axis_sets = {{}, {0}, {1}, {2}, {0, 1}, {1, 2}, {0, 2}, {-3, -1}, {0, 1, 2}};
  for (const auto& dims : shapes) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::vector<float> xf = ramp(n, -1.5f, 1.5f);
    for (auto& v : xf) v = std::round(v * 8) / 8;  // exact in float: sums and products are exact-ish
    std::vector<double> xd = as_double(xf);
    for (const auto& axes : axis_sets) {
      for (const Kind& k : kKinds) {
        for (bool keep : {false, true}) {
          af::Graph g;
          auto xf_c = c(g, xf, af::Shape(dims));
          auto xd_c = c(g, xd, af::Shape(dims));
          auto yf = k.fn(xf_c, axes, keep, "r");
          auto yd = k.fn(xd_c, axes, keep, "r");
          auto out = aft::eval(g, {yf, yd});
          std::vector<double> want = reference(k.name, xd, dims, axes);
          INFO(k.name << " over shape " << af::Shape(dims).to_string() << " axes size " << axes.size() << " keepdims " << keep);
          CHECK(out[0].shape() == yf.shape());
          CHECK(out[1].shape() == yd.shape());
          check_close(out[0], want, 1e-5);
          check_close(out[1], want, 1e-12);
        }
      }
    }
  }
}

TEST_CASE("large reductions: f32 sum of 1e6+ values keeps precision; rows, columns, bias gradient") {
  af::Graph g;
  const int64_t n = 1 << 20;
  std::vector<float> ones(static_cast<size_t>(n), 0.1f);
  std::vector<float> r = ramp(n, -1.0f, 3.0f);
  auto c1 = c(g, ones, af::Shape{n});
  auto cr = c(g, r, af::Shape{n});
  auto rows = c(g, r, af::Shape{4, n / 4});          // 4 long rows: split into chunks
  auto cols3 = c(g, std::vector<float>(r.begin(), r.begin() + 300000 * 3), af::Shape{300000, 3});
  std::vector<float> r2 = ramp(1000 * 1500, -1.0f, 3.0f, 777);
  auto bias = c(g, r2, af::Shape{1000, 1500});
  auto mid = c(g, std::vector<float>(r.begin(), r.begin() + 8 * 700 * 130), af::Shape{8, 700, 130});
  auto wide = c(g, std::vector<float>(r.begin(), r.begin() + 200 * 5000), af::Shape{200, 5000});  // column tiles
  auto out = aft::eval(g, {af::reduce_sum(c1), af::reduce_sum(cr), af::reduce_mean(cr), af::reduce_max(cr), af::reduce_min(cr),
                           af::reduce_sum(rows, {1}), af::reduce_sum(cols3, {0}), af::reduce_sum(bias, {0}),
                           af::reduce_mean(mid, {1}), af::reduce_max(bias, {0}), af::reduce_sum(wide, {0}),
                           af::reduce_min(wide, {0}), af::reduce_prod(cols3, {0})});
  const double want_ones = static_cast<double>(0.1f) * n;
  CHECK(out[0].item<float>() == doctest::Approx(want_ones).epsilon(1e-6));
  double sum = 0, mx = -kInf, mn = kInf;
  for (float v : r) {
    sum += v;
    mx = std::max(mx, static_cast<double>(v));
    mn = std::min(mn, static_cast<double>(v));
  }
  CHECK(out[1].item<float>() == doctest::Approx(sum).epsilon(1e-6));
  CHECK(out[2].item<float>() == doctest::Approx(sum / n).epsilon(1e-6));
  CHECK(out[3].item<float>() == static_cast<float>(mx));
  CHECK(out[4].item<float>() == static_cast<float>(mn));
  check_close(out[5], reference("Sum", as_double(r), {4, n / 4}, {1}), 1e-6);
  check_close(out[6], reference("Sum", as_double(std::vector<float>(r.begin(), r.begin() + 900000)), {300000, 3}, {0}), 1e-6);
  check_close(out[7], reference("Sum", as_double(r2), {1000, 1500}, {0}), 1e-6);
  check_close(out[8], reference("Mean", as_double(std::vector<float>(r.begin(), r.begin() + 8 * 700 * 130)), {8, 700, 130}, {1}),
              1e-5);
  check_close(out[9], reference("Max", as_double(r2), {1000, 1500}, {0}), 0);
  std::vector<double> wide_d = as_double(std::vector<float>(r.begin(), r.begin() + 200 * 5000));
  check_close(out[10], reference("Sum", wide_d, {200, 5000}, {0}), 1e-6);
  check_close(out[11], reference("Min", wide_d, {200, 5000}, {0}), 0);
  check_close(out[12], reference("Prod", as_double(std::vector<float>(r.begin(), r.begin() + 900000)), {300000, 3}, {0}), 1e-6);

  // A float32 product accumulates in double: only the final value is rounded to float.
  af::Graph g2;
  auto p = c<float>(g2, {1e30f, 1e30f, 1e-30f, 1e-30f, 1e20f, 1e20f, 1e-20f, 1e-20f}, af::Shape{2, 4});
  auto po = aft::eval(g2, {af::reduce_prod(p), af::reduce_prod(p, {1}), af::reduce_prod(p, {0})});
  check_close(po[0], {1}, 1e-6);
  check_close(po[1], {1, 1}, 1e-6);
  check_close(po[2], {kInf, kInf, 0, 0});  // 1e50 and 1e-50 are out of float range
}

TEST_CASE("reductions: scalars, empty tensors, NaN") {
  af::Graph g;
  auto s = af::constant(g, 4.0f);
  auto e = c<float>(g, {}, af::Shape{0});
  auto e20 = c<double>(g, {}, af::Shape{2, 0});
  auto nan = c<float>(g, {1, std::numeric_limits<float>::quiet_NaN(), 3}, af::Shape{3});
  auto out = aft::eval(g, {af::reduce_sum(s), af::reduce_mean(s, {}, true), af::reduce_sum(e), af::reduce_prod(e), af::reduce_mean(e),
                           af::reduce_max(e), af::reduce_min(e), af::reduce_sum(e20, {1}), af::reduce_prod(e20, {1}),
                           af::reduce_sum(e20, {0}), af::reduce_max(e20, {1}, true), af::reduce_max(nan), af::reduce_min(nan),
                           af::reduce_sum(nan)});
  CHECK(out[0].shape() == af::Shape{});
  check_close(out[0], {4});
  CHECK(out[1].shape() == af::Shape{});
  check_close(out[1], {4});
  check_close(out[2], {0});
  check_close(out[3], {1});
  check_close(out[4], {kNaN});
  check_close(out[5], {-kInf});
  check_close(out[6], {kInf});
  CHECK(out[7].shape() == af::Shape{2});
  check_close(out[7], {0, 0});
  check_close(out[8], {1, 1});
  CHECK(out[9].shape() == af::Shape{0});
  CHECK(out[10].shape() == af::Shape{2, 1});
  check_close(out[10], {-kInf, -kInf});
  check_close(out[11], {kNaN});  // NaN propagates (numpy)
  check_close(out[12], {kNaN});
  check_close(out[13], {kNaN});

  // Integers: Sum/Prod of nothing are 0/1; Max/Min/Mean of nothing fail at run time.
  af::Graph gi;
  auto ei = c<int32_t>(gi, {}, af::Shape{2, 0});
  auto oi = aft::eval(gi, {af::reduce_sum(ei, {1}), af::reduce_prod(ei, {1}), af::reduce_max(ei, {0})});
  CHECK(oi[0].to_vector<int32_t>() == std::vector<int32_t>{0, 0});
  CHECK(oi[1].to_vector<int32_t>() == std::vector<int32_t>{1, 1});
  CHECK(oi[2].shape() == af::Shape{0});  // nothing to compute, no error
  for (auto fn : {af::reduce_max, af::reduce_min, af::reduce_mean}) {
    auto y = fn(ei, {1}, false, "empty_int");
    af::Status st = aft::eval_status(gi, y);
    CHECK_FALSE(st.ok());
    CHECK(st.message().find("empty_int") != std::string::npos);
  }
}

TEST_CASE("reductions with unknown dims and unknown rank at graph time") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1, 3}, "x");
  auto a1 = af::reduce_sum(x, {1});
  auto a0 = af::reduce_mean(x, {0});
  auto k0 = af::reduce_max(x, {0}, true);
  auto all = af::reduce_min(x);
  auto neg = af::reduce_prod(x, {-1}, true);
  CHECK(a1.shape() == af::Shape{-1});
  CHECK(a0.shape() == af::Shape{3});
  CHECK(k0.shape() == af::Shape{1, 3});
  CHECK(all.shape() == af::Shape{});
  CHECK(neg.shape() == af::Shape{-1, 1});
  auto u = af::placeholder(g, af::f64, af::Shape::unknown_rank(), "u");
  auto us = af::reduce_sum(u, {5}, false, "sum_u");
  CHECK_FALSE(us.shape().has_rank());
  af::FeedDict feeds = {{x, af::Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3})}};
  auto out = aft::eval(g, {a1, a0, k0, all, neg}, feeds);
  check_close(out[0], {6, 15});
  check_close(out[1], {2.5, 3.5, 4.5});
  CHECK(out[2].shape() == af::Shape{1, 3});
  check_close(out[2], {4, 5, 6});
  check_close(out[3], {1});
  CHECK(out[4].shape() == af::Shape{2, 1});
  check_close(out[4], {6, 120});
  // An axis out of range only shows at run time when the rank was unknown.
  af::Status st = aft::eval_status(g, us, {{u, af::Tensor::from_vector<double>({1, 2}, {2})}});
  CHECK_FALSE(st.ok());
  CHECK(st.message().find("sum_u") != std::string::npos);
  CHECK(st.message().find("axis 5") != std::string::npos);
}

TEST_CASE("reduction shape errors at build time name the node and the input") {
  af::Graph g;
  auto x = c<float>(g, {1, 2, 3, 4, 5, 6}, af::Shape{2, 3});
  try {
    af::reduce_sum(x, {2}, false, "bad_sum");
    FAIL("expected an error");
  } catch (const af::Error& e) {
    std::string m = e.what();
    CHECK(m.find("bad_sum") != std::string::npos);
    CHECK(m.find("[2,3]") != std::string::npos);
    CHECK(m.find("axis 2") != std::string::npos);
  }
  CHECK_THROWS_AS(af::reduce_mean(x, {-3}), af::Error);
  CHECK_THROWS_AS(af::reduce_max(x, {0, 7}), af::Error);
  CHECK_THROWS_AS(af::reduce_sum(c<bool>(g, {true}, af::Shape{1})), af::Error);
  CHECK_THROWS_AS(af::reduce_sum(af::constant(g, "s")), af::Error);
  CHECK_THROWS_AS(af::argmax(x, 2), af::Error);
  CHECK_THROWS_AS(af::argmin(x, -3), af::Error);
  try {
    af::argmax(af::constant(g, 1.0f), -1, "am_scalar");
    FAIL("expected an error");
  } catch (const af::Error& e) {
    CHECK(std::string(e.what()).find("am_scalar") != std::string::npos);
  }
}

TEST_CASE("ArgMax and ArgMin: ties, negative axes, inner axes, NaN, dtypes") {
  af::Graph g;
  auto x = c<float>(g, {1, 3, 3, 5, 2, 5}, af::Shape{2, 3});
  auto d = c<double>(g, {1, std::numeric_limits<double>::quiet_NaN(), 5, -1}, af::Shape{4});
  auto i = c<int32_t>(g, {4, -2, 9, -2, 9, 4}, af::Shape{6});
  // [2,3,2]: axis 1 reduces with an inner dim of 2.
  auto t = c<int64_t>(g, {1, 9, 7, 2, 7, 9, 0, 0, -1, 5, 3, 5}, af::Shape{2, 3, 2});
  auto am = af::argmax(x);
  CHECK(am.dtype() == af::i64);
  CHECK(am.shape() == af::Shape{2});
  auto out = aft::eval(g, {am, af::argmax(x, 0), af::argmin(x, -1), af::argmin(x, -2), af::argmax(d), af::argmin(d),
                           af::argmax(i), af::argmin(i, 0), af::argmax(t, 1), af::argmin(t, 1), af::argmax(t, -1), af::argmin(t, 0)});
  CHECK(out[0].to_vector<int64_t>() == std::vector<int64_t>{1, 0});  // first of the tied 3s / 5s
  CHECK(out[1].to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1});
  CHECK(out[2].to_vector<int64_t>() == std::vector<int64_t>{0, 1});
  CHECK(out[3].to_vector<int64_t>() == std::vector<int64_t>{0, 1, 0});
  CHECK(out[4].item<int64_t>() == 1);  // NaN wins, as numpy
  CHECK(out[5].item<int64_t>() == 1);
  CHECK(out[6].item<int64_t>() == 2);
  CHECK(out[7].item<int64_t>() == 1);
  CHECK(out[8].shape() == af::Shape{2, 2});
  CHECK(out[8].to_vector<int64_t>() == std::vector<int64_t>{1, 0, 2, 1});
  CHECK(out[9].to_vector<int64_t>() == std::vector<int64_t>{0, 1, 1, 0});
  CHECK(out[10].to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1, 0, 1, 1});
  CHECK(out[11].to_vector<int64_t>() == std::vector<int64_t>{1, 1, 1, 0, 1, 1});
}

TEST_CASE("ArgMax: large inputs, unknown dims, empty axes") {
  af::Graph g;
  const int64_t rows = 300, cols = 1000;
  std::vector<float> v = ramp(rows * cols, -5, 5, 99);
  auto big = c(g, v, af::Shape{rows, cols});
  auto ph = af::placeholder(g, af::f32, {-1, 3}, "p");
  auto pa = af::argmax(ph);
  CHECK(pa.shape() == af::Shape{-1});
  auto p0 = af::argmin(ph, 0);
  CHECK(p0.shape() == af::Shape{3});
  auto e = c<float>(g, {}, af::Shape{0, 3});
  auto out = aft::eval(g, {af::argmax(big, 1), af::argmin(big, 0), pa, p0, af::argmax(e, 1)},
                       {{ph, af::Tensor::from_vector<float>({0, 7, 7, 9, 1, 2}, {2, 3})}});
  for (int64_t r = 0; r < rows; ++r) {
    int64_t best = 0;
    for (int64_t j = 1; j < cols; ++j)
      if (v[static_cast<size_t>(r * cols + j)] > v[static_cast<size_t>(r * cols + best)]) best = j;
    CHECK(out[0].data<int64_t>()[r] == best);
  }
  for (int64_t j = 0; j < cols; j += 7) {
    int64_t best = 0;
    for (int64_t r = 1; r < rows; ++r)
      if (v[static_cast<size_t>(r * cols + j)] < v[static_cast<size_t>(best * cols + j)]) best = r;
    CHECK(out[1].data<int64_t>()[j] == best);
  }
  CHECK(out[2].to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  CHECK(out[3].to_vector<int64_t>() == std::vector<int64_t>{0, 1, 1});
  CHECK(out[4].shape() == af::Shape{0});

  auto e20 = c<float>(g, {}, af::Shape{2, 0});
  auto bad = af::argmax(e20, 1, "argmax_empty");
  CHECK(bad.shape() == af::Shape{2});
  af::Status st = aft::eval_status(g, bad);
  CHECK_FALSE(st.ok());
  CHECK(st.message().find("argmax_empty") != std::string::npos);
}
