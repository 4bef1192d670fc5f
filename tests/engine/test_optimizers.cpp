// Optimizers: for each, the first step worked out by hand, later steps and the sparse
// (row) form against the update rule written out in doubles, and convergence on a
// convex quadratic. The global step, decay, clipping, errors and the linear regression
// sample are in test_optimizers_train.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <map>
#include <memory>

#include "test_util.h"

namespace af = actorflow;

namespace {

af::Tensor fetch(af::Session& sess, const af::Output& x) {
  auto r = sess.eval(x);
  if (!r.ok()) FAIL(r.status().to_string());
  return *r;
}

using Make = std::function<std::unique_ptr<af::optim::Optimizer>()>;
// One element's update in doubles: w and the two slots (a, b), gradient g, step t (1-based).
using Rule = std::function<void(double& w, double& a, double& b, double g, int t)>;

struct Case {
  Make make;
  std::vector<std::string> slots;  // slot keys in order
  double a0 = 0, b0 = 0;           // initial slot values
  Rule rule;
};

struct Outcome {
  af::Tensor w;
  std::vector<af::Tensor> slots;
};

const std::vector<float> kW0{1, -2};
const std::vector<float> kG{0.5f, -1};

// `steps` updates of `opt` with the constant dense gradient g on a variable starting at w0.
Outcome run_dense(af::optim::Optimizer& opt, const std::vector<float>& w0, const std::vector<float>& g, int steps,
                  const af::SessionOptions& o = {}) {
  af::Graph gr;
  auto w = af::variable(gr, af::Tensor::from_vector(w0, {static_cast<int64_t>(w0.size())}), "w");
  auto grad = af::constant(gr, g, {static_cast<int64_t>(g.size())}, "grad");
  af::Operation train = opt.apply_gradients({{af::Gradient{grad, {}, {}}, w}});
  CHECK(train.node().op == "NoOp");
  auto sess = af::Session::create(gr, o).value();
  REQUIRE(sess.run_init().ok());
  for (int i = 0; i < steps; ++i) REQUIRE(sess.run({}, {}, {train}).ok());
  Outcome out{fetch(sess, w), {}};
  for (auto& key : opt.slot_names()) {
    af::Output s = opt.get_slot(w, key);
    REQUIRE(s.valid());
    out.slots.push_back(fetch(sess, s));
  }
  return out;
}

// The sparse form on a [3, 2] variable: rows 2, 0, 2 get values; row 2's two rows sum.
const std::vector<float> kRows0{1, 2, 3, 4, 5, 6};
const std::vector<float> kValues{0.5f, -1, 0.25f, 0.5f, 0.5f, -1};
const std::vector<int64_t> kIndices{2, 0, 2};

Outcome run_sparse(af::optim::Optimizer& opt, int steps) {
  af::Graph gr;
  auto w = af::variable(gr, af::Tensor::from_vector(kRows0, {3, 2}), "emb");
  auto values = af::constant(gr, kValues, {3, 2}, "values");
  auto indices = af::constant(gr, kIndices, {3}, "indices");
  af::Operation train = opt.apply_gradients({{af::Gradient{{}, indices, values}, w}});
  bool sparse_node = false;
  for (int id = 0; id < gr.num_nodes(); ++id) sparse_node = sparse_node || gr.node(id).op.rfind("SparseApply", 0) == 0;
  CHECK(sparse_node);
  auto sess = af::Session::create(gr).value();
  REQUIRE(sess.run_init().ok());
  for (int i = 0; i < steps; ++i) REQUIRE(sess.run({}, {}, {train}).ok());
  Outcome out{fetch(sess, w), {}};
  for (auto& key : opt.slot_names()) out.slots.push_back(fetch(sess, opt.get_slot(w, key)));
  return out;
}

// Expected values of w and the slots after `steps` applications of the rule.
std::vector<std::vector<double>> expect(const Case& c, const std::vector<float>& w0, const std::vector<double>& g,
                                        const std::vector<bool>& touched, int steps) {
  std::vector<double> w(w0.begin(), w0.end()), a(w0.size(), c.a0), b(w0.size(), c.b0);
  for (int t = 1; t <= steps; ++t)
    for (size_t i = 0; i < w.size(); ++i)
      if (touched[i]) c.rule(w[i], a[i], b[i], g[i], t);
  return {w, a, b};
}

// Dense (3 steps, on the actor runtime and the sequential evaluator) and sparse (2 steps)
// runs against the rule.
void check_against_rule(const Case& c) {
  for (const char* executor : {"", "sequential"}) {
    CAPTURE(executor);
    af::SessionOptions o;
    o.executor = executor;
    auto opt = c.make();
    Outcome r = run_dense(*opt, kW0, kG, 3, o);
    auto want = expect(c, kW0, {kG[0], kG[1]}, {true, true}, 3);
    aft::check_close(r.w, want[0]);
    REQUIRE(r.slots.size() == c.slots.size());
    for (size_t s = 0; s < r.slots.size(); ++s) aft::check_close(r.slots[s], want[1 + s]);
  }
  {
    auto opt = c.make();
    Outcome r = run_sparse(*opt, 2);
    // Row 0 gets {0.25, 0.5}; row 2 the sum {0.5 + 0.5, -1 - 1}; row 1 nothing.
    std::vector<double> g{0.25, 0.5, 0, 0, 1.0, -2.0};
    auto want = expect(c, kRows0, g, {true, true, false, false, true, true}, 2);
    aft::check_close(r.w, want[0]);
    CHECK(r.w.element_as_double(2) == 3);
    CHECK(r.w.element_as_double(3) == 4);
    for (size_t s = 0; s < r.slots.size(); ++s) aft::check_close(r.slots[s], want[1 + s]);
  }
}

// Minimizes sum((w - t)^2) from w = 0; returns max |w - t| after `steps` runs.
double quadratic_error(af::optim::Optimizer& opt, int steps) {
  af::Graph g;
  const std::vector<float> target{1, -2, 3, 0.5f};
  auto w = af::variable(g, af::zeros(g, {4}), "w");
  auto loss = af::reduce_sum(af::square(w - af::constant(g, target, {4}, "target")), {}, false, "loss");
  af::Operation train = opt.minimize(loss);
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  double first_loss = fetch(sess, loss).item<float>();
  for (int i = 0; i < steps; ++i) REQUIRE(sess.run({}, {}, {train}).ok());
  CHECK(fetch(sess, loss).item<float>() < first_loss);
  af::Tensor v = fetch(sess, w);
  double err = 0;
  for (int i = 0; i < 4; ++i) err = std::max(err, std::fabs(v.element_as_double(i) - target[static_cast<size_t>(i)]));
  return err;
}

}  // namespace

// Throughout: w0 = {1, -2}, g = {0.5, -1}.

TEST_CASE("GradientDescent: w -= lr * g") {
  af::optim::SGD opt(0.1);
  // {1 - 0.1 * 0.5, -2 - 0.1 * -1}
  aft::check_close(run_dense(opt, kW0, kG, 1).w, {0.95, -1.9});
  check_against_rule({[] { return std::make_unique<af::optim::GradientDescent>(0.1); }, {}, 0, 0,
                      [](double& w, double&, double&, double g, int) { w -= 0.1 * g; }});
  af::optim::GradientDescent q(0.1);
  CHECK(quadratic_error(q, 100) < 1e-4);
}

TEST_CASE("Momentum: accum = mu * accum + g; w -= lr * accum (and Nesterov)") {
  af::optim::Momentum opt(0.1, 0.9);
  // Step 1: accum = g, w = {1 - 0.05, -2 + 0.1}. Step 2: accum = 0.9 g + g = 1.9 g,
  // w -= 0.1 * 1.9 g = {0.95 - 0.095, -1.9 + 0.19}.
  Outcome two = run_dense(opt, kW0, kG, 2);
  aft::check_close(two.w, {0.855, -1.71});
  aft::check_close(two.slots[0], {0.95, -1.9});
  af::optim::Momentum nest(0.1, 0.9, true);
  // Nesterov step 1: accum = g; w -= lr * g + lr * mu * accum = 0.19 g.
  aft::check_close(run_dense(nest, kW0, kG, 1).w, {1 - 0.095, -2 + 0.19});
  check_against_rule({[] { return std::make_unique<af::optim::Momentum>(0.1, 0.9); }, {"accum"}, 0, 0,
                      [](double& w, double& a, double&, double g, int) {
                        a = 0.9 * a + g;
                        w -= 0.1 * a;
                      }});
  check_against_rule({[] { return std::make_unique<af::optim::Momentum>(0.1, 0.9, true); }, {"accum"}, 0, 0,
                      [](double& w, double& a, double&, double g, int) {
                        a = 0.9 * a + g;
                        w -= 0.1 * g + 0.1 * 0.9 * a;
                      }});
  af::optim::Momentum q(0.02, 0.9);
  CHECK(quadratic_error(q, 300) < 1e-3);
  af::optim::Momentum qn(0.02, 0.9, true);
  CHECK(quadratic_error(qn, 300) < 1e-3);
}

TEST_CASE("Adagrad: accum += g^2; w -= lr * g / sqrt(accum)") {
  af::optim::Adagrad opt(0.1);  // initial accumulator 0.1
  // accum = {0.1 + 0.25, 0.1 + 1} = {0.35, 1.1}
  Outcome one = run_dense(opt, kW0, kG, 1);
  aft::check_close(one.slots[0], {0.35, 1.1});
  aft::check_close(one.w, {1 - 0.1 * 0.5 / std::sqrt(0.35), -2 + 0.1 * 1 / std::sqrt(1.1)});
  check_against_rule({[] { return std::make_unique<af::optim::Adagrad>(0.1); }, {"accum"}, 0.1, 0,
                      [](double& w, double& a, double&, double g, int) {
                        a += g * g;
                        w -= 0.1 * g / std::sqrt(a);
                      }});
  af::optim::Adagrad q(0.5);
  CHECK(quadratic_error(q, 300) < 1e-3);
}

TEST_CASE("Adadelta: accumulated gradients and updates") {
  af::optim::Adadelta opt(1.0, 0.95, 1e-6);
  // accum = 0.05 g^2 = {0.0125, 0.05}; update = sqrt(0 + eps) / sqrt(accum + eps) * g;
  // accum_update = 0.05 update^2; w -= 1.0 * update.
  double u0 = std::sqrt(1e-6) / std::sqrt(0.0125 + 1e-6) * 0.5;
  double u1 = std::sqrt(1e-6) / std::sqrt(0.05 + 1e-6) * -1;
  Outcome one = run_dense(opt, kW0, kG, 1);
  aft::check_close(one.w, {1 - u0, -2 - u1});
  aft::check_close(one.slots[0], {0.0125, 0.05});
  aft::check_close(one.slots[1], {0.05 * u0 * u0, 0.05 * u1 * u1});
  check_against_rule({[] { return std::make_unique<af::optim::Adadelta>(1.0, 0.95, 1e-6); }, {"accum", "accum_update"}, 0, 0,
                      [](double& w, double& a, double& b, double g, int) {
                        a = 0.95 * a + 0.05 * g * g;
                        double u = std::sqrt(b + 1e-6) / std::sqrt(a + 1e-6) * g;
                        b = 0.95 * b + 0.05 * u * u;
                        w -= u;
                      }});
  af::optim::Adadelta q(1.0, 0.95, 1e-3);
  CHECK(quadratic_error(q, 300) < 1e-3);
}

TEST_CASE("RMSProp: ms starts at 1; mom = mu * mom + lr * g / sqrt(ms + eps)") {
  af::optim::RMSProp opt(0.01, 0.9, 0.5, 1e-10);
  // ms = 1 + 0.1 (g^2 - 1) = {0.925, 1.0}; mom = 0.01 g / sqrt(ms); w -= mom.
  double m0 = 0.01 * 0.5 / std::sqrt(0.925), m1 = 0.01 * -1 / std::sqrt(1.0);
  Outcome one = run_dense(opt, kW0, kG, 1);
  aft::check_close(one.slots[0], {0.925, 1.0});
  aft::check_close(one.slots[1], {m0, m1});
  aft::check_close(one.w, {1 - m0, -2 - m1});
  check_against_rule({[] { return std::make_unique<af::optim::RMSProp>(0.01, 0.9, 0.5, 1e-10); }, {"ms", "mom"}, 1, 0,
                      [](double& w, double& ms, double& mom, double g, int) {
                        ms += (g * g - ms) * 0.1;
                        mom = 0.5 * mom + 0.01 * g / std::sqrt(ms + 1e-10);
                        w -= mom;
                      }});
  af::optim::RMSProp q(0.05);
  CHECK(quadratic_error(q, 300) < 1e-3);
  af::optim::RMSProp qm(0.01, 0.9, 0.5);
  CHECK(quadratic_error(qm, 500) < 2e-2);  // momentum keeps it circling within ~lr
}

TEST_CASE("Adam: bias-corrected moments through beta1_power and beta2_power") {
  af::optim::Adam opt(0.1, 0.9, 0.999, 1e-8);
  // m = 0.1 g, v = 0.001 g^2, lr_t = 0.1 sqrt(1 - 0.999) / (1 - 0.9);
  // w -= lr_t m / (sqrt(v) + eps), about 0.1 sign(g).
  double lr_t = 0.1 * std::sqrt(1 - 0.999) / (1 - 0.9);
  Outcome one = run_dense(opt, kW0, kG, 1);
  aft::check_close(one.w, {1 - lr_t * 0.05 / (std::sqrt(0.001 * 0.25) + 1e-8), -2 + lr_t * 0.1 / (std::sqrt(0.001) + 1e-8)});
  aft::check_close(one.w, {0.9, -1.9}, 1e-4);
  aft::check_close(one.slots[0], {0.05, -0.1});
  aft::check_close(one.slots[1], {0.00025, 0.001});
  Rule adam = [](double& w, double& m, double& v, double g, int t) {
    m = 0.9 * m + 0.1 * g;
    v = 0.999 * v + 0.001 * g * g;
    double lr = 0.1 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
    w -= lr * m / (std::sqrt(v) + 1e-8);
  };
  check_against_rule({[] { return std::make_unique<af::optim::Adam>(0.1); }, {"m", "v"}, 0, 0, adam});
  check_against_rule({[] { return std::make_unique<af::optim::Adam>(0.1, 0.9, 0.999, 1e-8, true); }, {"m", "v"}, 0, 0,
                      [](double& w, double& m, double& v, double g, int t) {
                        m = 0.9 * m + 0.1 * g;
                        v = 0.999 * v + 0.001 * g * g;
                        double lr = 0.1 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
                        w -= lr * (0.9 * m + 0.1 * g) / (std::sqrt(v) + 1e-8);
                      }});
  af::optim::Adam q(0.1);
  CHECK(quadratic_error(q, 300) < 1e-3);
}

TEST_CASE("Adam on a variable of 10,007 elements: the dense block update (many blocks, threads, a ragged end) follows the rule") {
  // The dense kernel runs Adam in blocks through Eigen's packets; small variables fit in
  // one block, so this one spans several, is split over the device's threads, and ends
  // in a partial block.
  const int n = 10007;
  std::vector<float> w0(n), g(n);
  for (int i = 0; i < n; ++i) {
    w0[static_cast<size_t>(i)] = static_cast<float>((i % 13) - 6) * 0.25f;
    g[static_cast<size_t>(i)] = static_cast<float>((i % 7) - 3) * 0.5f + 0.125f;
  }
  std::vector<double> gd(g.begin(), g.end());
  for (bool nesterov : {false, true}) {
    CAPTURE(nesterov);
    af::optim::Adam opt(0.05, 0.9, 0.999, 1e-8, nesterov);
    Outcome r = run_dense(opt, w0, g, 3);
    Case c{nullptr, {"m", "v"}, 0, 0, [nesterov](double& w, double& m, double& v, double gr, int t) {
             m = 0.9 * m + 0.1 * gr;
             v = 0.999 * v + 0.001 * gr * gr;
             double lr = 0.05 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
             w -= lr * (nesterov ? 0.9 * m + 0.1 * gr : m) / (std::sqrt(v) + 1e-8);
           }};
    auto want = expect(c, w0, gd, std::vector<bool>(n, true), 3);
    aft::check_close(r.w, want[0]);
    aft::check_close(r.slots[0], want[1]);
    aft::check_close(r.slots[1], want[2]);
  }
}

TEST_CASE("Adam: the beta powers advance once per step") {
  af::Graph g;
  auto w = af::variable(g, af::zeros(g, {2}), "w");
  auto v = af::variable(g, af::zeros(g, {3}), "v");
  auto loss = af::reduce_sum(af::square(w - 1.0)) + af::reduce_sum(af::square(v + 2.0));
  af::optim::Adam opt(0.01, 0.8, 0.9);
  af::Operation train = opt.minimize(loss);
  auto [b1, b2] = opt.beta_powers();
  REQUIRE(b1.valid());
  CHECK(b1.node().name == "beta1_power");
  CHECK(b2.node().name == "beta2_power");
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  aft::check_close(fetch(sess, b1), {0.8});
  for (int i = 0; i < 3; ++i) REQUIRE(sess.run({}, {}, {train}).ok());
  // Two variables, one advance per run: 0.8^4 and 0.9^4.
  aft::check_close(fetch(sess, b1), {0.8 * 0.8 * 0.8 * 0.8});
  aft::check_close(fetch(sess, b2), {0.9 * 0.9 * 0.9 * 0.9});
}

TEST_CASE("Ftrl: FTRL-Proximal with l1 and l2") {
  af::optim::Ftrl opt(0.1, 0.01, 0.02);  // lr_power -0.5, accum starts at 0.1
  // accum' = 0.1 + g^2; linear = g - (sqrt(accum') - sqrt(0.1)) / lr * w;
  // w = |linear| > l1 ? (sign(linear) l1 - linear) / (sqrt(accum') / lr + 2 l2) : 0.
  auto ftrl1 = [](double w, double g) {
    double acc = 0.1 + g * g;
    double lin = g - (std::sqrt(acc) - std::sqrt(0.1)) / 0.1 * w;
    return std::fabs(lin) > 0.01 ? ((lin > 0 ? 0.01 : -0.01) - lin) / (std::sqrt(acc) / 0.1 + 2 * 0.02) : 0.0;
  };
  Outcome one = run_dense(opt, kW0, kG, 1);
  aft::check_close(one.w, {ftrl1(1, 0.5), ftrl1(-2, -1)});
  aft::check_close(one.slots[0], {0.35, 1.1});
  // A small gradient on a zero weight stays inside the l1 ball: w stays 0.
  af::optim::Ftrl sparse_opt(0.1, 0.5);
  aft::check_close(run_dense(sparse_opt, {0, 0}, {0.1f, -0.2f}, 1).w, {0, 0});
  Rule ftrl = [](double& w, double& acc, double& lin, double g, int) {
    double acc_new = acc + g * g;
    lin += g - (std::sqrt(acc_new) - std::sqrt(acc)) / 0.1 * w;
    double quad = std::sqrt(acc_new) / 0.1 + 2 * 0.02;
    w = std::fabs(lin) > 0.01 ? ((lin > 0 ? 0.01 : -0.01) - lin) / quad : 0.0;
    acc = acc_new;
  };
  check_against_rule({[] { return std::make_unique<af::optim::Ftrl>(0.1, 0.01, 0.02); }, {"accum", "linear"}, 0.1, 0, ftrl});
  // A general lr_power goes through pow(): -0.25.
  check_against_rule({[] { return std::make_unique<af::optim::Ftrl>(0.1, 0.0, 0.0, -0.25); }, {"accum", "linear"}, 0.1, 0,
                      [](double& w, double& acc, double& lin, double g, int) {
                        double acc_new = acc + g * g;
                        lin += g - (std::pow(acc_new, 0.25) - std::pow(acc, 0.25)) / 0.1 * w;
                        w = std::fabs(lin) > 0 ? -lin / (std::pow(acc_new, 0.25) / 0.1) : 0.0;
                        acc = acc_new;
                      }});
  af::optim::Ftrl q(0.5);
  CHECK(quadratic_error(q, 300) < 1e-3);
}

TEST_CASE("float64 variables are updated in float64") {
  af::Graph g;
  auto w = af::variable(g, {3}, af::constant_initializer(1.0, af::f64), "w");
  auto loss = af::reduce_sum(af::square(w));
  af::optim::Adam opt(0.1);
  af::Operation train = opt.minimize(loss);
  CHECK(opt.get_slot(w, "m").dtype() == af::f64);
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  REQUIRE(sess.run({}, {}, {train}).ok());
  af::Tensor v = fetch(sess, w);
  CHECK(v.dtype() == af::f64);
  // First Adam step moves each element by about lr.
  aft::check_close(v, {0.9, 0.9, 0.9}, 1e-6);
}
