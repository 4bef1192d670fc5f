// accuracy (argmax of logits, or elementwise) and the streaming AUC: hand-computed and
// Mann-Whitney reference values, accumulation across batches, reset, weights, local
// variables, and build/run-time errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>

#include "test_util.h"

namespace af = actorflow;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

template <typename F>
std::string build_error(F&& build) {
  try {
    build();
  } catch (const af::Error& e) {
    return e.what();
  }
  return "";
}

// Runs the enclosing test case once per session backend.
af::SessionOptions each_backend() {
  af::SessionOptions o;
  SUBCASE("actor runtime") { o.executor = ""; }
  SUBCASE("sequential") { o.executor = "sequential"; }
  return o;
}

double run1(af::Session& sess, const af::Output& x, const af::FeedDict& feeds = {}) {
  auto r = sess.run({x}, feeds);
  if (!r.ok()) FAIL(r.status().to_string());
  return (*r)[0].element_as_double(0);
}

// The exact ROC AUC: P(score of a positive > score of a negative), ties counting 1/2.
double mann_whitney(const std::vector<float>& p, const std::vector<int32_t>& y) {
  double wins = 0, pairs = 0;
  for (size_t i = 0; i < p.size(); ++i)
    for (size_t j = 0; j < p.size(); ++j)
      if (y[i] && !y[j]) {
        pairs += 1;
        wins += p[i] > p[j] ? 1 : p[i] == p[j] ? 0.5 : 0;
      }
  return wins / pairs;
}

}  // namespace

// ---- accuracy ----

TEST_CASE("accuracy: argmax of logits against i32 / i64 labels, as an f32 mean") {
  af::Graph g;
  auto logits = af::constant(g, af::Tensor::from_vector<float>({0.1f, 0.9f, 0.8f, 0.2f, 0.3f, 0.7f}, {3, 2}));
  auto a32 = af::accuracy(logits, af::constant(g, af::Tensor::from_vector<int32_t>({1, 1, 1})));
  auto a64 = af::accuracy(logits, af::constant(g, af::Tensor::from_vector<int64_t>({1, 0, 1})));
  CHECK(a32.dtype() == af::f32);
  CHECK(a32.shape() == af::Shape{});
  auto out = aft::eval(g, {a32, a64});
  aft::check_close(out[0], {2.0 / 3});
  aft::check_close(out[1], {1.0});
}

TEST_CASE("accuracy: class-index predictions compare elementwise; unknown batch size") {
  af::Graph g;
  auto p = af::placeholder(g, af::i64, {-1}, "p");
  auto y = af::placeholder(g, af::i32, {-1}, "y");
  auto a = af::accuracy(p, y);
  auto v = aft::eval1(g, a, {{p, af::Tensor::from_vector<int64_t>({1, 0, 2, 2})}, {y, af::Tensor::from_vector<int32_t>({1, 1, 2, 0})}});
  aft::check_close(v, {0.5});
  auto lg = af::placeholder(g, af::f32, {-1, 4}, "lg");
  auto a2 = af::accuracy(lg, y);
  auto v2 = aft::eval1(g, a2, {{lg, af::Tensor::from_vector<float>({0, 0, 5, 0, 9, 0, 0, 0}, {2, 4})},
                               {y, af::Tensor::from_vector<int32_t>({2, 3})}});
  aft::check_close(v2, {0.5});
}

TEST_CASE("accuracy: mismatched shapes fail at build time naming both") {
  af::Graph g;
  auto logits = af::placeholder(g, af::f32, {4, 3}, "logits");
  std::string e = build_error([&] { af::accuracy(logits, af::placeholder(g, af::i64, {5}, "labels")); });
  CHECK(contains(e, "'logits:0'"));
  CHECK(contains(e, "'labels:0'"));
  e = build_error([&] { af::accuracy(logits, af::placeholder(g, af::string, {4}, "s")); });
  CHECK(contains(e, "numeric"));
}

// ---- streaming AUC ----

TEST_CASE("auc: perfectly separated is 1, reversed is 0, a small known example is 0.75") {
  af::SessionOptions opts = each_backend();
  af::Graph g;
  auto p = af::placeholder(g, af::f32, {-1}, "p");
  auto y = af::placeholder(g, af::i32, {-1}, "y");
  auto m = af::auc(y, p);
  auto sess = af::Session::create(g, opts).value();
  REQUIRE(sess.run_init().ok());
  auto feeds = [&](std::vector<float> pv, std::vector<int32_t> yv) {
    return af::FeedDict{{p, af::Tensor::from_vector(pv)}, {y, af::Tensor::from_vector(yv)}};
  };
  CHECK(run1(sess, m.update, feeds({0.1f, 0.2f, 0.8f, 0.9f}, {0, 0, 1, 1})) == doctest::Approx(1.0).epsilon(1e-5));
  CHECK(run1(sess, m.value) == doctest::Approx(1.0).epsilon(1e-5));
  REQUIRE(sess.run({m.reset}).ok());
  CHECK(run1(sess, m.update, feeds({0.1f, 0.2f, 0.8f, 0.9f}, {1, 1, 0, 0})) == doctest::Approx(0.0));
  REQUIRE(sess.run({m.reset}).ok());
  // sklearn.metrics.roc_auc_score([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) = 0.75.
  CHECK(run1(sess, m.update, feeds({0.1f, 0.4f, 0.35f, 0.8f}, {0, 0, 1, 1})) == doctest::Approx(0.75).epsilon(1e-5));
  CHECK(run1(sess, m.value) == doctest::Approx(0.75).epsilon(1e-5));
  // An empty batch adds nothing.
  CHECK(run1(sess, m.update, feeds({}, {})) == doctest::Approx(0.75).epsilon(1e-5));
}

TEST_CASE("auc: streaming over batches matches Mann-Whitney on the union within 1e-2") {
  std::mt19937 rng(5);
  std::normal_distribution<float> noise(0, 0.2f);
  std::bernoulli_distribution coin(0.4);
  std::vector<float> pv;
  std::vector<int32_t> yv;
  for (int i = 0; i < 600; ++i) {
    int32_t label = coin(rng) ? 1 : 0;
    float s = 0.4f + 0.2f * static_cast<float>(label) + noise(rng);
    pv.push_back(std::clamp(s, 0.0f, 1.0f));
    yv.push_back(label);
  }
  const double exact = mann_whitney(pv, yv);
  REQUIRE(exact > 0.6);
  REQUIRE(exact < 0.9);

  af::Graph g;
  auto p = af::placeholder(g, af::f32, {-1}, "p");
  auto y = af::placeholder(g, af::i32, {-1}, "y");
  auto m = af::auc(y, p);
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  double last = 0;
  for (int b = 0; b < 3; ++b) {
    std::vector<float> pb(pv.begin() + b * 200, pv.begin() + (b + 1) * 200);
    std::vector<int32_t> yb(yv.begin() + b * 200, yv.begin() + (b + 1) * 200);
    last = run1(sess, m.update, {{p, af::Tensor::from_vector(pb)}, {y, af::Tensor::from_vector(yb)}});
  }
  CHECK(std::fabs(last - exact) <= 1e-2);
  CHECK(run1(sess, m.value) == doctest::Approx(last).epsilon(1e-6));
  // The counts are per threshold: at threshold 0 (-1e-7) every example is predicted
  // positive, at the last (1 + 1e-7) none is.
  auto counts = sess.run({m.variables[0], m.variables[1], m.variables[2], m.variables[3]});
  REQUIRE(counts.ok());
  const double positives = static_cast<double>(std::count(yv.begin(), yv.end(), 1));
  CHECK((*counts)[0].data<double>()[0] == positives);
  CHECK((*counts)[1].data<double>()[199] == positives);
  CHECK((*counts)[3].data<double>()[0] == 600 - positives);
  CHECK((*counts)[2].data<double>()[199] == 600 - positives);

  // After a reset the accumulators start over: one batch gives that batch's AUC.
  REQUIRE(sess.run({m.reset}).ok());
  double single = run1(sess, m.update, {{p, af::Tensor::from_vector(pv)}, {y, af::Tensor::from_vector(yv)}});
  CHECK(single == doctest::Approx(last).epsilon(1e-6));
}

TEST_CASE("auc: weights scale the counts; zero weights drop examples") {
  af::Graph g;
  auto p = af::placeholder(g, af::f64, {-1}, "p");
  auto y = af::placeholder(g, af::boolean, {-1}, "y");
  auto w = af::placeholder(g, af::f64, {-1}, "w");
  auto m = af::auc(y, p, w, 50, "wauc");
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  // With the last two (mis-ordered) examples weighted 0 the rest is perfectly separated.
  auto pv = af::Tensor::from_vector<double>({0.1, 0.2, 0.8, 0.9, 0.95, 0.05});
  auto yv = af::Tensor::from_vector<bool>({false, false, true, true, false, true});
  CHECK(run1(sess, m.update, {{p, pv}, {y, yv}, {w, af::Tensor::from_vector<double>({1, 1, 2, 1, 0, 0})}}) ==
        doctest::Approx(1.0).epsilon(1e-5));
  auto tp = sess.run({m.variables[0]});
  REQUIRE(tp.ok());
  CHECK((*tp)[0].shape() == af::Shape{50});
  CHECK((*tp)[0].data<double>()[0] == 3.0);
}

TEST_CASE("auc: the state is local, zero after init, and named under the metric's scope") {
  af::Graph g;
  auto p = af::placeholder(g, af::f32, {-1}, "p");
  auto y = af::placeholder(g, af::i64, {-1}, "y");
  auto m = af::auc(y, p, 10, "my_auc");
  REQUIRE(m.variables.size() == 4);
  CHECK(m.variables[0].node().name == "my_auc/true_positives");
  CHECK(m.variables[3].node().name == "my_auc/false_positives");
  CHECK(g.collection("variables").empty());
  CHECK(g.collection("local_variables").size() == 4);
  CHECK(g.collection("metric_variables").size() == 4);
  CHECK(m.value.dtype() == af::f32);
  CHECK(m.update.shape() == af::Shape{});
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  auto tp = sess.run({m.variables[0]});
  REQUIRE(tp.ok());
  aft::check_close((*tp)[0], std::vector<double>(10, 0.0));
  // With no data every rate is flat: the area is 0.
  CHECK(run1(sess, m.value) == doctest::Approx(0.0));
}

TEST_CASE("auc: a prediction outside [0, 1] fails the update naming the node and the value") {
  af::Graph g;
  auto p = af::placeholder(g, af::f32, {-1}, "p");
  auto y = af::placeholder(g, af::i32, {-1}, "y");
  auto m = af::auc(y, p);
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  auto r = sess.run({m.update}, {{p, af::Tensor::from_vector<float>({0.5f, 0.2f, 1.5f})}, {y, af::Tensor::from_vector<int32_t>({1, 0, 1})}});
  REQUIRE_FALSE(r.ok());
  CHECK(contains(r.status().message(), "'auc/accumulate'"));
  CHECK(contains(r.status().message(), "1.5"));
  CHECK(contains(r.status().message(), "index 2"));
  // Nothing was accumulated by the failed step.
  auto tp = sess.run({m.variables[0]});
  REQUIRE(tp.ok());
  CHECK((*tp)[0].data<double>()[0] == 0.0);
  r = sess.run({m.update}, {{p, af::Tensor::from_vector<float>({0.5f})}, {y, af::Tensor::from_vector<int32_t>({1, 0})}});
  CHECK_FALSE(r.ok());
}

TEST_CASE("auc: build-time errors") {
  af::Graph g;
  auto p = af::placeholder(g, af::f32, {4}, "p");
  std::string e = build_error([&] { af::auc(af::placeholder(g, af::i32, {3}, "y3"), p); });
  CHECK(contains(e, "'p'"));
  CHECK(contains(e, "'y3'"));
  e = build_error([&] { af::auc(af::placeholder(g, af::i32, {4}, "y"), p, 1); });
  CHECK(contains(e, "num_thresholds"));
  e = build_error([&] { af::auc(p, af::placeholder(g, af::i32, {4}, "ip")); });
  CHECK(contains(e, "f32 or f64"));
}
