// Session::make_callable: a step prepared once (TF's MakeCallable) gives the same answers
// as run(), checks its feeds, honours deadlines, shares the session's variables and
// fails cleanly once the session is closed.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/runtime/actor_count.h>

namespace af = actorflow;

TEST_CASE("a callable answers as run() does, without preparing anything per call") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1, 2}, "x");
  auto w = af::constant(g, af::Tensor::from({{1.f, 2.f}, {3.f, 4.f}}));
  auto y = af::matmul(x, w);
  auto total = af::reduce_sum(y);
  auto sess = af::Session::create(g).value();
  auto call = sess.make_callable({y, total}, {x}).value();
  REQUIRE(call.valid());
  int64_t spawned = af::runtime::node_actors_spawned();
  for (int i = 0; i < 20; ++i) {
    float v = static_cast<float>(i);
    auto in = af::Tensor::from({{v, 1.f}});
    auto a = call({in});
    auto b = sess.run({y, total}, {{x, in}});
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK((*a)[0].to_vector<float>() == (*b)[0].to_vector<float>());
    CHECK((*a)[1].item<float>() == (*b)[1].item<float>());
    CHECK((*a)[0].to_vector<float>() == std::vector<float>{v + 3.f, 2.f * v + 4.f});
  }
  // run() with the same fetches and feeds reuses the callable's actors.
  CHECK(af::runtime::node_actors_spawned() == spawned);
}

TEST_CASE("a callable checks its feeds") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {2}, "x");
  auto y = x * 2.0f;
  auto sess = af::Session::create(g).value();
  auto call = sess.make_callable({y}, {x}).value();
  auto none = call({});
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message().find("takes 1 feed(s), got 0") != std::string::npos);
  auto wrong_dtype = call({af::Tensor::from({1, 2})});
  REQUIRE_FALSE(wrong_dtype.ok());
  CHECK(wrong_dtype.status().message().find("x") != std::string::npos);
  auto wrong_shape = call({af::Tensor::from({1.f, 2.f, 3.f})});
  REQUIRE_FALSE(wrong_shape.ok());
  auto good = call({af::Tensor::from({1.f, 2.f})});
  REQUIRE(good.ok());
  CHECK((*good)[0].to_vector<float>() == std::vector<float>{2.f, 4.f});
  // A fetch of another graph is refused when the callable is made.
  af::Graph other;
  auto z = af::placeholder(other, af::f32, {2}, "z");
  CHECK_FALSE(sess.make_callable({z}).ok());
  af::Callable empty;
  CHECK_FALSE(empty({}).ok());
}

TEST_CASE("a callable runs training steps on the session's variables and stops at close()") {
  af::Graph g;
  auto v = af::variable(g, af::Shape({}), af::zeros_initializer(), "v");
  auto step = af::assign_add(v, af::constant(g, 1.0f));
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  auto call = sess.make_callable({step}).value();
  for (int i = 0; i < 5; ++i) REQUIRE(call().ok());
  auto now = sess.run({v});
  REQUIRE(now.ok());
  CHECK((*now)[0].item<float>() == 5.0f);
  REQUIRE(sess.close().ok());
  auto after = call();
  CHECK_FALSE(after.ok());
}
