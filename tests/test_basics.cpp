#include <doctest/doctest.h>

#include <actorflow/actorflow.h>

namespace af = actorflow;

TEST_CASE("hello graph: a string constant and 10 + 32") {
  af::Graph g;
  auto hello = af::constant(g, "Hello, ActorFlow!");
  auto sum = af::constant(g, 10) + af::constant(g, 32);
  auto sess = af::Session::create(g, af::SessionOptions{.executor = "sequential"}).value();
  auto out = sess.run({hello, sum});
  REQUIRE(out.ok());
  CHECK((*out)[0].item<std::string>() == "Hello, ActorFlow!");
  CHECK((*out)[1].item<int32_t>() == 42);
}

TEST_CASE("broadcasting add of [2,3] and [3]") {
  af::Graph g;
  auto a = af::constant(g, std::vector<float>{1, 2, 3, 4, 5, 6}, af::Shape{2, 3});
  auto b = af::constant(g, std::vector<float>{10, 20, 30}, af::Shape{3});
  auto c = a + b;
  CHECK(c.shape() == af::Shape{2, 3});
  auto sess = af::Session::create(g, af::SessionOptions{.executor = "sequential"}).value();
  auto out = sess.eval(c);
  REQUIRE(out.ok());
  CHECK(out->to_vector<float>() == std::vector<float>{11, 22, 33, 14, 25, 36});
}

TEST_CASE("placeholder feeds and a missing feed names the node") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1, 2}, "x");
  auto y = x * 2.0;
  auto sess = af::Session::create(g, af::SessionOptions{.executor = "sequential"}).value();
  auto out = sess.run({y}, {{x, af::Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2})}});
  REQUIRE(out.ok());
  CHECK((*out)[0].to_vector<float>() == std::vector<float>{2, 4, 6, 8});
  auto missing = sess.eval(y);
  CHECK_FALSE(missing.ok());
  CHECK(missing.status().message().find("'x'") != std::string::npos);
  auto wrong = sess.run({y}, {{x, af::Tensor::from_vector<float>({1, 2, 3}, {1, 3})}});
  CHECK_FALSE(wrong.ok());
  CHECK(wrong.status().message().find("[1,3]") != std::string::npos);
}
