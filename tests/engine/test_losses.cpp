// BiasAdd (and its fused bias gradient), L2Loss, the softmax cross-entropies, the
// sigmoid cross-entropy and mean_squared_error: hand-computed values, numerical
// stability, build-time shape errors naming the nodes, runtime label errors, and
// gradient checks in f64.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "gradient_check.h"
#include "test_util.h"

namespace af = actorflow;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The message of the af::Error thrown by `build`, or "" if none is thrown.
template <typename F>
std::string build_error(F&& build) {
  try {
    build();
  } catch (const af::Error& e) {
    return e.what();
  }
  return "";
}

af::Tensor f32(const std::vector<float>& v, af::Shape s) { return af::Tensor::from_vector(v, std::move(s)); }
af::Tensor f64(const std::vector<double>& v, af::Shape s) { return af::Tensor::from_vector(v, std::move(s)); }

af::Output second_output(const af::Output& x) { return af::Output(x.graph(), x.node_id(), 1); }

double log_sum_exp(const std::vector<double>& x) {
  double m = x[0];
  for (double v : x) m = std::max(m, v);
  double s = 0;
  for (double v : x) s += std::exp(v - m);
  return m + std::log(s);
}

}  // namespace

// ---- BiasAdd ----

TEST_CASE("BiasAdd: [2,3] + [3] in f32 and f64, rank 1, NCHW, empty") {
  af::Graph g;
  auto y32 = af::bias_add(af::constant(g, f32({1, 2, 3, 4, 5, 6}, {2, 3})), af::constant(g, f32({10, 20, 30}, {3})));
  auto y64 = af::bias_add(af::constant(g, f64({1, 2, 3, 4, 5, 6}, {2, 3})), af::constant(g, f64({-1, 0, 1}, {3})));
  auto y1 = af::bias_add(af::constant(g, f64({1, 2}, {2})), af::constant(g, f64({5, 6}, {2})));
  // NCHW [1, 2, 2]: channel axis 1, the bias repeats over the trailing 2.
  auto yc = af::bias_add(af::constant(g, f64({1, 2, 3, 4}, {1, 2, 2})), af::constant(g, f64({100, 200}, {2})), "nchw",
                         "NCHW");
  auto ye = af::bias_add(af::constant(g, af::Tensor::zeros(af::f32, {0, 3})), af::constant(g, f32({1, 2, 3}, {3})));
  auto yi = af::bias_add(af::constant(g, af::Tensor::from_vector<int32_t>({1, 2, 3, 4}, {2, 2})),
                         af::constant(g, af::Tensor::from_vector<int32_t>({10, -10})));
  auto out = aft::eval(g, {y32, y64, y1, yc, ye, yi});
  CHECK(out[0].dtype() == af::f32);
  aft::check_close(out[0], {11, 22, 33, 14, 25, 36});
  aft::check_close(out[1], {0, 2, 4, 3, 5, 7});
  aft::check_close(out[2], {6, 8});
  aft::check_close(out[3], {101, 102, 203, 204});
  CHECK(out[4].shape() == af::Shape{0, 3});
  CHECK(out[5].dtype() == af::i32);
  aft::check_close(out[5], {11, -8, 13, -6});
}

TEST_CASE("BiasAdd: unknown dims at graph time take the bias size") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1, -1}, "x");
  auto b = af::placeholder(g, af::f32, {4}, "b");
  auto y = af::bias_add(x, b);
  CHECK(y.shape() == af::Shape{-1, 4});
  auto u = af::bias_add(af::placeholder(g, af::f32, af::Shape::unknown_rank(), "u"), b);
  CHECK_FALSE(u.shape().has_rank());
  auto v = aft::eval1(g, y, {{x, af::Tensor::filled(af::f32, {2, 4}, 1)}, {b, f32({0, 1, 2, 3}, {4})}});
  aft::check_close(v, {1, 2, 3, 4, 1, 2, 3, 4});
}

TEST_CASE("BiasAdd: build-time errors name the value and the bias") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {2, 3}, "x");
  std::string e = build_error([&] { af::bias_add(x, af::placeholder(g, af::f32, {4}, "b4"), "badd"); });
  CHECK(contains(e, "'badd'"));
  CHECK(contains(e, "'x'"));
  CHECK(contains(e, "'b4'"));
  e = build_error([&] { af::bias_add(x, af::placeholder(g, af::f32, {1, 3}, "b2d")); });
  CHECK(contains(e, "'b2d'"));
  CHECK(contains(e, "vector"));
  e = build_error([&] { af::bias_add(x, af::placeholder(g, af::f64, {3}, "b64")); });
  CHECK(contains(e, "dtype"));
  e = build_error([&] { af::bias_add(x, af::placeholder(g, af::f32, {3}, "b"), "fmt", "NWHC"); });
  CHECK(contains(e, "data_format"));
  e = build_error([&] { af::bias_add(af::placeholder(g, af::f32, {3}, "v"), af::placeholder(g, af::f32, {3}, "b"), "c1", "NCHW"); });
  CHECK(contains(e, "rank >= 2"));
}

// The bias gradient is BiasAddGrad over the incoming gradient: column sums, checked
// against a double-precision loop on shapes that take each path of the kernel (narrow
// rows folded wide, several row ranges, several column tiles, NCHW planes).
TEST_CASE("BiasAddGrad: column sums of tall, wide and NCHW gradients") {
  struct Case {
    af::Shape shape;
    std::string format;
  };
  const std::vector<Case> cases = {{{5000, 37}, "NHWC"}, {{300, 5000}, "NHWC"}, {{7, 3}, "NHWC"}, {{3, 4, 2, 5}, "NCHW"},
                                   {{0, 3}, "NHWC"},     {{20000, 1}, "NHWC"}};
  for (const Case& cs : cases) {
    INFO("shape " << cs.shape.to_string() << " " << cs.format);
    af::Graph g;
    const bool nchw = cs.format == "NCHW";
    const int axis = nchw ? 1 : cs.shape.rank() - 1;
    const int64_t channels = cs.shape.dim(axis);
    auto x = af::placeholder(g, af::f32, cs.shape, "x");
    auto b = af::placeholder(g, af::f32, {channels}, "b");
    auto y = af::bias_add(x, b, "y", cs.format);
    af::Tensor gv(af::f32, cs.shape);
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1, 1);
    for (int64_t i = 0; i < gv.num_elements(); ++i) gv.data<float>()[i] = u(rng);
    auto db = af::gradients({y}, {b}, {af::constant(g, gv, "gy")});
    REQUIRE(db[0].valid());
    CHECK(db[0].node().op == "BiasAddGrad");
    auto out = aft::eval1(g, db[0], {{x, af::Tensor::zeros(af::f32, cs.shape)}, {b, af::Tensor::zeros(af::f32, {channels})}});
    REQUIRE(out.shape() == af::Shape{channels});
    std::vector<double> expect(static_cast<size_t>(channels), 0.0);
    int64_t inner = 1;
    for (int i = axis + 1; i < cs.shape.rank(); ++i) inner *= cs.shape.dim(i);
    for (int64_t i = 0; i < gv.num_elements(); ++i) expect[static_cast<size_t>((i / inner) % channels)] += gv.data<float>()[i];
    aft::check_close(out, expect, 1e-5);
  }
}

TEST_CASE("gradient check: BiasAdd (NHWC and NCHW) and BiasAddGrad") {
  af::Graph g;
  auto x = af::placeholder(g, af::f64, {3, 4}, "x");
  auto b = af::placeholder(g, af::f64, {4}, "b");
  CHECK(aft::gradient_error(g, af::bias_add(x, b), {x, b}, {aft::random_f64({3, 4}, -1, 1, 1), aft::random_f64({4}, -1, 1, 2)}) <= 1e-6);
  auto xc = af::placeholder(g, af::f64, {2, 3, 2}, "xc");
  auto bc = af::placeholder(g, af::f64, {3}, "bc");
  CHECK(aft::gradient_error(g, af::bias_add(xc, bc, "yc", "NCHW"), {xc, bc},
                            {aft::random_f64({2, 3, 2}, -1, 1, 3), aft::random_f64({3}, -1, 1, 4)}) <= 1e-6);
}

TEST_CASE("gradient check: BiasAddGrad (second order)") {
  // With w flowing into bias_add's output, the bias gradient is BiasAddGrad(w).
  af::Graph g;
  auto x = af::constant(g, aft::random_f64({3, 4}, -1, 1, 1), "x");
  auto b = af::constant(g, aft::random_f64({4}, -1, 1, 2), "b");
  auto w = af::placeholder(g, af::f64, {3, 4}, "w");
  auto db = af::gradients({af::bias_add(x, b)}, {b}, {w})[0];
  REQUIRE(db.node().op == "BiasAddGrad");
  CHECK(aft::gradient_error(g, db, {w}, {aft::random_f64({3, 4}, -1, 1, 5)}) <= 1e-6);
}

// ---- L2Loss ----

TEST_CASE("L2Loss: sum(x^2)/2 for vectors, scalars, empty and many-chunk tensors") {
  af::Graph g;
  auto a = af::l2_loss(af::constant(g, f32({1, 2, 3}, {3})));
  auto s = af::l2_loss(af::constant(g, 3.0, af::f64));
  auto e = af::l2_loss(af::constant(g, af::Tensor::zeros(af::f32, {0, 4})));
  af::Tensor big = af::Tensor::filled(af::f32, {300001}, 0.5f);
  auto l = af::l2_loss(af::constant(g, big));
  auto out = aft::eval(g, {a, s, e, l});
  CHECK(out[0].shape() == af::Shape{});
  CHECK(out[0].dtype() == af::f32);
  aft::check_close(out[0], {7});
  CHECK(out[1].dtype() == af::f64);
  aft::check_close(out[1], {4.5});
  aft::check_close(out[2], {0});
  aft::check_close(out[3], {300001 * 0.125}, 1e-6);
  CHECK(build_error([&] { af::l2_loss(af::constant(g, 3)); }).find("f32 or f64") != std::string::npos);
}

TEST_CASE("gradient check: L2Loss") {
  af::Graph g;
  auto x = af::placeholder(g, af::f64, {2, 3}, "x");
  CHECK(aft::gradient_error(g, af::l2_loss(x), {x}, {aft::random_f64({2, 3}, -2, 2, 9)}) <= 1e-6);
}

// ---- softmax cross-entropy ----

TEST_CASE("SoftmaxCrossEntropyWithLogits: hand values, the backprop output, f32 and f64") {
  const std::vector<double> logits = {1, 2, 3, 1, 1, 1};
  const std::vector<double> labels = {0, 0, 1, 0.5, 0.5, 0};
  const double l0 = log_sum_exp({1, 2, 3}) - 3;  // 0.4076059...
  const double l1 = std::log(3.0);
  std::vector<double> bp;
  for (int r = 0; r < 2; ++r) {
    const double lse = log_sum_exp({logits[3 * r], logits[3 * r + 1], logits[3 * r + 2]});
    for (int j = 0; j < 3; ++j) bp.push_back(std::exp(logits[3 * r + j] - lse) - labels[3 * r + j]);
  }
  af::Graph g;
  auto x64 = af::constant(g, f64(logits, {2, 3}), "logits");
  auto z64 = af::constant(g, f64(labels, {2, 3}), "labels");
  auto loss64 = af::softmax_cross_entropy_with_logits(x64, z64);
  auto x32 = af::cast(x64, af::f32);
  auto z32 = af::cast(z64, af::f32);
  auto loss32 = af::softmax_cross_entropy_with_logits(x32, z32);
  CHECK(loss64.shape() == af::Shape{2});
  CHECK(second_output(loss64).shape() == af::Shape{2, 3});
  auto out = aft::eval(g, {loss64, second_output(loss64), loss32, second_output(loss32)});
  aft::check_close(out[0], {l0, l1}, 1e-12);
  aft::check_close(out[1], bp, 1e-12);
  CHECK(out[2].dtype() == af::f32);
  aft::check_close(out[2], {l0, l1}, 1e-6);
  aft::check_close(out[3], bp, 1e-6);
}

TEST_CASE("SoftmaxCrossEntropyWithLogits: logits of +-1000 give finite losses") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {3, 2}, "x");
  auto z = af::placeholder(g, af::f32, {3, 2}, "z");
  auto loss = af::softmax_cross_entropy_with_logits(x, z);
  auto out = aft::eval(g, {loss, second_output(loss)},
                       {{x, f32({1000, -1000, -1000, 1000, 1000, 1000}, {3, 2})}, {z, f32({1, 0, 1, 0, 0.5f, 0.5f}, {3, 2})}});
  for (int i = 0; i < 6; ++i) CHECK(std::isfinite(out[1].element_as_double(i)));
  aft::check_close(out[0], {0, 2000, std::log(2.0)}, 1e-6);
  aft::check_close(out[1], {0, 0, -1, 1, 0, 0}, 1e-6);
}

TEST_CASE("SoftmaxCrossEntropyWithLogits: unknown dims, higher rank, empty batch") {
  af::Graph g;
  auto x = af::placeholder(g, af::f64, {-1, 3}, "x");
  auto z = af::placeholder(g, af::f64, {2, -1}, "z");
  auto loss = af::softmax_cross_entropy_with_logits(x, z);
  CHECK(loss.shape() == af::Shape{2});
  CHECK(second_output(loss).shape() == af::Shape{2, 3});
  auto u = af::placeholder(g, af::f64, af::Shape::unknown_rank(), "u");
  CHECK(af::softmax_cross_entropy_with_logits(u, z).shape() == af::Shape{2});
  CHECK_FALSE(af::softmax_cross_entropy_with_logits(u, u).shape().has_rank());
  // [2, 1, 2]: the class axis is the last; the loss keeps the other two.
  auto x3 = af::constant(g, f64({0, 0, 0, std::log(3.0)}, {2, 1, 2}));
  auto l3 = af::softmax_cross_entropy_with_logits(x3, af::constant(g, f64({1, 0, 0, 1}, {2, 1, 2})));
  auto le = af::softmax_cross_entropy_with_logits(af::constant(g, af::Tensor::zeros(af::f32, {0, 5})),
                                                  af::constant(g, af::Tensor::zeros(af::f32, {0, 5})));
  auto out = aft::eval(g, {loss, l3, le}, {{x, f64({0, 0, 0, 1, 2, 3}, {2, 3})}, {z, f64({1, 0, 0, 0, 0, 1}, {2, 3})}});
  aft::check_close(out[0], {std::log(3.0), log_sum_exp({1, 2, 3}) - 3}, 1e-12);
  CHECK(out[1].shape() == af::Shape{2, 1});
  aft::check_close(out[1], {std::log(2.0), std::log(4.0 / 3.0)}, 1e-12);
  CHECK(out[2].shape() == af::Shape{0});
}

TEST_CASE("SoftmaxCrossEntropyWithLogits: build-time errors name logits and labels") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {4, 3}, "my_logits");
  std::string e = build_error([&] { af::softmax_cross_entropy_with_logits(x, af::placeholder(g, af::f32, {4, 5}, "my_labels"), "xent"); });
  CHECK(contains(e, "'xent'"));
  CHECK(contains(e, "'my_logits' (float32[4,3])"));
  CHECK(contains(e, "'my_labels' (float32[4,5])"));
  e = build_error([&] { af::softmax_cross_entropy_with_logits(x, af::placeholder(g, af::f64, {4, 3}, "lab64")); });
  CHECK(contains(e, "'lab64'"));
  CHECK(contains(e, "dtype"));
  e = build_error([&] { af::softmax_cross_entropy_with_logits(af::constant(g, 1.0f), af::constant(g, 1.0f)); });
  CHECK(contains(e, "rank >= 1"));
  e = build_error([&] { af::softmax_cross_entropy_with_logits(af::constant(g, 1), af::constant(g, 1)); });
  CHECK(contains(e, "f32 or f64"));
}

TEST_CASE("gradient check: SoftmaxCrossEntropyWithLogits w.r.t. logits and labels, and through backprop") {
  af::Graph g;
  auto x = af::placeholder(g, af::f64, {3, 4}, "x");
  auto z = af::placeholder(g, af::f64, {3, 4}, "z");
  auto xv = aft::random_f64({3, 4}, -3, 3, 11);
  auto zv = aft::random_f64({3, 4}, 0, 1, 12);
  // Rows of zv as distributions.
  for (int r = 0; r < 3; ++r) {
    double s = 0;
    for (int j = 0; j < 4; ++j) s += zv.data<double>()[r * 4 + j];
    for (int j = 0; j < 4; ++j) zv.data<double>()[r * 4 + j] /= s;
  }
  auto loss = af::softmax_cross_entropy_with_logits(x, z);
  CHECK(aft::gradient_error(g, loss, {x, z}, {xv, zv}) <= 1e-6);
  CHECK(aft::gradient_error(g, second_output(loss), {x, z}, {xv, zv}) <= 1e-6);
  CHECK(aft::gradient_error(g, af::mean(loss) * 3.0, {x, z}, {xv, zv}) <= 1e-6);
}

// ---- sparse softmax cross-entropy ----

TEST_CASE("SparseSoftmaxCrossEntropyWithLogits: hand values with i32 and i64 labels, f32 and f64") {
  af::Graph g;
  auto x64 = af::constant(g, f64({1, 2, 3, 1, 1, 1}, {2, 3}), "logits");
  auto l64 = af::sparse_softmax_cross_entropy(x64, af::constant(g, af::Tensor::from_vector<int64_t>({2, 0})));
  auto l32 = af::sparse_softmax_cross_entropy(af::cast(x64, af::f32), af::constant(g, af::Tensor::from_vector<int32_t>({1, 2})));
  auto out = aft::eval(g, {l64, second_output(l64), l32});
  const double lse0 = log_sum_exp({1, 2, 3});
  aft::check_close(out[0], {lse0 - 3, std::log(3.0)}, 1e-12);
  aft::check_close(out[1], {std::exp(1 - lse0), std::exp(2 - lse0), std::exp(3 - lse0) - 1, 1.0 / 3 - 1, 1.0 / 3, 1.0 / 3}, 1e-12);
  CHECK(out[2].dtype() == af::f32);
  aft::check_close(out[2], {lse0 - 2, std::log(3.0)}, 1e-6);
}

TEST_CASE("SparseSoftmaxCrossEntropyWithLogits: stable for +-1000, empty batch, unknown dims") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1, 2}, "x");
  auto y = af::placeholder(g, af::i64, {-1}, "y");
  auto loss = af::sparse_softmax_cross_entropy(x, y);
  CHECK(loss.shape() == af::Shape{-1});
  CHECK(second_output(loss).shape() == af::Shape{-1, 2});
  auto v = aft::eval1(g, loss, {{x, f32({1000, -1000, -1000, 1000}, {2, 2})}, {y, af::Tensor::from_vector<int64_t>({1, 1})}});
  aft::check_close(v, {2000, 0}, 1e-6);
  auto e = aft::eval1(g, loss, {{x, af::Tensor::zeros(af::f32, {0, 2})}, {y, af::Tensor::zeros(af::i64, {0})}});
  CHECK(e.shape() == af::Shape{0});
  auto yu = af::placeholder(g, af::i32, af::Shape::unknown_rank(), "yu");
  CHECK(af::sparse_softmax_cross_entropy(x, yu).shape() == af::Shape{-1});
}

TEST_CASE("SparseSoftmaxCrossEntropyWithLogits: a label out of range fails naming the label and the node") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {2, 3}, "x");
  auto y = af::placeholder(g, af::i32, {2}, "y");
  auto loss = af::sparse_softmax_cross_entropy(x, y, "my_xent");
  auto xv = af::Tensor::zeros(af::f32, {2, 3});
  af::Status s = aft::eval_status(g, loss, {{x, xv}, {y, af::Tensor::from_vector<int32_t>({0, 3})}});
  CHECK_FALSE(s.ok());
  CHECK(contains(s.message(), "'my_xent'"));
  CHECK(contains(s.message(), "label 3"));
  CHECK(contains(s.message(), "[0, 3)"));
  s = aft::eval_status(g, loss, {{x, xv}, {y, af::Tensor::from_vector<int32_t>({-1, 0})}});
  CHECK_FALSE(s.ok());
  CHECK(contains(s.message(), "label -1"));
  CHECK(contains(s.message(), "'my_xent'"));
  // In range again: the session computes normally.
  aft::check_close(aft::eval1(g, loss, {{x, xv}, {y, af::Tensor::from_vector<int32_t>({2, 1})}}), {std::log(3.0), std::log(3.0)});
}

TEST_CASE("SparseSoftmaxCrossEntropyWithLogits: build-time shape and dtype errors") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {4, 3}, "logits");
  std::string e = build_error([&] { af::sparse_softmax_cross_entropy(x, af::placeholder(g, af::i32, {5}, "labels5"), "sx"); });
  CHECK(contains(e, "'sx'"));
  CHECK(contains(e, "'logits' (float32[4,3])"));
  CHECK(contains(e, "'labels5' (int32[5])"));
  e = build_error([&] { af::sparse_softmax_cross_entropy(x, af::placeholder(g, af::i32, {4, 3}, "labels2d")); });
  CHECK(contains(e, "'labels2d'"));
  e = build_error([&] { af::sparse_softmax_cross_entropy(x, af::placeholder(g, af::f32, {4}, "flabels")); });
  CHECK(contains(e, "'flabels'"));
}

TEST_CASE("gradient check: SparseSoftmaxCrossEntropyWithLogits w.r.t. logits (loss and backprop)") {
  af::Graph g;
  auto x = af::placeholder(g, af::f64, {4, 3}, "x");
  auto y = af::constant(g, af::Tensor::from_vector<int64_t>({0, 2, 1, 2}), "y");
  auto xv = aft::random_f64({4, 3}, -3, 3, 21);
  auto loss = af::sparse_softmax_cross_entropy(x, y);
  CHECK(aft::gradient_error(g, loss, {x}, {xv}) <= 1e-6);
  CHECK(aft::gradient_error(g, second_output(loss), {x}, {xv}) <= 1e-6);
}

TEST_CASE("the README pattern: mean of the sparse loss, gradient (softmax - onehot) / N") {
  af::Graph g;
  auto logits = af::placeholder(g, af::f32, {-1, 3}, "logits");
  auto y = af::placeholder(g, af::i64, {-1}, "y");
  auto loss = af::mean(af::sparse_softmax_cross_entropy(logits, y));
  auto d = af::gradients({loss}, {logits});
  auto out = aft::eval(g, {loss, d[0]}, {{logits, f32({0, 0, 0, 0, 0, std::log(2.0f)}, {2, 3})}, {y, af::Tensor::from_vector<int64_t>({0, 2})}});
  aft::check_close(out[0], {(std::log(3.0) + std::log(2.0)) / 2}, 1e-6);
  aft::check_close(out[1], {(1.0 / 3 - 1) / 2, 1.0 / 6, 1.0 / 6, 0.125, 0.125, (0.5 - 1) / 2}, 1e-6);
}

// ---- sigmoid cross-entropy ----

TEST_CASE("SigmoidCrossEntropyWithLogits: hand values and stability") {
  af::Graph g;
  auto x = af::constant(g, f64({0, 1000, -1000, 2, -3}, {5}));
  auto z = af::constant(g, f64({1, 0, 1, 0.5, 0}, {5}));
  auto l64 = af::sigmoid_cross_entropy_with_logits(x, z);
  auto l32 = af::sigmoid_cross_entropy_with_logits(af::cast(x, af::f32), af::cast(z, af::f32));
  auto out = aft::eval(g, {l64, l32});
  const std::vector<double> expect = {std::log(2.0), 1000, 1000, std::log1p(std::exp(2.0)) - 1, std::log1p(std::exp(-3.0))};
  aft::check_close(out[0], expect, 1e-12);
  aft::check_close(out[1], expect, 1e-6);
  for (int i = 0; i < 5; ++i) CHECK(std::isfinite(out[1].element_as_double(i)));
  // Scalars and empty tensors.
  auto s = af::sigmoid_cross_entropy_with_logits(af::constant(g, 0.0f), af::constant(g, 0.0f));
  auto e = af::sigmoid_cross_entropy_with_logits(af::constant(g, af::Tensor::zeros(af::f64, {2, 0})),
                                                 af::constant(g, af::Tensor::zeros(af::f64, {2, 0})));
  auto se = aft::eval(g, {s, e});
  CHECK(se[0].shape() == af::Shape{});
  aft::check_close(se[0], {std::log(2.0)}, 1e-6);
  CHECK(se[1].shape() == af::Shape{2, 0});
}

TEST_CASE("SigmoidCrossEntropyWithLogits: errors name both inputs; unknown dims merge") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {2, -1}, "sx");
  auto z = af::placeholder(g, af::f32, {-1, 3}, "sz");
  CHECK(af::sigmoid_cross_entropy_with_logits(x, z).shape() == af::Shape{2, 3});
  std::string e = build_error([&] { af::sigmoid_cross_entropy_with_logits(x, af::placeholder(g, af::f32, {3, 3}, "bad"), "sig"); });
  CHECK(contains(e, "'sig'"));
  CHECK(contains(e, "'sx'"));
  CHECK(contains(e, "'bad'"));
}

TEST_CASE("gradient check: SigmoidCrossEntropyWithLogits w.r.t. logits and labels") {
  af::Graph g;
  auto x = af::placeholder(g, af::f64, {2, 3}, "x");
  auto z = af::placeholder(g, af::f64, {2, 3}, "z");
  CHECK(aft::gradient_error(g, af::sigmoid_cross_entropy_with_logits(x, z), {x, z},
                            {aft::random_f64({2, 3}, -4, 4, 31), aft::random_f64({2, 3}, 0, 1, 32)}) <= 1e-6);
}

// ---- mean squared error ----

TEST_CASE("mean_squared_error: hand value, integer labels, shape errors") {
  af::Graph g;
  auto mse = af::mean_squared_error(af::constant(g, f32({1, 2, 3}, {3})), af::constant(g, f32({1.5f, 2, 2}, {3})));
  auto mse_int = af::mean_squared_error(af::constant(g, std::vector<int64_t>{1, 2, 3}, {3}), af::constant(g, f32({1.5f, 2, 2}, {3})));
  CHECK(mse.shape() == af::Shape{});
  auto out = aft::eval(g, {mse, mse_int});
  aft::check_close(out[0], {1.25 / 3});
  CHECK(out[1].dtype() == af::f32);
  aft::check_close(out[1], {1.25 / 3});
  std::string e = build_error([&] {
    af::mean_squared_error(af::placeholder(g, af::f32, {3}, "lab"), af::placeholder(g, af::f32, {4}, "pred"));
  });
  CHECK(contains(e, "'lab:0'"));
  CHECK(contains(e, "'pred:0'"));
}

TEST_CASE("gradient check: mean_squared_error") {
  af::Graph g;
  auto y = af::placeholder(g, af::f64, {2, 3}, "y");
  auto p = af::placeholder(g, af::f64, {2, 3}, "p");
  CHECK(aft::gradient_error(g, af::mean_squared_error(y, p), {y, p},
                            {aft::random_f64({2, 3}, -1, 1, 41), aft::random_f64({2, 3}, -1, 1, 42)}) <= 1e-6);
}
