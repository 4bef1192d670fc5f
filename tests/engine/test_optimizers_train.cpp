// The training plumbing around the optimizers: slots and collections, the global step,
// exponential decay, clip_by_global_norm, sparse gradients from gather, the errors of
// the Apply ops and the DSL, and the linear regression sample's model in-process.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "../../samples/linear_regression/linear_regression.h"
#include "test_util.h"

namespace af = actorflow;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

bool in_collection(const af::Graph& g, const std::string& key, const af::Output& x) {
  const auto& c = g.collection(key);
  return std::find(c.begin(), c.end(), x.node_id()) != c.end();
}

af::Tensor fetch(af::Session& sess, const af::Output& x, const af::FeedDict& feeds = {}) {
  auto r = sess.run({x}, feeds);
  if (!r.ok()) FAIL(r.status().to_string());
  return (*r)[0];
}

std::string build_error(af::Graph& g, af::NodeSpec spec) {
  auto r = g.add_node(std::move(spec));
  REQUIRE_FALSE(r.ok());
  return r.status().to_string();
}

}  // namespace

TEST_CASE("slots: named after the variable, not trainable, initialized by run_init") {
  af::Graph g;
  af::Output w;
  {
    af::NameScope scope(g, "dense");
    w = af::variable(g, af::ones(g, {2, 2}), "w");
  }
  auto loss = af::reduce_sum(af::square(w));
  af::optim::Adam opt(0.1);
  af::Operation train = opt.minimize(loss);
  af::Output m = opt.get_slot(w, "m"), v = opt.get_slot(w, "v");
  REQUIRE(m.valid());
  REQUIRE(v.valid());
  CHECK(m.node().name == "dense/w/Adam");
  CHECK(v.node().name == "dense/w/Adam_1");
  CHECK(m.shape() == af::Shape{2, 2});
  CHECK_FALSE(opt.get_slot(w, "nope").valid());
  CHECK(opt.slot_names() == std::vector<std::string>{"m", "v"});
  for (const af::Output& s : {m, v, opt.beta_powers().first}) {
    CHECK(in_collection(g, "variables", s));
    CHECK_FALSE(in_collection(g, "trainable_variables", s));
  }
  CHECK(g.collection("trainable_variables").size() == 1);
  // The update node names the variable and both slots.
  const af::Node* apply = nullptr;
  for (int id = 0; id < g.num_nodes(); ++id)
    if (g.node(id).op == "ApplyAdam") apply = &g.node(id);
  REQUIRE(apply != nullptr);
  CHECK(apply->name == "Adam/update_dense/w/ApplyAdam");
  CHECK(apply->attr_string("variable") == "dense/w");
  CHECK(apply->attr_string("m") == "dense/w/Adam");
  CHECK(train.name() == "Adam");

  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  aft::check_close(fetch(sess, m), {0, 0, 0, 0});
  // A second minimize on the same variable shares the slots.
  af::Operation again = opt.minimize(loss);
  CHECK(again.name() == "Adam_1");
  CHECK(opt.get_slot(w, "m").node_id() == m.node_id());
}

TEST_CASE("minimize under control dependencies: slot initializers do not inherit them") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {}, "x");
  auto w = af::variable(g, af::zeros(g, {}), "w");
  auto counter = af::variable(g, af::zeros(g, {}), "counter", false);
  af::Operation bump = af::assign_add(counter, x);
  af::Operation train;
  af::optim::Momentum opt(0.1, 0.9);
  {
    af::ControlDependencies deps(g, {bump});
    train = opt.minimize(af::square(w - x));
  }
  auto sess = af::Session::create(g).value();
  // Would need a feed for x if the slot's initializer waited on `bump`.
  REQUIRE(sess.run_init().ok());
  REQUIRE(sess.run({}, {{x, af::Tensor::scalar(2.0f)}}, {train}).ok());
  aft::check_close(fetch(sess, counter), {2});
  aft::check_close(fetch(sess, w), {0.4});  // g = 2 (w - x) = -4; w -= 0.1 * -4
}

TEST_CASE("global_step: one int64 variable per graph, +1 per minimize run") {
  af::Graph g;
  auto step = af::train::global_step(g);
  CHECK(step.node().name == "global_step");
  CHECK(step.dtype() == af::i64);
  CHECK(step.shape() == af::Shape{});
  CHECK(af::train::global_step(g).node_id() == step.node_id());
  CHECK_FALSE(in_collection(g, "trainable_variables", step));
  auto w = af::variable(g, af::ones(g, {3}), "w");
  auto loss = af::reduce_sum(af::square(w));
  af::optim::SGD opt(0.1);
  af::Operation train = opt.minimize(loss, {w}, step);
  CHECK(train.node().op == "AssignAdd");
  for (const char* executor : {"", "sequential"}) {
    CAPTURE(executor);
    af::SessionOptions o;
    o.executor = executor;
    auto sess = af::Session::create(g, o).value();
    REQUIRE(sess.run_init().ok());
    CHECK(fetch(sess, step).item<int64_t>() == 0);
    for (int64_t i = 1; i <= 3; ++i) {
      // The train op's output is the step after this run's increment.
      auto r = sess.run({train.output(0)});
      REQUIRE(r.ok());
      CHECK((*r)[0].item<int64_t>() == i);
      CHECK(fetch(sess, step).item<int64_t>() == i);
    }
    aft::check_close(fetch(sess, w), {0.512, 0.512, 0.512});  // w *= (1 - 0.2) per step
  }
}

TEST_CASE("a loss fetched with the train op is the loss before the update") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {}, "x");
  auto w = af::variable(g, {}, af::constant_initializer(3), "w");
  auto loss = w * x;  // d loss / d w = x: the update does not read w
  af::optim::SGD opt(1.0);
  af::Operation train = opt.minimize(loss);
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  for (int i = 0; i < 20; ++i) {
    auto r = sess.run({loss, w}, {{x, af::Tensor::scalar(1.0f)}}, {train});
    REQUIRE(r.ok());
    CHECK((*r)[0].item<float>() == doctest::Approx(3.0 - i));
    CHECK((*r)[1].item<float>() == doctest::Approx(3.0 - i));
  }
}

TEST_CASE("exponential_decay: lr * rate^(step / decay_steps), staircase floors the exponent") {
  af::Graph g;
  auto step = af::placeholder(g, af::i64, {}, "step");
  auto smooth = af::train::exponential_decay(0.1, step, 10, 0.5);
  auto stairs = af::train::exponential_decay(0.1, step, 10, 0.5, true);
  CHECK(smooth.dtype() == af::f32);
  auto sess = af::Session::create(g).value();
  struct Row { int64_t step; double smooth, stairs; };
  for (Row r : {Row{0, 0.1, 0.1}, Row{5, 0.1 * std::pow(0.5, 0.5), 0.1}, Row{10, 0.05, 0.05},
                Row{25, 0.1 * std::pow(0.5, 2.5), 0.025}, Row{39, 0.1 * std::pow(0.5, 3.9), 0.0125}}) {
    CAPTURE(r.step);
    auto out = sess.run({smooth, stairs}, {{step, af::Tensor::scalar(r.step)}});
    REQUIRE(out.ok());
    aft::check_close((*out)[0], {r.smooth});
    aft::check_close((*out)[1], {r.stairs});
  }
  // A tensor learning rate keeps its dtype.
  auto lr64 = af::constant(g, 1.0, af::f64, "lr64");
  auto d64 = af::train::exponential_decay(lr64, step, 2, 0.1, true);
  CHECK(d64.dtype() == af::f64);
  aft::check_close(fetch(sess, d64, {{step, af::Tensor::scalar(int64_t{5})}}), {0.01});
  CHECK_THROWS_AS(af::train::exponential_decay(0.1, step, 0, 0.5), af::Error);
}

TEST_CASE("a decayed learning rate drives the optimizer, step by step") {
  af::Graph g;
  auto step = af::train::global_step(g);
  auto w = af::variable(g, af::ones(g, {}), "w");
  auto lr = af::train::exponential_decay(0.1, step, 1, 0.5, true);
  af::optim::SGD opt(lr);
  af::Operation train = opt.minimize(w * 1.0, {}, step);  // gradient 1
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  for (int i = 0; i < 3; ++i) REQUIRE(sess.run({}, {}, {train}).ok());
  // lr 0.1, 0.05, 0.025 at steps 0, 1, 2.
  aft::check_close(fetch(sess, w), {1 - 0.1 - 0.05 - 0.025});
}

TEST_CASE("a placeholder learning rate is fed per run") {
  af::Graph g;
  auto lr = af::placeholder(g, af::f32, {}, "lr");
  auto w = af::variable(g, af::zeros(g, {2}, af::f64), "w");
  af::optim::GradientDescent opt(lr);
  af::Operation train = opt.minimize(af::reduce_sum(w * 2.0));  // f32 lr cast to f64
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  REQUIRE(sess.run({}, {{lr, af::Tensor::scalar(0.5f)}}, {train}).ok());
  REQUIRE(sess.run({}, {{lr, af::Tensor::scalar(0.25f)}}, {train}).ok());
  aft::check_close(fetch(sess, w), {-1.5, -1.5});
  CHECK_FALSE(sess.run({}, {}, {train}).ok());  // lr not fed
}

TEST_CASE("clip_by_global_norm: scale by clip / max(norm, clip)") {
  af::Graph g;
  auto a = af::constant(g, std::vector<float>{3, 4}, {2}, "a");
  auto b = af::constant(g, std::vector<float>{12}, {1}, "b");
  // norm = sqrt(9 + 16 + 144) = 13
  auto [clipped, norm] = af::train::clip_by_global_norm({a, af::Output(), b}, 6.5);
  REQUIRE(clipped.size() == 3);
  CHECK_FALSE(clipped[1].valid());
  auto out = aft::eval(g, {clipped[0], clipped[2], norm});
  aft::check_close(out[2], {13});
  aft::check_close(out[0], {1.5, 2});
  aft::check_close(out[1], {6});
  // Under the limit: unchanged.
  auto [same, norm2] = af::train::clip_by_global_norm({a, b}, 20.0);
  auto out2 = aft::eval(g, {same[0], same[1], norm2});
  aft::check_close(out2[0], {3, 4});
  aft::check_close(out2[1], {12});
  // All zeros: norm 0, gradients stay 0 (no NaN).
  auto z = af::constant(g, std::vector<float>{0, 0}, {2}, "z");
  auto [zc, zn] = af::train::clip_by_global_norm({z}, 1.0);
  auto out3 = aft::eval(g, {zc[0], zn});
  aft::check_close(out3[0], {0, 0});
  aft::check_close(out3[1], {0});
  CHECK_THROWS_AS(af::train::clip_by_global_norm(std::vector<af::Output>{af::Output()}, 1.0), af::Error);
}

TEST_CASE("clip_by_global_norm over grads and vars, then apply_gradients") {
  af::Graph g;
  auto w = af::variable(g, af::zeros(g, {2}), "w");
  auto loss = af::reduce_sum(w * af::constant(g, std::vector<float>{30, 40}, {2}));  // gradient {30, 40}, norm 50
  af::optim::SGD opt(1.0);
  auto gv = opt.compute_gradients(loss);
  auto [clipped, norm] = af::train::clip_by_global_norm(gv, 5.0);
  af::Operation train = opt.apply_gradients(clipped);
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  REQUIRE(sess.run({}, {}, {train}).ok());
  aft::check_close(fetch(sess, w), {-3, -4});
  aft::check_close(fetch(sess, norm), {50});
}

TEST_CASE("embeddings: the gradient of gather updates only the gathered rows") {
  af::Graph g;
  auto emb = af::variable(g, af::Tensor::from_vector<float>({1, 1, 2, 2, 3, 3, 4, 4}, {4, 2}), "emb");
  auto ids = af::placeholder(g, af::i64, {-1}, "ids");
  auto rows = af::gather(emb, ids);
  auto loss = af::reduce_sum(rows * af::constant(g, std::vector<float>{1, 2}, {2}));  // each row's gradient {1, 2}
  af::optim::Adagrad opt(0.5, 1.0);
  auto gv = opt.compute_gradients(loss);
  REQUIRE(gv.size() == 1);
  CHECK(gv[0].first.sparse());
  af::Operation train = opt.apply_gradients(gv);
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  REQUIRE(sess.run({}, {{ids, af::Tensor::from_vector<int64_t>({1, 3, 1}, {3})}}, {train}).ok());
  // Row 1 twice: g = {2, 4} summed, accum = 1 + g^2 = {5, 17}; w -= 0.5 g / sqrt(accum).
  // Row 3 once: g = {1, 2}, accum = {2, 5}. Rows 0 and 2 (and their accum) untouched.
  aft::check_close(fetch(sess, emb), {1, 1, 2 - 1 / std::sqrt(5.0), 2 - 2 / std::sqrt(17.0), 3, 3,
                                      4 - 0.5 / std::sqrt(2.0), 4 - 1 / std::sqrt(5.0)});
  aft::check_close(fetch(sess, opt.get_slot(emb, "accum")), {1, 1, 5, 17, 1, 1, 2, 5});
  // An id out of range is an error naming it; the variable is left as it was.
  auto bad = sess.run({}, {{ids, af::Tensor::from_vector<int64_t>({0, 9}, {2})}}, {train});
  REQUIRE_FALSE(bad.ok());
  CHECK(contains(bad.status().to_string(), "9"));
}

TEST_CASE("Apply ops: shape inference errors name the variables and inputs") {
  af::Graph g;
  af::variable(g, af::zeros(g, {2, 3}), "w");
  af::variable(g, af::zeros(g, {2, 3}), "acc");
  af::variable(g, af::zeros(g, {3}), "small");
  af::variable(g, af::zeros(g, {2}, af::i32), "iv");
  auto lr = af::constant(g, 0.1f, "lr");
  auto grad = af::constant(g, af::Tensor::zeros(af::f32, {2, 3}), "grad");
  auto bad_grad = af::constant(g, af::Tensor::zeros(af::f32, {3, 2}), "bad_grad");
  auto spec = [&](std::string op, std::vector<af::Output> in, std::map<std::string, af::AttrValue> attrs) {
    af::NodeSpec s;
    s.op = std::move(op);
    s.inputs = std::move(in);
    s.attrs = std::move(attrs);
    return s;
  };
  CHECK(g.add_node(spec("ApplyGradientDescent", {lr, grad}, {{"variable", "w"}})).ok());
  CHECK(contains(build_error(g, spec("ApplyGradientDescent", {lr, grad}, {{"variable", "lr"}})), "must name a VariableV2"));
  CHECK(contains(build_error(g, spec("ApplyGradientDescent", {lr, grad}, {})), "variable"));
  std::string e = build_error(g, spec("ApplyGradientDescent", {lr, bad_grad}, {{"variable", "w"}}));
  CHECK(contains(e, "bad_grad"));
  CHECK(contains(e, "[2,3]"));
  CHECK(contains(build_error(g, spec("ApplyGradientDescent", {grad, grad}, {{"variable", "w"}})), "scalar"));
  CHECK(contains(build_error(g, spec("ApplyGradientDescent", {lr, lr}, {{"variable", "iv"}})), "int32"));
  CHECK(contains(build_error(g, spec("ApplyAdagrad", {lr, grad}, {{"variable", "w"}, {"accum", "small"}})), "small"));
  CHECK(contains(build_error(g, spec("ApplyAdagrad", {lr, grad}, {{"variable", "w"}, {"accum", "w"}})), "too"));
  CHECK(contains(build_error(g, spec("ApplyAdagrad", {lr, grad}, {{"variable", "w"}})), "accum"));
  CHECK(g.add_node(spec("ApplyAdagrad", {lr, grad}, {{"variable", "w"}, {"accum", "acc"}})).ok());
  auto idx = af::constant(g, std::vector<int64_t>{0, 1}, {2}, "idx");
  auto fidx = af::constant(g, std::vector<float>{0, 1}, {2}, "fidx");
  auto rows = af::constant(g, af::Tensor::zeros(af::f32, {2, 3}), "rows");
  auto rows4 = af::constant(g, af::Tensor::zeros(af::f32, {2, 4}), "rows4");
  CHECK(g.add_node(spec("SparseApplyGradientDescent", {lr, rows, idx}, {{"variable", "w"}})).ok());
  CHECK(contains(build_error(g, spec("SparseApplyGradientDescent", {lr, rows4, idx}, {{"variable", "w"}})), "rows4"));
  CHECK(contains(build_error(g, spec("SparseApplyGradientDescent", {lr, rows, fidx}, {{"variable", "w"}})), "fidx"));
  af::variable(g, af::zeros(g, {}), "sv");
  CHECK(contains(build_error(g, spec("SparseApplyGradientDescent", {lr, lr, idx}, {{"variable", "sv"}})), "scalar"));
  // Wrong input count.
  CHECK(contains(build_error(g, spec("ApplyAdam", {lr, grad}, {{"variable", "w"}, {"m", "acc"}, {"v", "small"}})), "7"));
}

TEST_CASE("Apply ops: runtime errors") {
  SUBCASE("uninitialized variable") {
    af::Graph g;
    auto w = af::variable(g, af::zeros(g, {2}), "w");
    af::optim::SGD opt(0.1);
    af::Operation train = opt.minimize(af::reduce_sum(w));
    auto sess = af::Session::create(g).value();  // no run_init
    auto r = sess.run({}, {}, {train});
    REQUIRE_FALSE(r.ok());
    CHECK(contains(r.status().to_string(), "initialized"));
  }
  SUBCASE("Ftrl with a negative l1; Adam rejects beta1 = 1") {
    af::Graph g;
    auto w = af::variable(g, af::zeros(g, {2}), "w");
    auto l1 = af::placeholder(g, af::f32, {}, "l1");
    af::optim::Ftrl opt(0.1, l1);
    af::Operation train = opt.minimize(af::reduce_sum(w));
    auto sess = af::Session::create(g).value();
    REQUIRE(sess.run_init().ok());
    auto r = sess.run({}, {{l1, af::Tensor::scalar(-1.0f)}}, {train});
    REQUIRE_FALSE(r.ok());
    CHECK(contains(r.status().to_string(), "l1"));
    CHECK(sess.run({}, {{l1, af::Tensor::scalar(0.0f)}}, {train}).ok());
    CHECK_THROWS_AS(af::optim::Adam(0.1, 1.0), af::Error);
  }
  SUBCASE("empty variables update to empty") {
    af::Graph g;
    auto w = af::variable(g, af::zeros(g, {0, 3}), "w");
    af::optim::RMSProp opt(0.1);
    af::Operation train = opt.minimize(af::reduce_sum(w) + af::reduce_sum(af::gather(w, af::constant(g, std::vector<int64_t>{}, {0}))));
    auto sess = af::Session::create(g).value();
    REQUIRE(sess.run_init().ok());
    REQUIRE(sess.run({}, {}, {train}).ok());
    CHECK(fetch(sess, w).num_elements() == 0);
  }
}

TEST_CASE("minimize: errors at build time") {
  af::Graph g;
  auto w = af::variable(g, af::zeros(g, {2}), "w");
  auto u = af::variable(g, af::zeros(g, {2}), "unused");
  auto c = af::constant(g, 1.0f, "c");
  af::optim::SGD opt(0.1);
  // No variable the loss depends on: names the variables.
  try {
    (void)opt.minimize(c * 2.0, {u});
    FAIL("expected af::Error");
  } catch (const af::Error& e) {
    CHECK(contains(e.what(), "unused"));
  }
  CHECK_THROWS_AS((void)opt.minimize(af::reduce_sum(w), {c}), af::Error);  // not a variable
  CHECK_THROWS_AS((void)opt.minimize(af::Output()), af::Error);
  auto iw = af::variable(g, af::zeros(g, {}, af::i64), "iw");
  CHECK_THROWS_AS((void)opt.minimize(af::cast(iw, af::f32), {iw}), af::Error);
  CHECK_THROWS_AS((void)opt.minimize(af::reduce_sum(w), {}, w), af::Error);  // a float global step
  // Only w has a gradient: unused is skipped, w updated.
  af::Operation train = opt.minimize(af::reduce_sum(w), {w, u});
  auto out = aft::eval(g, {w});
  CHECK(out[0].num_elements() == 2);
  (void)train;
}

TEST_CASE("a training graph survives a GraphDef round trip and trains the same") {
  af::Graph g;
  auto w = af::variable(g, af::Tensor::from_vector<float>({1, 2, 3}, {3}), "w");
  auto emb = af::variable(g, af::Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}), "emb");
  auto ids = af::constant(g, std::vector<int64_t>{1, 1}, {2}, "ids");
  auto loss = af::reduce_sum(af::square(w)) + af::reduce_sum(af::square(af::gather(emb, ids)));
  auto step = af::train::global_step(g);
  af::optim::Adam opt(0.1);
  af::Operation train = opt.minimize(loss, {}, step, "train");
  auto back = af::Graph::deserialize(g.serialize());
  REQUIRE_MESSAGE(back.ok(), back.status().to_string());
  af::Graph& g2 = **back;
  auto run = [](af::Graph& graph) {
    auto sess = af::Session::create(graph).value();
    REQUIRE(sess.run_init().ok());
    auto t = graph.find_output("train");
    REQUIRE(t.ok());
    for (int i = 0; i < 3; ++i) REQUIRE(sess.run({}, {}, {af::Operation(*t)}).ok());
    std::vector<af::Output> outs;
    for (const char* name : {"w", "emb", "emb/Adam", "global_step", "beta1_power"}) {
      auto o = graph.find_output(name);
      REQUIRE(o.ok());
      outs.push_back(*o);
    }
    auto r = sess.run(std::vector<af::Fetch>(outs.begin(), outs.end()));
    REQUIRE(r.ok());
    return *r;
  };
  auto a = run(g);
  auto b = run(g2);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i].equals(b[i]));
  CHECK(a[3].item<int64_t>() == 3);
  // Row 0 of emb is never gathered: untouched; row 1 moved.
  CHECK(a[1].element_as_double(0) == 1);
  CHECK(a[1].element_as_double(2) < 3);
  (void)train;
}

TEST_CASE("linear_regression sample: SGD one point at a time reaches w = 2, b = 10") {
  linreg::Data d = linreg::make_data(100, 42);
  REQUIRE(d.x.size() == 100);
  int epochs_seen = 0;
  auto fit = linreg::train(d, 10, 0.01, [&](int epoch, double, double) { epochs_seen = epoch; });
  REQUIRE(fit.ok());
  CHECK(epochs_seen == 10);
  CHECK(std::fabs(fit->w - 2) < 0.1);
  CHECK(std::fabs(fit->b - 10) < 0.1);
}
