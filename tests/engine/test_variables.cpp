// The variable workflow: af::variable with its initializers, Session::run_init, reads,
// assign / assign_add / assign_sub, copy-on-write snapshots, collections and names.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "test_util.h"

namespace af = actorflow;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

bool in_collection(const af::Graph& g, const std::string& key, int node) {
  const auto& c = g.collection(key);
  return std::find(c.begin(), c.end(), node) != c.end();
}

std::vector<std::string> collection_names(const af::Graph& g, const std::string& key) {
  std::vector<std::string> names;
  for (int id : g.collection(key)) names.push_back(g.node(id).name);
  return names;
}

// Runs the enclosing test case once per session backend (doctest re-enters the case for
// each SUBCASE): the actor runtime (the default) and the sequential reference evaluator.
af::SessionOptions each_backend() {
  af::SessionOptions o;
  SUBCASE("actor runtime") { o.executor = ""; }
  SUBCASE("sequential") { o.executor = "sequential"; }
  return o;
}

af::Tensor read(af::Session& sess, const af::Output& x) {
  auto r = sess.eval(x);
  if (!r.ok()) FAIL(r.status().to_string());
  return *r;
}

double stddev_of(const af::Tensor& t, double* mean_out = nullptr) {
  double sum = 0, sq = 0;
  const int64_t n = t.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    double v = t.element_as_double(i);
    sum += v;
    sq += v * v;
  }
  double mean = sum / static_cast<double>(n);
  if (mean_out) *mean_out = mean;
  return std::sqrt(sq / static_cast<double>(n) - mean * mean);
}

}  // namespace

TEST_CASE("constant initializers: zeros, ones, constant_init, tensor_init") {
  af::Graph g;
  auto z = af::variable(g, af::zeros(g, {2, 3}), "z");
  auto o = af::variable(g, af::ones(g, {3}, af::i32), "o");
  auto c = af::variable(g, {2, 2}, af::constant_initializer(2.5, af::f64), "c");
  auto t = af::variable(g, af::Tensor::from_vector<float>({1, 2, 3}, {3}), "t");
  auto s = af::variable(g, {}, af::constant_initializer(-4, af::i64), "s");
  CHECK(z.shape() == af::Shape{2, 3});
  CHECK(o.dtype() == af::i32);
  CHECK(c.node().op == "VariableV2");
  auto out = aft::eval(g, {z, o, c, t, s});
  CHECK(out[0].to_vector<float>() == std::vector<float>(6, 0.f));
  CHECK(out[1].to_vector<int32_t>() == std::vector<int32_t>{1, 1, 1});
  CHECK(out[2].to_vector<double>() == std::vector<double>(4, 2.5));
  CHECK(out[3].to_vector<float>() == std::vector<float>{1, 2, 3});
  CHECK(out[4].shape() == af::Shape{});
  CHECK(out[4].item<int64_t>() == -4);
}

TEST_CASE("random initializers: normal, uniform, truncated, glorot") {
  af::Graph g;
  auto n = af::variable(g, af::random_normal(g, {20000}, 1, 0.1, 3), "n");
  auto u = af::variable(g, af::random_uniform(g, {20000}, -3, -1, 3), "u");
  auto tn = af::variable(g, af::truncated_normal(g, {20000}, 0, 1, 3), "tn");
  auto gu = af::variable(g, {30, 50}, af::glorot_uniform_initializer(4), "gu");
  auto gn = af::variable(g, {200, 300}, af::glorot_normal_initializer(5), "gn");
  auto out = aft::eval(g, {n, u, tn, gu, gn});

  double mean;
  double sd = stddev_of(out[0], &mean);
  CHECK(mean == doctest::Approx(1).epsilon(0.005));
  CHECK(sd == doctest::Approx(0.1).epsilon(0.01));

  auto uv = out[1].to_vector<float>();
  CHECK(*std::min_element(uv.begin(), uv.end()) >= -3.0f);
  CHECK(*std::max_element(uv.begin(), uv.end()) < -1.0f);

  auto tv = out[2].to_vector<float>();
  CHECK(std::all_of(tv.begin(), tv.end(), [](float v) { return std::fabs(v) <= 2.0f; }));

  // Glorot uniform: U(-limit, limit) with limit = sqrt(6 / (fan_in + fan_out)).
  const double limit = std::sqrt(6.0 / (30 + 50));
  auto gv = out[3].to_vector<float>();
  CHECK(out[3].shape() == af::Shape{30, 50});
  double lo = *std::min_element(gv.begin(), gv.end()), hi = *std::max_element(gv.begin(), gv.end());
  CHECK(lo >= -limit);
  CHECK(hi <= limit);
  CHECK(lo < -0.95 * limit);
  CHECK(hi > 0.95 * limit);

  // Glorot normal: truncated at 2 sigma, rescaled so the variance is 2 / (fan_in + fan_out).
  const double target = std::sqrt(2.0 / (200 + 300));
  const double sigma = target / 0.87962566103423978;
  sd = stddev_of(out[4], &mean);
  CHECK(sd == doctest::Approx(target).epsilon(0.02));
  CHECK(std::fabs(mean) < 0.002);
  auto nv = out[4].to_vector<float>();
  CHECK(std::all_of(nv.begin(), nv.end(), [&](float v) { return std::fabs(v) <= 2 * sigma * (1 + 1e-6); }));
}

TEST_CASE("seeded initializers replay in a fresh session; unseeded ones do not") {
  af::Graph g;
  auto seeded = af::variable(g, af::random_normal(g, {8}, 0, 1, 77), "seeded");
  auto free = af::variable(g, af::random_uniform(g, {8}), "free");
  af::Tensor a1, a2, f1, f2;
  {
    auto s = af::Session::create(g).value();
    REQUIRE(s.run_init().ok());
    a1 = read(s, seeded);
    f1 = read(s, free);
  }
  {
    auto s = af::Session::create(g).value();
    REQUIRE(s.run_init().ok());
    a2 = read(s, seeded);
    f2 = read(s, free);
  }
  CHECK(a1.equals(a2));
  CHECK_FALSE(f1.equals(f2));
}

TEST_CASE("values persist across runs and assign replaces them") {
  af::Graph g;
  auto w = af::variable(g, {2}, af::constant_initializer(1), "w");
  auto set = af::assign(w, af::constant(g, std::vector<float>{5, 6}, {2}));
  auto sess = af::Session::create(g, each_backend()).value();
  REQUIRE(sess.run_init().ok());
  CHECK(read(sess, w).to_vector<float>() == std::vector<float>{1, 1});
  CHECK(read(sess, w).to_vector<float>() == std::vector<float>{1, 1});
  CHECK(read(sess, set).to_vector<float>() == std::vector<float>{5, 6});
  CHECK(read(sess, w).to_vector<float>() == std::vector<float>{5, 6});
  CHECK(read(sess, w * 2.0).to_vector<float>() == std::vector<float>{10, 12});
  // Initializing again restores the initial value.
  REQUIRE(sess.run_init().ok());
  CHECK(read(sess, w).to_vector<float>() == std::vector<float>{1, 1});
  // global_variables_initializer is the same thing as an op.
  REQUIRE(sess.run({set}).ok());
  REQUIRE(sess.run({}, {}, {af::global_variables_initializer(g)}).ok());
  CHECK(read(sess, w).to_vector<float>() == std::vector<float>{1, 1});
}

TEST_CASE("reading or updating a variable before run_init fails naming the variable") {
  af::Graph g;
  auto w = af::variable(g, af::zeros(g, {3}), "weights");
  auto inc = af::assign_add(w, af::constant(g, 1.0f));
  auto sess = af::Session::create(g, each_backend()).value();
  auto r = sess.eval(w);
  REQUIRE_FALSE(r.ok());
  CHECK(contains(r.status().message(), "'weights'"));
  CHECK(contains(r.status().message(), "initialized"));
  auto u = sess.eval(inc);
  REQUIRE_FALSE(u.ok());
  CHECK(contains(u.status().message(), "'weights'"));
  REQUIRE(sess.run_init().ok());
  CHECK(read(sess, w).to_vector<float>() == std::vector<float>{0, 0, 0});
}

TEST_CASE("assign_add accumulates over 10 runs; assign_sub takes away") {
  af::Graph g;
  auto counter = af::variable(g, af::zeros(g, {}), "counter");
  auto inc = af::assign_add(counter, af::constant(g, 1.0f));
  auto vec = af::variable(g, af::zeros(g, {3}, af::i32), "vec");
  auto step = af::assign_add(vec, af::constant(g, af::Tensor::from_vector<int32_t>({1, 2, 3}, {3})));
  auto bump = af::assign_add(vec, af::constant(g, 10));  // a scalar adds to every element
  auto dec = af::assign_sub(vec, af::constant(g, af::Tensor::from_vector<int32_t>({1, 1, 1}, {3})));
  auto sess = af::Session::create(g, each_backend()).value();
  REQUIRE(sess.run_init().ok());
  for (int i = 1; i <= 10; ++i) {
    auto r = sess.run({inc});
    REQUIRE(r.ok());
    CHECK((*r)[0].item<float>() == static_cast<float>(i));
  }
  CHECK(read(sess, counter).item<float>() == 10.0f);
  for (int i = 0; i < 10; ++i) REQUIRE(sess.run({}, {}, {af::Operation(step)}).ok());
  CHECK(read(sess, vec).to_vector<int32_t>() == std::vector<int32_t>{10, 20, 30});
  REQUIRE(sess.run({bump}).ok());
  for (int i = 0; i < 3; ++i) REQUIRE(sess.run({dec}).ok());
  CHECK(read(sess, vec).to_vector<int32_t>() == std::vector<int32_t>{17, 27, 37});
}

TEST_CASE("a snapshot read before an update is not changed by the update") {
  af::Graph g;
  auto w = af::variable(g, {4}, af::constant_initializer(1), "w");
  auto inc = af::assign_add(w, af::constant(g, std::vector<float>{1, 2, 3, 4}, {4}));
  auto sess = af::Session::create(g, each_backend()).value();
  REQUIRE(sess.run_init().ok());
  af::Tensor before = read(sess, w);
  af::Tensor returned = read(sess, inc);
  CHECK(before.to_vector<float>() == std::vector<float>{1, 1, 1, 1});
  CHECK(returned.to_vector<float>() == std::vector<float>{2, 3, 4, 5});
  REQUIRE(sess.run({inc}).ok());
  CHECK(before.to_vector<float>() == std::vector<float>{1, 1, 1, 1});
  CHECK(returned.to_vector<float>() == std::vector<float>{2, 3, 4, 5});
  CHECK(read(sess, w).to_vector<float>() == std::vector<float>{3, 5, 7, 9});
  CHECK_FALSE(before.shares_buffer_with(returned));
}

TEST_CASE("a fetched variable value is a copy, a fed tensor handed back is the caller's own") {
  af::Graph g;
  auto w = af::variable(g, {3}, af::constant_initializer(2), "w");
  auto x = af::placeholder(g, af::f32, {3}, "x");
  auto same = af::identity(x);
  auto sess = af::Session::create(g, each_backend()).value();
  REQUIRE(sess.run_init().ok());
  af::Tensor fed = af::Tensor::from_vector<float>({1, 2, 3}, {3});
  auto out = sess.run({w, same}, {{x, fed}});
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  // The variable's value is copied (an in-place update must not reach it); the feed is not.
  CHECK((*out)[0].buffer_use_count() == 1);
  CHECK((*out)[1].shares_buffer_with(fed));
  auto call = sess.make_callable({same, w}, {x});
  REQUIRE(call.ok());
  auto again = (*call)({fed});
  REQUIRE_MESSAGE(again.ok(), again.status().to_string());
  CHECK((*again)[0].shares_buffer_with(fed));
  CHECK((*again)[1].to_vector<float>() == std::vector<float>{2, 2, 2});
  CHECK((*again)[1].buffer_use_count() == 1);
}

TEST_CASE("variable collections hold the right nodes") {
  af::Graph g;
  auto w = af::variable(g, af::zeros(g, {2}), "w");
  auto b = af::variable(g, af::zeros(g, {1}), "b");
  auto step = af::variable(g, af::zeros(g, {}, af::i64), "global_step", /*trainable=*/false);
  CHECK(g.collection("variables") == std::vector<int>{w.node_id(), b.node_id(), step.node_id()});
  CHECK(g.collection("trainable_variables") == std::vector<int>{w.node_id(), b.node_id()});
  CHECK_FALSE(in_collection(g, "trainable_variables", step.node_id()));
  CHECK(collection_names(g, "init_ops") == std::vector<std::string>{"w/Assign", "b/Assign", "global_step/Assign"});
  const auto& vars = g.collection("variables");
  const auto& inits = g.collection("init_ops");
  REQUIRE(inits.size() == vars.size());
  for (size_t i = 0; i < inits.size(); ++i) {
    CHECK(g.node(inits[i]).op == "Assign");
    CHECK(g.node(inits[i]).attr_string("variable") == g.node(vars[i]).name);
  }
  // Update ops are not initializers.
  af::assign_add(w, af::constant(g, 1.0f));
  CHECK(g.collection("init_ops").size() == 3);
  CHECK(g.collection("variables").size() == 3);
}

TEST_CASE("names under a NameScope") {
  af::Graph g;
  af::Output w, w2, inner;
  {
    af::NameScope s(g, "scope");
    w = af::variable(g, af::ones(g, {2}), "w");
    w2 = af::variable(g, af::ones(g, {2}), "w");
    af::NameScope s2(g, "inner");
    inner = af::variable(g, af::zeros(g, {1}), "v");
  }
  auto top = af::variable(g, af::zeros(g, {1}), "w");
  CHECK(w.node().name == "scope/w");
  CHECK(w2.node().name == "scope/w_1");
  CHECK(inner.node().name == "scope/inner/v");
  CHECK(top.node().name == "w");
  CHECK(g.find_node("scope/w/Assign") != nullptr);
  CHECK(g.find_node("scope/w/Assign")->attr_string("variable") == "scope/w");
  CHECK(g.find_node("scope/w_1/Assign") != nullptr);
  CHECK(g.find_node("scope/inner/v/Assign") != nullptr);
  CHECK(g.find_node("w/Assign") != nullptr);
  CHECK(collection_names(g, "init_ops") ==
        std::vector<std::string>{"scope/w/Assign", "scope/w_1/Assign", "scope/inner/v/Assign", "w/Assign"});
  // The scoped variables work like any other.
  auto out = aft::eval(g, {w, inner});
  CHECK(out[0].to_vector<float>() == std::vector<float>{1, 1});
  CHECK(out[1].to_vector<float>() == std::vector<float>{0});
}

TEST_CASE("variable and update build-time errors name the nodes") {
  af::Graph g;
  auto w = af::variable(g, af::zeros(g, {2}), "w");
  auto notvar = af::constant(g, std::vector<float>{1, 2}, {2}, "notvar");
  auto err = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const af::Error& e) {
      return e.what();
    }
    return "";
  };
  CHECK(contains(err([&] { af::assign(notvar, notvar); }), "'notvar'"));
  std::string e = err([&] { af::assign(w, af::constant(g, std::vector<float>{1, 2, 3}, {3}, "three")); });
  CHECK(contains(e, "'three' (float32[3])"));
  CHECK(contains(e, "'w'"));
  e = err([&] { af::assign_add(w, af::constant(g, 1)); });
  CHECK(contains(e, "int32"));
  CHECK_THROWS_AS(af::variable(g, af::zeros(g, {-1, 2}), "partial"), af::Error);
}

TEST_CASE("is_variable_initialized and report_uninitialized_variables follow run_init and single assigns") {
  af::Graph g;
  auto a = af::variable(g, af::zeros(g, {2}), "a");
  auto b = af::variable(g, af::ones(g, {3}), "layer/b");
  auto c = af::variable(g, af::ones(g, {1}), "c", /*trainable=*/false);
  auto a_ready = af::is_variable_initialized(a);
  auto all = af::report_uninitialized_variables(g);
  auto only_bc = af::report_uninitialized_variables(g, {b, c}, "bc");
  CHECK(all.dtype() == af::DType::string);
  auto set_b = af::assign(b, af::constant(g, std::vector<float>{4, 5, 6}, {3}));
  auto sess = af::Session::create(g, each_backend()).value();
  auto names = [&](const af::Output& report) {
    auto t = read(sess, report);
    REQUIRE(t.shape().rank() == 1);
    return t.to_vector<std::string>();
  };
  CHECK_FALSE(read(sess, a_ready).item<bool>());
  CHECK(names(all) == std::vector<std::string>{"a", "layer/b", "c"});
  REQUIRE(sess.run({set_b}).ok());
  CHECK(names(all) == std::vector<std::string>{"a", "c"});
  CHECK(names(only_bc) == std::vector<std::string>{"c"});
  REQUIRE(sess.run_init().ok());
  CHECK(read(sess, a_ready).item<bool>());
  CHECK(names(all).empty());
  // A graph without variables reports none.
  af::Graph empty;
  auto none = af::report_uninitialized_variables(empty);
  auto s2 = af::Session::create(empty).value();
  auto t = s2.eval(none);
  REQUIRE(t.ok());
  CHECK(t->num_elements() == 0);
  CHECK_THROWS_AS(af::is_variable_initialized(af::constant(g, 1.0f, "not_a_variable")), af::Error);
}

TEST_CASE("ReportUninitialized fed something other than one bool fails its step, naming the input") {
  af::Graph g;
  auto flag = af::placeholder(g, af::DType::boolean, af::Shape::unknown_rank(), "flag");
  af::NodeSpec spec;
  spec.op = "ReportUninitialized";
  spec.name = "report";
  spec.inputs = {flag};
  spec.attrs["names"] = af::AttrValue::Strings{"v"};
  auto report = g.add_node(std::move(spec));
  REQUIRE_MESSAGE(report.ok(), report.status().to_string());
  auto sess = af::Session::create(g, each_backend()).value();
  auto ok = sess.run({report->output(0)}, {{flag, af::Tensor::scalar(false)}});
  REQUIRE_MESSAGE(ok.ok(), ok.status().to_string());
  CHECK(ok->at(0).to_vector<std::string>() == std::vector<std::string>{"v"});
  auto bad = sess.run({report->output(0)}, {{flag, af::Tensor::from_vector<bool>({true, false}, af::Shape{2})}});
  REQUIRE_FALSE(bad.ok());
  CHECK(contains(bad.status().message(), "'v'"));
  CHECK(contains(bad.status().message(), "one bool"));
  // Its names must match its inputs when it is built.
  af::NodeSpec wrong;
  wrong.op = "ReportUninitialized";
  wrong.inputs = {flag};
  wrong.attrs["names"] = af::AttrValue::Strings{"a", "b"};
  auto refused = g.add_node(std::move(wrong));
  REQUIRE_FALSE(refused.ok());
  CHECK(contains(refused.status().message(), "one name per input"));
}
