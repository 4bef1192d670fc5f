// Elementwise unary ops, activations, Softmax/LogSoftmax, LogicalNot and Cast.
#include <algorithm>
#include <cmath>
#include <cstdint>
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
constexpr float kInfF = std::numeric_limits<float>::infinity();
constexpr float kNaNF = std::numeric_limits<float>::quiet_NaN();

template <typename T>
af::Output c(af::Graph& g, const std::vector<T>& v, af::Shape s) {
  return af::constant(g, af::Tensor::from_vector(v, std::move(s)));
}
template <typename T>
af::Output c(af::Graph& g, const std::vector<T>& v) {
  return c(g, v, af::Shape{static_cast<int64_t>(v.size())});
}

// Evaluates op(x) for a 1-D constant of T holding `in`.
template <typename T, typename Op>
af::Tensor run1(const std::vector<T>& in, Op op) {
  af::Graph g;
  auto y = op(c(g, in));
  af::Tensor t = eval1(g, y);
  CHECK(t.dtype() == af::DTypeOf<T>::value);
  CHECK(t.shape() == af::Shape{static_cast<int64_t>(in.size())});
  return t;
}

// Deterministic pseudo-random values in [lo, hi).
std::vector<float> ramp(int64_t n, float lo, float hi) {
  std::vector<float> v(static_cast<size_t>(n));
  uint64_t s = 12345;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = lo + (hi - lo) * static_cast<float>((s >> 40) & 0xffffff) / 16777216.0f;
  }
  return v;
}

// Element i of t against ref(x_i) computed in double, within rel relative error.
template <typename Ref>
void check_against(const af::Tensor& t, const std::vector<float>& x, Ref ref, double rel) {
  REQUIRE(t.num_elements() == static_cast<int64_t>(x.size()));
  int bad = 0;
  for (size_t i = 0; i < x.size() && bad < 5; ++i) {
    double want = ref(static_cast<double>(x[i]));
    double got = t.element_as_double(static_cast<int64_t>(i));
    if (!(std::fabs(got - want) <= rel * std::fabs(want) + 1e-37)) {
      ++bad;
      INFO("x = " << x[i] << ": got " << got << ", want " << want);
      CHECK(false);
    }
  }
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("Neg, Abs, Sign, Square on floats and signed integers") {
  check_close(run1<float>({-2.5f, -0.0f, 0.0f, 1.5f, 3.0f}, [](auto x) { return af::neg(x); }), {2.5, 0, 0, -1.5, -3});
  check_close(run1<double>({-2.5, 4.0}, [](auto x) { return -x; }), {2.5, -4.0});
  CHECK(run1<int32_t>({-3, 0, 7, INT32_MIN}, [](auto x) { return af::neg(x); }).to_vector<int32_t>() ==
        std::vector<int32_t>{3, 0, -7, INT32_MIN});  // wraps, like TF
  CHECK(run1<int64_t>({-3, 5}, [](auto x) { return af::neg(x); }).to_vector<int64_t>() == std::vector<int64_t>{3, -5});

  check_close(run1<float>({-2.5f, 0.0f, 1.5f}, [](auto x) { return af::abs(x); }), {2.5, 0, 1.5});
  check_close(run1<double>({-1e300, 2.0}, [](auto x) { return af::abs(x); }), {1e300, 2.0});
  CHECK(run1<int32_t>({-3, 0, 7}, [](auto x) { return af::abs(x); }).to_vector<int32_t>() == std::vector<int32_t>{3, 0, 7});
  CHECK(run1<int64_t>({-3000000000LL, 4}, [](auto x) { return af::abs(x); }).to_vector<int64_t>() ==
        std::vector<int64_t>{3000000000LL, 4});

  check_close(run1<float>({-2.5f, 0.0f, 1.5f, -0.0f}, [](auto x) { return af::sign(x); }), {-1, 0, 1, 0});
  check_close(run1<double>({-7.0, 1e-300, kNaN}, [](auto x) { return af::sign(x); }), {-1, 1, kNaN});
  CHECK(run1<int32_t>({-3, 0, 7}, [](auto x) { return af::sign(x); }).to_vector<int32_t>() == std::vector<int32_t>{-1, 0, 1});
  CHECK(run1<int64_t>({-3, 0, 7}, [](auto x) { return af::sign(x); }).to_vector<int64_t>() == std::vector<int64_t>{-1, 0, 1});

  check_close(run1<float>({-3.0f, 0.5f}, [](auto x) { return af::square(x); }), {9, 0.25});
  check_close(run1<double>({-3.0, 1e200}, [](auto x) { return af::square(x); }), {9, kInf});
  CHECK(run1<int32_t>({-3, 4}, [](auto x) { return af::square(x); }).to_vector<int32_t>() == std::vector<int32_t>{9, 16});
  CHECK(run1<int64_t>({-3000000000LL}, [](auto x) { return af::square(x); }).to_vector<int64_t>() ==
        std::vector<int64_t>{9000000000000000000LL});
}

TEST_CASE("Exp, Log, Sqrt, Rsqrt: hand values and IEEE special cases, f32 and f64") {
  check_close(run1<float>({0.0f, 1.0f, -1.0f, 10.0f, -kInfF, kInfF, kNaNF}, [](auto x) { return af::exp(x); }),
              {1, 2.718281828459045, 0.36787944117144233, 22026.465794806718, 0, kInf, kNaN}, 1e-6);
  check_close(run1<double>({0.0, 1.0, -1.0, 700.0, -kInf}, [](auto x) { return af::exp(x); }),
              {1, 2.718281828459045, 0.36787944117144233, 1.0142320547350045e304, 0}, 1e-12);
  // exp overflows to inf in float32 at ~88.72. Below ~-87.3 its result would be a
  // denormal, which kernels flush to zero (actorflow/denormal.h), as TensorFlow's do.
  af::Tensor big = run1<float>({88.0f, 89.0f, -87.0f, -100.0f, -110.0f}, [](auto x) { return af::exp(x); });
  CHECK(big.data<float>()[0] == doctest::Approx(1.6516362549940018e38).epsilon(1e-6));
  CHECK(std::isinf(big.data<float>()[1]));
  CHECK(big.data<float>()[2] / 1.6458114310822737e-38f == doctest::Approx(1).epsilon(1e-5));  // still normal
  CHECK(big.data<float>()[3] == 0.0f);  // 3.7e-44 unflushed
  CHECK(big.data<float>()[4] == 0.0f);

  check_close(run1<float>({1.0f, 2.718281828f, 0.5f, 1e-30f, 0.0f, -1.0f, kInfF}, [](auto x) { return af::log(x); }),
              {0, 1, -0.6931471805599453, -69.07755278982137, -kInf, kNaN, kInf}, 1e-6);
  check_close(run1<double>({1.0, 1e-300, 0.0, -2.0}, [](auto x) { return af::log(x); }),
              {0, -690.7755278982137, -kInf, kNaN}, 1e-12);
  check_close(run1<float>({1e-40f}, [](auto x) { return af::log(x); }), {std::log(1e-40f)}, 1e-6);  // denormal input

  check_close(run1<float>({4.0f, 2.0f, 0.0f, -1.0f, kInfF}, [](auto x) { return af::sqrt(x); }),
              {2, 1.4142135623730951, 0, kNaN, kInf}, 1e-7);
  check_close(run1<double>({4.0, 2.0, 1e-300}, [](auto x) { return af::sqrt(x); }), {2, 1.4142135623730951, 1e-150}, 1e-15);
  check_close(run1<float>({4.0f, 0.25f, 0.0f, -1.0f}, [](auto x) { return af::rsqrt(x); }), {0.5, 2, kInf, kNaN});
  check_close(run1<double>({4.0, 2.0}, [](auto x) { return af::rsqrt(x); }), {0.5, 0.7071067811865476}, 1e-15);
}

TEST_CASE("Relu, Sigmoid, Tanh, Softplus: hand values, saturation without NaN") {
  check_close(run1<float>({-2.0f, -0.0f, 0.0f, 3.5f, kNaNF}, [](auto x) { return af::relu(x); }), {0, 0, 0, 3.5, kNaN});
  check_close(run1<double>({-2.0, 3.5}, [](auto x) { return af::relu(x); }), {0, 3.5});
  CHECK(run1<int32_t>({-2, 0, 5}, [](auto x) { return af::relu(x); }).to_vector<int32_t>() == std::vector<int32_t>{0, 0, 5});
  CHECK(run1<int64_t>({-2, 5}, [](auto x) { return af::relu(x); }).to_vector<int64_t>() == std::vector<int64_t>{0, 5});

  const std::vector<double> sig = {0.5, 0.7310585786300049, 0.2689414213699951, 4.5397868702434395e-05, 1, 0, 1, 0};
  check_close(run1<float>({0.0f, 1.0f, -1.0f, -10.0f, 1000.0f, -1000.0f, kInfF, -kInfF}, [](auto x) { return af::sigmoid(x); }),
              sig, 1e-6);
  check_close(run1<double>({0.0, 1.0, -1.0, -10.0, 1000.0, -1000.0, kInf, -kInf}, [](auto x) { return af::sigmoid(x); }),
              sig, 1e-14);
  // Deep in the negative tail the result is tiny but still relatively exact.
  af::Tensor tail = run1<double>({-700.0}, [](auto x) { return af::sigmoid(x); });
  CHECK(tail.data<double>()[0] == doctest::Approx(9.85967654375977e-305).epsilon(1e-12));

  const std::vector<double> th = {0, 0.7615941559557649, -0.7615941559557649, 0.0009999996666668, 1, -1, 1, -1};
  check_close(run1<float>({0.0f, 1.0f, -1.0f, 0.001f, 20.0f, -1000.0f, kInfF, -kInfF}, [](auto x) { return af::tanh(x); }), th, 1e-6);
  check_close(run1<double>({0.0, 1.0, -1.0, 0.001, 20.0, -1000.0, kInf, -kInf}, [](auto x) { return af::tanh(x); }), th, 1e-14);

  const std::vector<double> sp = {0.6931471805599453, 1.3132616875182228, 0.31326168751822286, 4.5398899216870535e-05, 1000, 0, 30};
  check_close(run1<float>({0.0f, 1.0f, -1.0f, -10.0f, 1000.0f, -1000.0f, 30.0f}, [](auto x) { return af::softplus(x); }), sp, 1e-6);
  check_close(run1<double>({0.0, 1.0, -1.0, -10.0, 1000.0, -1000.0, 30.0}, [](auto x) { return af::softplus(x); }), sp, 1e-14);
  af::Tensor sp_tail = run1<float>({-80.0f}, [](auto x) { return af::softplus(x); });
  CHECK(sp_tail.data<float>()[0] == doctest::Approx(1.8048513878454153e-35).epsilon(1e-5));  // not rounded to 0
}

TEST_CASE("float32 transcendentals match libm over many values (vectorized and sharded path)") {
  const int64_t n = 200003;  // odd: exercises the vector tail
  af::Graph g;
  std::vector<float> x = ramp(n, -30.0f, 30.0f);
  std::vector<float> pos = ramp(n, 0.0f, 1000.0f);
  auto cx = c(g, x);
  auto cp = c(g, pos);
  auto out = aft::eval(g, {af::exp(cx), af::sigmoid(cx), af::tanh(cx), af::softplus(cx), af::log(cp), af::sqrt(cp),
                           af::rsqrt(cp), af::abs(cx), af::relu(cx)});
  check_against(out[0], x, [](double v) { return std::exp(v); }, 3e-7);
  check_against(out[1], x, [](double v) { return 1 / (1 + std::exp(-v)); }, 5e-7);
  check_against(out[2], x, [](double v) { return std::tanh(v); }, 5e-7);
  check_against(out[3], x, [](double v) { return std::log1p(std::exp(v)); }, 5e-7);
  check_against(out[4], pos, [](double v) { return std::log(v); }, 3e-7);
  check_against(out[5], pos, [](double v) { return std::sqrt(v); }, 1.2e-7);
  check_against(out[6], pos, [](double v) { return 1 / std::sqrt(v); }, 2.4e-7);
  check_against(out[7], x, [](double v) { return std::fabs(v); }, 0);
  check_against(out[8], x, [](double v) { return v > 0 ? v : 0; }, 0);
}

TEST_CASE("unary ops: scalars, empty tensors and unknown dims") {
  af::Graph g;
  auto s = af::constant(g, 2.0f);
  auto e0 = c<float>(g, {}, af::Shape{0});
  auto e20 = c<double>(g, {}, af::Shape{2, 0});
  auto ph = af::placeholder(g, af::f32, {-1, 3}, "x");
  auto y = af::sigmoid(ph);
  CHECK(y.shape() == af::Shape{-1, 3});
  CHECK(y.dtype() == af::f32);
  CHECK(af::exp(s).shape() == af::Shape{});
  auto out = aft::eval(g, {af::exp(s), af::sqrt(e0), af::tanh(e20), af::neg(e20), y, af::softplus(ph)},
                       {{ph, af::Tensor::from_vector<float>({0, 1, -1, 2, -2, 0}, {2, 3})}});
  CHECK(out[0].shape() == af::Shape{});
  check_close(out[0], {7.38905609893065});
  CHECK(out[1].shape() == af::Shape{0});
  CHECK(out[2].shape() == af::Shape{2, 0});
  CHECK(out[2].dtype() == af::f64);
  CHECK(out[3].shape() == af::Shape{2, 0});
  CHECK(out[4].shape() == af::Shape{2, 3});
  check_close(out[4], {0.5, 0.7310585786300049, 0.2689414213699951, 0.8807970779778823, 0.11920292202211755, 0.5});
  check_close(out[5], {0.6931471805599453, 1.3132616875182228, 0.31326168751822286, 2.1269280110429727, 0.1269280110429725,
                       0.6931471805599453});
}

TEST_CASE("unary ops reject unsupported dtypes at build time, naming the node") {
  af::Graph g;
  auto i = c<int32_t>(g, {1, 2}, af::Shape{2});
  auto b = c<bool>(g, {true, false}, af::Shape{2});
  auto f = c<float>(g, {1, 2}, af::Shape{2});
  try {
    af::exp(i, "exp_of_ints");
    FAIL("expected an error");
  } catch (const af::Error& e) {
    std::string m = e.what();
    CHECK(m.find("exp_of_ints") != std::string::npos);
    CHECK(m.find("int32") != std::string::npos);
  }
  CHECK_THROWS_AS(af::sigmoid(i), af::Error);
  CHECK_THROWS_AS(af::neg(b), af::Error);
  CHECK_THROWS_AS(af::logical_not(f), af::Error);
  CHECK_THROWS_AS(af::sqrt(af::constant(g, "s")), af::Error);
  CHECK_THROWS_AS(af::softmax(i), af::Error);
}

TEST_CASE("LogicalNot") {
  af::Graph g;
  auto b = c<bool>(g, {true, false, true}, af::Shape{3});
  auto s = af::constant(g, af::Tensor::scalar(false));
  auto out = aft::eval(g, {af::logical_not(b), af::logical_not(s), af::logical_not(af::logical_not(b))});
  CHECK(out[0].dtype() == af::DType::boolean);
  CHECK(out[0].to_vector<bool>() == std::vector<bool>{false, true, false});
  CHECK(out[1].item<bool>() == true);
  CHECK(out[2].to_vector<bool>() == std::vector<bool>{true, false, true});
}

TEST_CASE("Softmax and LogSoftmax over the last axis: values, stability, -inf") {
  af::Graph g;
  auto x = c<float>(g, {1, 2, 3, 1000, 1001, 1002, -1000, -1001, -1002}, af::Shape{3, 3});
  auto sm = af::softmax(x);
  auto lsm = af::log_softmax(x);
  CHECK(sm.shape() == af::Shape{3, 3});
  auto out = aft::eval(g, {sm, lsm});
  const double a = 0.09003057317038046, b = 0.24472847105479767, cc = 0.6652409557748219;
  check_close(out[0], {a, b, cc, a, b, cc, cc, b, a}, 1e-6);
  const double la = -2.4076059644443806, lb = -1.4076059644443804, lc = -0.4076059644443803;
  check_close(out[1], {la, lb, lc, la, lb, lc, lc, lb, la}, 1e-6);
  for (int r = 0; r < 3; ++r) {
    double sum = 0;
    for (int j = 0; j < 3; ++j) sum += out[0].data<float>()[r * 3 + j];
    CHECK(sum == doctest::Approx(1.0).epsilon(1e-6));
  }

  // -inf entries get probability 0 (log-prob -inf); huge equal values share evenly.
  af::Graph g2;
  auto y = c<double>(g2, {-kInf, 0, 0, 1e300, 1e300, -1e300, -kInf, 5, -kInf}, af::Shape{3, 3});
  auto o2 = aft::eval(g2, {af::softmax(y), af::log_softmax(y)});
  check_close(o2[0], {0, 0.5, 0.5, 0.5, 0.5, 0, 0, 1, 0}, 1e-12);
  check_close(o2[1], {-kInf, -0.6931471805599453, -0.6931471805599453, -0.6931471805599453, -0.6931471805599453, -2e300,
                      -kInf, 0, -kInf},
              1e-12);
  for (int64_t i = 0; i < 9; ++i) CHECK_FALSE(std::isnan(o2[0].element_as_double(i)));
}

TEST_CASE("Softmax: rank 1 and 3, many rows in parallel, empty, scalar rejected, unknown dims") {
  af::Graph g;
  auto v = c<double>(g, {0, std::log(3.0)}, af::Shape{2});
  auto t3 = c<float>(g, {1, 1, 0, 0, 2, 0, 0, 0}, af::Shape{2, 2, 2});
  auto e = c<float>(g, {}, af::Shape{2, 0});
  const int64_t rows = 512, cols = 1001;
  std::vector<float> wide = ramp(rows * cols, -50.0f, 50.0f);
  auto w = c(g, wide, af::Shape{rows, cols});
  auto ph = af::placeholder(g, af::f32, {-1, 3}, "logits");
  auto pm = af::softmax(ph);
  CHECK(pm.shape() == af::Shape{-1, 3});
  auto out = aft::eval(g, {af::softmax(v), af::softmax(t3), af::log_softmax(e), af::softmax(w), af::log_softmax(w), pm},
                       {{ph, af::Tensor::from_vector<float>({0, 0, 0, 1, 2, 3}, {2, 3})}});
  check_close(out[0], {0.25, 0.75}, 1e-14);
  check_close(out[1], {0.5, 0.5, 0.5, 0.5, 0.8807970779778823, 0.11920292202211755, 0.5, 0.5}, 1e-6);
  CHECK(out[2].shape() == af::Shape{2, 0});
  for (int64_t r = 0; r < rows; r += 37) {
    double sum = 0, mx = -kInf;
    for (int64_t j = 0; j < cols; ++j) mx = std::max(mx, static_cast<double>(wide[static_cast<size_t>(r * cols + j)]));
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(wide[static_cast<size_t>(r * cols + j)] - mx);
    double total = 0;
    for (int64_t j = 0; j < cols; ++j) {
      size_t k = static_cast<size_t>(r * cols + j);
      double want = std::exp(wide[k] - mx) / sum;
      total += out[3].data<float>()[k];
      CHECK(out[3].data<float>()[k] == doctest::Approx(want).epsilon(1e-5).scale(1e-30));
      CHECK(out[4].data<float>()[k] == doctest::Approx(wide[k] - mx - std::log(sum)).epsilon(1e-5));
    }
    CHECK(total == doctest::Approx(1.0).epsilon(1e-5));
  }
  check_close(out[5], {1.0 / 3, 1.0 / 3, 1.0 / 3, 0.09003057317038046, 0.24472847105479767, 0.6652409557748219}, 1e-6);

  try {
    af::softmax(af::constant(g, 1.0f), "sm_scalar");
    FAIL("expected an error");
  } catch (const af::Error& err) {
    CHECK(std::string(err.what()).find("sm_scalar") != std::string::npos);
  }
}

TEST_CASE("Cast between numeric dtypes and bool") {
  af::Graph g;
  auto f = c<float>(g, {1.7f, -1.7f, 2.5f, 0.0f, -0.5f}, af::Shape{5});
  auto special = c<double>(g, {kNaN, 1e10, -1e10, kInf, -kInf, 255.9, -3.0, 300.0}, af::Shape{8});
  auto i = c<int32_t>(g, {257, -1, 0, 65}, af::Shape{4});
  auto l = c<int64_t>(g, {1LL << 40, -3}, af::Shape{2});
  auto b = c<bool>(g, {true, false}, af::Shape{2});
  auto u = c<uint8_t>(g, {0, 200, 255}, af::Shape{3});

  auto to_i32 = af::cast(f, af::i32);
  CHECK(to_i32.dtype() == af::i32);
  auto out = aft::eval(g, {to_i32, af::cast(f, af::boolean), af::cast(special, af::i32), af::cast(special, af::u8),
                           af::cast(special, af::i64), af::cast(i, af::u8), af::cast(i, af::f64), af::cast(l, af::f32),
                           af::cast(l, af::i32), af::cast(b, af::f32), af::cast(b, af::i64), af::cast(u, af::i32),
                           af::cast(f, af::f64), af::cast(f, af::f32), af::cast(special, af::boolean)});
  CHECK(out[0].to_vector<int32_t>() == std::vector<int32_t>{1, -1, 2, 0, 0});  // truncation toward zero
  CHECK(out[1].to_vector<bool>() == std::vector<bool>{true, true, true, false, true});
  // float -> int saturates; NaN -> 0.
  CHECK(out[2].to_vector<int32_t>() ==
        std::vector<int32_t>{0, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, 255, -3, 300});
  CHECK(out[3].to_vector<uint8_t>() == std::vector<uint8_t>{0, 255, 0, 255, 0, 255, 0, 255});
  CHECK(out[4].to_vector<int64_t>() ==
        std::vector<int64_t>{0, 10000000000LL, -10000000000LL, INT64_MAX, INT64_MIN, 255, -3, 300});
  CHECK(out[5].to_vector<uint8_t>() == std::vector<uint8_t>{1, 255, 0, 65});  // integer narrowing wraps
  check_close(out[6], {257, -1, 0, 65});
  check_close(out[7], {1099511627776.0, -3});
  CHECK(out[8].to_vector<int32_t>() == std::vector<int32_t>{0, -3});
  check_close(out[9], {1, 0});
  CHECK(out[10].to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  CHECK(out[11].to_vector<int32_t>() == std::vector<int32_t>{0, 200, 255});
  CHECK(out[12].dtype() == af::f64);
  check_close(out[12], {1.7000000476837158, -1.7000000476837158, 2.5, 0, -0.5}, 1e-15);
  CHECK(out[13].to_vector<float>() == std::vector<float>{1.7f, -1.7f, 2.5f, 0.0f, -0.5f});
  CHECK(out[14].to_vector<bool>() == std::vector<bool>{true, true, true, true, true, true, true, true});
}

TEST_CASE("Cast: scalars, empty, unknown dims, and string casts fail at build time") {
  af::Graph g;
  auto ph = af::placeholder(g, af::f64, {-1, 3}, "p");
  auto pc = af::cast(ph, af::i64);
  CHECK(pc.shape() == af::Shape{-1, 3});
  CHECK(pc.dtype() == af::i64);
  auto s = af::cast(af::constant(g, 3.9f), af::i32);
  auto e = af::cast(c<float>(g, {}, af::Shape{2, 0}), af::boolean);
  auto out = aft::eval(g, {pc, s, e}, {{ph, af::Tensor::from_vector<double>({1.5, -2.5, 3, 4, 5, 6}, {2, 3})}});
  CHECK(out[0].shape() == af::Shape{2, 3});
  CHECK(out[0].to_vector<int64_t>() == std::vector<int64_t>{1, -2, 3, 4, 5, 6});
  CHECK(out[1].shape() == af::Shape{});
  CHECK(out[1].item<int32_t>() == 3);
  CHECK(out[2].shape() == af::Shape{2, 0});
  CHECK(out[2].dtype() == af::boolean);

  try {
    af::cast(af::constant(g, "text"), af::f32, "cast_str");
    FAIL("expected an error");
  } catch (const af::Error& err) {
    CHECK(std::string(err.what()).find("cast_str") != std::string::npos);
    CHECK(std::string(err.what()).find("string") != std::string::npos);
  }
  CHECK_THROWS_AS(af::cast(ph, af::string), af::Error);
}
