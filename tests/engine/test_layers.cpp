// The layers API (af::layers) and the batch_norm DSL: variable names, shapes, dtypes
// and collections; values against hand computation; the moving statistics of batch
// normalization in both modes; a small CNN that trains.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "gradient_check.h"
#include "test_util.h"

namespace af = actorflow;
namespace layers = actorflow::layers;

namespace {

const af::Node& var_node(af::Graph& g, const std::string& name) {
  const af::Node* n = g.find_node(name);
  REQUIRE_MESSAGE(n != nullptr, "no node named " << name);
  CHECK(n->op == "VariableV2");
  return *n;
}

bool in_collection(af::Graph& g, const std::string& key, const std::string& name) {
  for (int id : g.collection(key))
    if (g.node(id).name == name) return true;
  return false;
}

af::Tensor to_f32(const af::Tensor& t) {
  af::Tensor r(af::f32, t.shape());
  for (int64_t i = 0; i < t.num_elements(); ++i) r.data<float>()[i] = static_cast<float>(t.data<double>()[i]);
  return r;
}

}  // namespace

TEST_CASE("dense: variables under a uniquified scope, relu(x·kernel + bias)") {
  af::Graph g;
  auto x = af::placeholder(g, af::f64, {-1, 4}, "x");
  auto h = layers::dense(x, 3, layers::Act::relu);
  auto y = layers::dense(h, 2);
  CHECK(h.shape() == af::Shape{-1, 3});
  CHECK(y.shape() == af::Shape{-1, 2});
  CHECK(var_node(g, "dense/kernel").output_shapes[0] == af::Shape{4, 3});
  CHECK(var_node(g, "dense/bias").output_shapes[0] == af::Shape{3});
  CHECK(var_node(g, "dense_1/kernel").output_shapes[0] == af::Shape{3, 2});
  CHECK(var_node(g, "dense_1/bias").output_dtypes[0] == af::f64);
  for (const char* n : {"dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias"}) {
    CHECK(in_collection(g, "trainable_variables", n));
    CHECK(in_collection(g, "variables", n));
  }
  auto kernel = af::Output(&g, g.find_node("dense/kernel")->id);
  auto bias = af::Output(&g, g.find_node("dense/bias")->id);
  auto xv = aft::random_f64({5, 4}, -1, 1, 3);
  auto out = aft::eval(g, {h, kernel, bias}, {{x, xv}});
  // Glorot-uniform kernel within sqrt(6 / (4 + 3)); zero bias.
  const double limit = std::sqrt(6.0 / 7.0);
  for (int64_t i = 0; i < 12; ++i) CHECK(std::fabs(out[1].data<double>()[i]) <= limit);
  aft::check_close(out[2], {0, 0, 0});
  std::vector<double> expect;
  for (int r = 0; r < 5; ++r)
    for (int j = 0; j < 3; ++j) {
      double s = 0;
      for (int k = 0; k < 4; ++k) s += xv.data<double>()[r * 4 + k] * out[1].data<double>()[k * 3 + j];
      expect.push_back(std::max(0.0, s));
    }
  aft::check_close(out[0], expect, 1e-12);
}

TEST_CASE("dense: custom activation, no bias, rank-3 input, errors") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {2, 3, 4}, "x");
  auto y = layers::dense(x, 5, [](const af::Output& v) { return v * 2.0; }, "logits", false);
  CHECK(y.shape() == af::Shape{2, 3, 5});
  CHECK(g.find_node("logits/kernel") != nullptr);
  CHECK(g.find_node("logits/bias") == nullptr);
  CHECK(y.node().op == "Mul");
  auto unknown = af::placeholder(g, af::f32, {2, -1}, "unknown");
  CHECK_THROWS_WITH_AS(layers::dense(unknown, 3), doctest::Contains("must be known"), af::Error);
  auto ints = af::placeholder(g, af::i32, {2, 3}, "ints");
  CHECK_THROWS_WITH_AS(layers::dense(ints, 3), doctest::Contains("float"), af::Error);
  CHECK_THROWS_AS(layers::dense(x, 0), af::Error);
}

TEST_CASE("conv2d and max_pool2d layers") {
  af::Graph g;
  g.set_seed(11);
  auto x = af::placeholder(g, af::f32, {-1, 8, 8, 3}, "x");
  auto c = layers::conv2d(x, 4, {3, 3}, {1, 1}, "SAME", layers::Act::relu);
  auto c2 = layers::conv2d(c, 6, {3, 3}, {2, 2});  // VALID by default, as tf.layers
  auto p = layers::max_pool2d(c, {2, 2}, {2, 2});
  CHECK(c.shape() == af::Shape{-1, 8, 8, 4});
  CHECK(c2.shape() == af::Shape{-1, 3, 3, 6});
  CHECK(p.shape() == af::Shape{-1, 4, 4, 4});
  CHECK(var_node(g, "conv2d/kernel").output_shapes[0] == af::Shape{3, 3, 3, 4});
  CHECK(var_node(g, "conv2d/bias").output_shapes[0] == af::Shape{4});
  CHECK(var_node(g, "conv2d_1/kernel").output_shapes[0] == af::Shape{3, 3, 4, 6});
  CHECK(p.node().name == "max_pooling2d");
  auto xv = to_f32(aft::random_f64({2, 8, 8, 3}, -1, 1, 5));
  auto out = aft::eval(g, {c, p}, {{x, xv}});
  float lo = 0;
  for (int64_t i = 0; i < out[0].num_elements(); ++i) lo = std::min(lo, out[0].data<float>()[i]);
  CHECK(lo == 0.0f);  // relu
  CHECK(out[1].shape() == af::Shape{2, 4, 4, 4});
  // The graph seed makes the initial kernel reproducible.
  auto again = aft::eval(g, {c}, {{x, xv}});
  CHECK(again[0].equals(out[0]));
  CHECK_THROWS_WITH_AS(layers::conv2d(x, 4, {3}), doctest::Contains("kernel_size"), af::Error);
  auto nochan = af::placeholder(g, af::f32, {-1, 8, 8, -1}, "nochan");
  CHECK_THROWS_WITH_AS(layers::conv2d(nochan, 4, {3, 3}), doctest::Contains("channel count"), af::Error);
}

TEST_CASE("batch_norm layer: variables, collections, moving averages in training") {
  af::Graph g;
  auto x = af::placeholder(g, af::f64, {-1, 2}, "x");
  auto y = layers::batch_norm(x, true);
  for (const char* n : {"batch_normalization/gamma", "batch_normalization/beta"}) {
    var_node(g, n);
    CHECK(in_collection(g, "trainable_variables", n));
  }
  for (const char* n : {"batch_normalization/moving_mean", "batch_normalization/moving_variance"}) {
    var_node(g, n);
    CHECK(in_collection(g, "variables", n));
    CHECK_FALSE(in_collection(g, "trainable_variables", n));
  }
  CHECK(g.collection("update_ops").size() == 2);
  auto mm = af::Output(&g, g.find_node("batch_normalization/moving_mean")->id);
  auto mv = af::Output(&g, g.find_node("batch_normalization/moving_variance")->id);
  // Channel 0: 1, 2, 3, 4 (mean 2.5, unbiased var 5/3); channel 1: 0, 0, 0, 8 (2, 16).
  auto xv = af::Tensor::from_vector<double>({1, 0, 2, 0, 3, 0, 4, 8}, {4, 2});
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  auto r = sess.run({y}, {{x, xv}});
  REQUIRE(r.ok());
  // Normalized with the batch statistics (biased variance 1.25 and 12).
  CHECK((*r)[0].data<double>()[0] == doctest::Approx((1 - 2.5) / std::sqrt(1.25 + 1e-3)));
  CHECK((*r)[0].data<double>()[7] == doctest::Approx((8 - 2) / std::sqrt(12 + 1e-3)));
  // Fetching y ran the attached updates once: moving = 0.99 * moving + 0.01 * batch.
  auto m = sess.run({af::read_variable(mm), af::read_variable(mv)});
  REQUIRE(m.ok());
  aft::check_close((*m)[0], {0.025, 0.02}, 1e-12);
  aft::check_close((*m)[1], {0.99 + 0.01 * 5.0 / 3.0, 0.99 + 0.01 * 16}, 1e-12);
  REQUIRE(sess.run({y}, {{x, xv}}).ok());
  m = sess.run({af::read_variable(mm)});
  aft::check_close((*m)[0], {0.025 * 0.99 + 0.025, 0.02 * 0.99 + 0.02}, 1e-12);
}

TEST_CASE("batch_norm with a runtime flag: inference uses and keeps the moving statistics") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1, 3, 3, 2}, "x");
  auto training = af::placeholder(g, af::boolean, {}, "training");
  af::BatchNormOptions opts;
  opts.decay = 0.5;
  opts.name = "bn";
  auto y = af::batch_norm(x, training, opts);
  auto mm = af::read_variable(af::Output(&g, g.find_node("bn/moving_mean")->id));
  auto mv = af::read_variable(af::Output(&g, g.find_node("bn/moving_variance")->id));
  auto xv = to_f32(aft::random_f64({4, 3, 3, 2}, 1, 3, 7));
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  for (int i = 0; i < 3; ++i) REQUIRE(sess.run({y}, {{x, xv}, {training, af::Tensor::scalar(true)}}).ok());
  auto before = sess.run({mm, mv});
  REQUIRE(before.ok());
  // Three updates with decay 0.5 from 0: 7/8 of the batch mean (about 2).
  CHECK((*before)[0].data<float>()[0] > 1.5f);
  auto inf = sess.run({y}, {{x, xv}, {training, af::Tensor::scalar(false)}});
  REQUIRE(inf.ok());
  auto after = sess.run({mm, mv});
  CHECK((*after)[0].equals((*before)[0]));
  CHECK((*after)[1].equals((*before)[1]));
  // Inference normalizes with the moving statistics (gamma 1, beta 0, epsilon 1e-3).
  for (int64_t i = 0; i < 10; ++i) {
    const int c = static_cast<int>(i % 2);
    const double expect = (xv.data<float>()[i] - (*before)[0].data<float>()[c]) /
                          std::sqrt((*before)[1].data<float>()[c] + 1e-3);
    CHECK((*inf)[0].data<float>()[i] == doctest::Approx(expect).epsilon(1e-5));
  }
}

TEST_CASE("batch_norm: static inference, detached updates, errors") {
  af::Graph g;
  auto x = af::placeholder(g, af::f64, {-1, 2}, "x");
  auto yi = layers::batch_norm(x, false, 0.99, 1e-3, "frozen");
  CHECK(yi.node().op == "FusedBatchNorm");
  CHECK(g.collection("update_ops").empty());
  auto xv = af::Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2});
  // Fresh moving statistics (0, 1): y = x / sqrt(1 + eps).
  aft::check_close(aft::eval1(g, yi, {{x, xv}}), {1 / std::sqrt(1.001), 2 / std::sqrt(1.001), 3 / std::sqrt(1.001), 4 / std::sqrt(1.001)}, 1e-12);

  af::BatchNormOptions opts;
  opts.attach_updates = false;
  opts.scale = false;
  opts.center = false;
  auto y = af::batch_norm(x, true, opts);
  CHECK(g.find_node("batch_norm/gamma")->op == "Const");
  REQUIRE(g.collection("update_ops").size() == 2);
  auto mm = af::read_variable(af::Output(&g, g.find_node("batch_norm/moving_mean")->id));
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  REQUIRE(sess.run({y}, {{x, xv}}).ok());
  aft::check_close((*sess.run({mm}))[0], {0, 0});
  std::vector<af::Operation> updates;
  for (int id : g.collection("update_ops")) updates.emplace_back(&g, id);
  REQUIRE(sess.run({}, {{x, xv}}, updates).ok());
  aft::check_close((*sess.run({mm}))[0], {0.02, 0.03}, 1e-12);

  auto v = af::placeholder(g, af::f64, {4}, "v");
  CHECK_THROWS_WITH_AS(af::batch_norm(v, true), doctest::Contains("rank >= 2"), af::Error);
  auto nochan = af::placeholder(g, af::f64, {4, -1}, "nochan");
  CHECK_THROWS_AS(af::batch_norm(nochan, true), af::Error);
}

TEST_CASE("dropout layer: rate, training flag") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1, 10}, "x");
  CHECK(layers::dropout(x).node_id() == x.node_id());  // tf.layers: off unless training
  auto d = layers::dropout(x, 0.25, true, 1);
  CHECK(d.node().op == "Dropout");
  CHECK(d.node().attr_float("keep_prob") == doctest::Approx(0.75));
  CHECK(d.node().name == "dropout");
  auto flag = af::placeholder(g, af::boolean, {}, "training");
  auto df = layers::dropout(x, 0.5, flag);
  CHECK(df.node().num_outputs() == 2);
  CHECK_THROWS_AS(layers::dropout(x, 1.0, true), af::Error);
}

TEST_CASE("a small CNN with every layer trains") {
  af::Graph g;
  g.set_seed(1);
  auto x = af::placeholder(g, af::f32, {-1, 6, 6, 1}, "x");
  auto t = af::placeholder(g, af::f32, {-1, 1}, "t");
  auto h = layers::conv2d(x, 4, {3, 3}, {1, 1}, "SAME", layers::Act::relu);
  h = layers::max_pool2d(h, {2, 2}, {2, 2});
  h = layers::batch_norm(h, true);
  h = af::flatten(h);
  h = layers::dropout(h, 0.1, true, 3);
  auto y = layers::dense(h, 1);
  auto loss = af::reduce_mean(af::square(y - t));
  std::vector<af::Output> vars;
  for (int id : g.collection("trainable_variables")) vars.emplace_back(&g, id);
  REQUIRE(vars.size() == 6);  // conv kernel, bias; gamma, beta; dense kernel, bias
  auto grads = af::gradients({loss}, vars);
  std::vector<af::Operation> updates;
  for (size_t i = 0; i < vars.size(); ++i) {
    REQUIRE(grads[i].valid());
    updates.push_back(af::assign_sub(vars[i], grads[i] * 0.05));
  }
  auto train = af::group(g, updates);
  // Target: the mean of the top-left quadrant, a job for a conv + pool.
  auto xv = to_f32(aft::random_f64({32, 6, 6, 1}, 0, 1, 13));
  af::Tensor tv(af::f32, {32, 1});
  for (int n = 0; n < 32; ++n) {
    double s = 0;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) s += xv.data<float>()[(n * 6 + i) * 6 + j];
    tv.data<float>()[n] = static_cast<float>(s / 9 * 4);
  }
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  auto first = sess.run({loss}, {{x, xv}, {t, tv}});
  REQUIRE(first.ok());
  for (int step = 0; step < 60; ++step) REQUIRE(sess.run({}, {{x, xv}, {t, tv}}, {train}).ok());
  auto last = sess.run({loss}, {{x, xv}, {t, tv}});
  REQUIRE(last.ok());
  const float l0 = (*first)[0].item<float>(), l1 = (*last)[0].item<float>();
  MESSAGE("CNN loss " << l0 << " -> " << l1);
  CHECK(std::isfinite(l1));
  CHECK(l1 < 0.5f * l0);
}
