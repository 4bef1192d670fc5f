#include <doctest/doctest.h>

#include <actorflow/actorflow.h>

#include <cstdint>
#include <vector>

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

TEST_CASE("elementwise ops over large inputs: shards split rows, broadcast or not, and every element is right") {
  // Same-shaped inputs collapse to one row; the pool splits it (and broadcast rows) by
  // elements, so shard boundaries fall inside rows.
  af::Graph g;
  const int64_t rows = 601, cols = 997, flat = 300001;
  auto iota = [](int64_t n, float scale, float shift) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i % 1013) * scale + shift;
    return v;
  };
  auto fa = iota(flat, 1, 0), fb = iota(flat, 2, 1);
  auto ma = iota(rows * cols, 1, -500), row = iota(cols, 3, 0), col = iota(rows, 1, 1);
  std::vector<uint8_t> cond(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < cond.size(); ++i) cond[i] = (i * 7919) % 3 == 0;
  auto same = af::constant(g, fa, af::Shape{flat}) + af::constant(g, fb, af::Shape{flat});
  auto by_row = af::constant(g, ma, af::Shape{rows, cols}) - af::constant(g, row, af::Shape{cols});
  auto outer = af::constant(g, col, af::Shape{rows, 1}) * af::constant(g, row, af::Shape{1, cols});
  af::Tensor c(af::DType::boolean, af::Shape{rows, cols});
  for (size_t i = 0; i < cond.size(); ++i) c.data<bool>()[i] = cond[i] != 0;
  auto picked = af::where(af::constant(g, c), af::constant(g, row, af::Shape{cols}), af::constant(g, -1.0f));
  auto sess = af::Session::create(g).value();
  auto out = sess.run({same, by_row, outer, picked});
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  const float* ps = (*out)[0].data<float>();
  const float* pr = (*out)[1].data<float>();
  const float* po = (*out)[2].data<float>();
  const float* pp = (*out)[3].data<float>();
  int64_t wrong = 0;
  for (int64_t i = 0; i < flat; ++i) wrong += ps[i] != fa[static_cast<size_t>(i)] + fb[static_cast<size_t>(i)];
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k) {
      size_t i = static_cast<size_t>(r * cols + k), kk = static_cast<size_t>(k);
      wrong += pr[i] != ma[i] - row[kk];
      wrong += po[i] != col[static_cast<size_t>(r)] * row[kk];
      wrong += pp[i] != (cond[i] ? row[kk] : -1.0f);
    }
  CHECK(wrong == 0);
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
