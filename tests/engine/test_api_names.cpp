// TF1's names mean TF1's things: zeros/ones/random_normal are ops, initializers are
// *_initializer, a float literal is float32, variables take an initial value, and
// get_variable with VariableScope shares weights. Plus messages that name the graph.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>

#include <cmath>
#include <memory>
#include <string>

#include "test_util.h"

namespace af = actorflow;
namespace L = af::layers;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

template <typename F>
af::Status build_error(F&& f) {
  try {
    f();
  } catch (const af::Error& e) {
    return e.status();
  }
  return af::Status::OK();
}

// Session::create's result, whether it holds the session or a pointer to it.
[[maybe_unused]] af::Session& session_of(af::Session& s) { return s; }
[[maybe_unused]] af::Session& session_of(std::unique_ptr<af::Session>& s) { return *s; }

}  // namespace

TEST_CASE("zeros, ones, fill and random_normal are ops that mix with other tensors") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {2}, "x");
  auto y = x + af::zeros(g, {2});
  auto z = af::ones(g, {2, 2}, af::i32);
  auto f = af::fill(g, {3}, 2.5);
  auto r = af::random_normal(g, {20000}, 3, 0.5, /*seed=*/7);
  auto u = af::random_uniform(g, {1000}, -2, -1, 7);
  auto t = af::truncated_normal(g, {1000}, 0, 1, 7);
  CHECK(z.dtype() == af::i32);
  auto out = aft::eval(g, {y, z, f, af::reduce_mean(r), af::reduce_max(u), af::reduce_max(af::abs(t))},
                       {{x, af::Tensor::from({1.f, 2.f})}});
  CHECK(out[0].to_vector<float>() == std::vector<float>{1, 2});
  CHECK(out[1].to_vector<int32_t>() == std::vector<int32_t>{1, 1, 1, 1});
  CHECK(out[2].to_vector<float>() == std::vector<float>{2.5f, 2.5f, 2.5f});
  CHECK(std::fabs(out[3].item<float>() - 3.0f) < 0.05f);
  CHECK(out[4].item<float>() <= -1.0f);
  CHECK(out[5].item<float>() <= 2.0f);
}

TEST_CASE("constant: a float literal is float32; float64 only by name") {
  af::Graph g;
  CHECK(af::constant(g, 0.5).dtype() == af::f32);
  CHECK(af::constant(g, 0.5f).dtype() == af::f32);
  CHECK(af::constant(g, 0.5, af::f64).dtype() == af::f64);
  CHECK(af::constant<double>(g, 0.5).dtype() == af::f64);
  CHECK(af::constant(g, 3).dtype() == af::i32);
  CHECK(af::constant(g, int64_t{3}).dtype() == af::i64);
  CHECK(af::constant(g, true).dtype() == af::boolean);
  auto x = af::placeholder(g, af::f32, {2}, "x");
  auto y = x * af::constant(g, 0.5);  // float64 here used to fail to build
  auto out = aft::eval1(g, y, {{x, af::Tensor::from({2.f, 4.f})}});
  CHECK(out.to_vector<float>() == std::vector<float>{1, 2});
  CHECK(aft::eval1(g, af::constant(g, 0.1, af::f64)).item<double>() == 0.1);
}

TEST_CASE("variable takes an initial value, as tf.Variable(tf.random_normal([2, 3]))") {
  af::Graph g;
  auto v = af::variable(g, af::random_normal(g, {2, 3}, 0, 1, /*seed=*/3), "v");
  CHECK(v.node().op == "VariableV2");
  CHECK(v.dtype() == af::f32);
  CHECK(v.shape() == af::Shape{2, 3});
  auto c = af::variable(g, af::fill(g, {2}, 4.0, af::f64), "c");
  auto t = af::variable(g, af::Tensor::from({{1, 2}, {3, 4}}), "t");
  CHECK(g.find_node("t/initial_value") != nullptr);
  auto s = af::variable(g, {2, 2}, af::constant_initializer(2.5, af::f64), "s");
  auto k = af::variable(g, {2, 2}, af::constant_initializer(af::Tensor::from({1.f, 2.f, 3.f, 4.f})), "k");
  auto out = aft::eval(g, {v, c, t, s, k});
  CHECK(out[0].num_elements() == 6);
  CHECK(out[1].to_vector<double>() == std::vector<double>{4, 4});
  CHECK(out[2].matrix<int32_t>()(1, 0) == 3);
  CHECK(out[3].to_vector<double>() == std::vector<double>{2.5, 2.5, 2.5, 2.5});
  CHECK(out[4].shape() == af::Shape{2, 2});
  auto p = af::placeholder(g, af::f32, {-1, 2}, "p");
  CHECK(contains(build_error([&] { af::variable(g, p, "bad"); }).message(), "not fully defined"));
  CHECK(contains(build_error([&] { af::variable(g, {3}, af::constant_initializer(af::Tensor::from({1.f, 2.f})), "k3"); })
                     .message(),
                 "cannot fill shape [3]"));
  af::Graph other;
  CHECK(contains(build_error([&] { af::variable(g, af::zeros(other, {1}), "w"); }).message(), other.label()));
}

TEST_CASE("get_variable: created once, shared only under a reusing VariableScope") {
  af::Graph g;
  af::Output a;
  {
    af::VariableScope s(g, "model");
    CHECK(s.name() == "model");
    a = af::get_variable(g, "w", {2}, af::ones_initializer());
  }
  CHECK(a.node().name == "model/w");
  CHECK(g.collection("trainable_variables").size() == 1);
  {
    af::VariableScope s(g, "model");
    auto st = build_error([&] { af::get_variable(g, "w", {2}, af::ones_initializer()); });
    CHECK(st.code() == af::Code::already_exists);
    CHECK(contains(st.message(), "'model/w'"));
    CHECK(contains(st.message(), "reuse"));
  }
  {
    af::VariableScope s(g, "model", /*reuse=*/true);
    CHECK(af::get_variable(g, "w", {2}, af::ones_initializer()).node_id() == a.node_id());
    CHECK(build_error([&] { af::get_variable(g, "missing", {2}); }).code() == af::Code::not_found);
    CHECK(contains(build_error([&] { af::get_variable(g, "w", {3}, af::ones_initializer()); }).message(), "[3]"));
    af::VariableScope inner(g, "inner");  // inherits reuse
    CHECK(build_error([&] { af::get_variable(g, "x", {1}); }).code() == af::Code::not_found);
  }
  {
    af::VariableScope s(g, "model", af::VarReuse::auto_reuse);
    CHECK(af::get_variable(g, "w", {2}, af::ones_initializer()).node_id() == a.node_id());
    CHECK(af::get_variable(g, "fresh", {1}, af::zeros_initializer()).node().name == "model/fresh");
  }
  {
    // Name scopes do not name variables (TF1); ops under a VariableScope get its name.
    af::NameScope ns(g, "block");
    CHECK(af::get_variable(g, "free", {1}, af::zeros_initializer()).node().name == "free");
    af::VariableScope vs(g, "vs");
    CHECK(af::get_variable(g, "w", {1}, af::zeros_initializer()).node().name == "vs/w");
    CHECK(af::identity(a, "id").node().name.rfind("block/vs", 0) == 0);
  }
  af::variable(g, af::zeros(g, {1}), "plain");
  CHECK(build_error([&] { af::get_variable(g, "plain", {1}); }).code() == af::Code::already_exists);
  auto out = aft::eval(g, {a});
  CHECK(out[0].to_vector<float>() == std::vector<float>{1, 1});
}

TEST_CASE("layers made again under a reusing VariableScope share their variables") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1, 3}, "x");
  auto net = [&](const af::Output& in) {
    auto h = L::dense(in, 4, L::Act::relu);
    h = L::batch_norm(h, true);
    return L::dense(h, 2);
  };
  af::Output y1, y2;
  {
    af::VariableScope s(g, "net");
    y1 = net(x);
  }
  const size_t made = g.collection("variables").size();
  CHECK(made == 8);  // two kernels, two biases, gamma, beta and the moving statistics
  CHECK(g.find_node("net/dense/kernel") != nullptr);
  CHECK(g.find_node("net/dense_1/bias") != nullptr);
  CHECK(g.find_node("net/batch_normalization/moving_mean") != nullptr);
  {
    af::VariableScope s(g, "net", true);
    y2 = net(x);
  }
  CHECK(g.collection("variables").size() == made);
  auto xv = af::Tensor::from({{1.f, 2.f, 3.f}, {-1.f, 0.5f, 2.f}});
  auto out = aft::eval(g, {y1, y2}, {{x, xv}});
  CHECK(out[0].equals(out[1]));
  // Without reuse the second build collides, as tf.layers does.
  {
    af::VariableScope s(g, "net");
    CHECK(build_error([&] { net(x); }).code() == af::Code::already_exists);
  }
  // At the root, layers still get fresh names; re-entering the root with reuse shares.
  af::Graph h;
  auto xh = af::placeholder(h, af::f32, {-1, 3}, "x");
  L::dense(xh, 2);
  L::dense(xh, 2);
  CHECK(h.find_node("dense_1/kernel") != nullptr);
  {
    af::VariableScope root(h, "", true);
    L::dense(xh, 2);
  }
  CHECK(h.collection("variables").size() == 4);
}

TEST_CASE("a fetch from another graph names the node and both graphs; an invalid Output says so") {
  af::Graph g1("train"), g2;
  CHECK(g1.label() == "graph 'train' (#" + std::to_string(g1.id()) + ")");
  CHECK(g2.label() == "graph #" + std::to_string(g2.id()));
  CHECK(g1.id() != g2.id());
  auto a = af::constant(g1, 1.0f, "a");
  auto b = af::constant(g2, 2.0f, "b");
  auto created = af::Session::create(g2);
  REQUIRE(created.ok());
  af::Session& sess = session_of(*created);
  auto r = sess.run({a});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == "a fetch 'a:0' belongs to " + g1.label() + ", not to " + g2.label());
  auto fed = sess.run({b}, {{a, af::Tensor::scalar(1.0f)}});
  REQUIRE_FALSE(fed.ok());
  CHECK(contains(fed.status().message(), "a feed 'a:0' belongs to " + g1.label()));
  auto bad = sess.run({af::Output()});
  REQUIRE_FALSE(bad.ok());
  CHECK(contains(bad.status().message(), "invalid Output"));
  CHECK_FALSE(contains(bad.status().message(), "belongs"));
  auto bad_target = sess.run({b}, {}, {af::Operation()});
  REQUIRE_FALSE(bad_target.ok());
  CHECK(contains(bad_target.status().message(), "invalid Operation"));
  // Building: a foreign input names both graphs; an invalid one says it is invalid.
  auto mixed = build_error([&] { (void)(a + b); });
  CHECK(contains(mixed.message(), "input 'b:0' belongs to " + g2.label() + ", not to " + g1.label()));
  CHECK(contains(build_error([&] { (void)af::relu(af::Output()); }).message(), "invalid Output"));
  CHECK(contains(build_error([&] { (void)af::add(a, af::Output()); }).message(), "invalid Output"));
  CHECK(contains(build_error([&] { (void)af::Output().name(); }).message(), "invalid Output"));
  CHECK(contains(build_error([&] { (void)af::Output().dtype(); }).message(), "invalid Output"));
  CHECK(contains(build_error([&] { (void)af::gradients({a}, {af::Output()}); }).message(), "invalid Output"));
  CHECK(contains(build_error([&] { (void)af::gradients({a}, {b}); }).message(), g2.label()));
}

TEST_CASE("the empty result of a fetched op says what it is instead of crashing") {
  af::Graph g;
  auto w = af::variable(g, af::ones(g, {2}), "w");
  auto loss = af::reduce_sum(w * af::constant(g, 0.5), {}, false, "loss");
  auto train = af::group(g, {af::Operation(af::assign_sub(w, af::ones(g, {2})))}, "train");
  auto created = af::Session::create(g);
  REQUIRE(created.ok());
  af::Session& sess = session_of(*created);
  REQUIRE(sess.run_init().ok());
  auto out = sess.run({train, loss});
  REQUIRE(out.ok());
  CHECK((*out)[1].dtype() == af::f32);  // the loss; the op gives nothing back
  CHECK_FALSE((*out)[0].valid());
  auto msg = build_error([&] { (void)(*out)[0].item<float>(); }).message();
  CHECK(msg == "expected float32 but the tensor is an empty Tensor (default-constructed, or the result of fetching an "
               "operation)");
}

TEST_CASE("a layer added to a loaded graph does not collide with the variables it holds") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1, 3}, "x");
  L::dense(x, 2);
  auto loaded = af::Graph::deserialize(g.serialize());
  REQUIRE(loaded.ok());
  af::Graph& h = **loaded;
  auto xh = h.find_output("x");
  REQUIRE(xh.ok());
  auto y = L::dense(*xh, 4);  // "dense" holds variables get_variable did not make here
  CHECK(h.find_node("dense_1/kernel") != nullptr);
  CHECK(y.shape() == af::Shape{-1, 4});
  // A variable made by variable() under a layer's name keeps the layer off that name too.
  af::Graph k;
  auto xk = af::placeholder(k, af::f32, {-1, 3}, "x");
  af::variable(k, af::zeros(k, {3, 2}), "dense/kernel");
  L::dense(xk, 2);
  CHECK(k.find_node("dense_1/kernel") != nullptr);
}
