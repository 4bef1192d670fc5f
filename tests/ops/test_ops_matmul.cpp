// MatMul: values for every transpose combination, batching with broadcasting, empty
// and degenerate shapes, integer and f64 dtypes, a random case against a naive loop, and
// shape errors at build and run time.
#include <random>

#include "actorflow/op_registry.h"

#include "test_util.h"

namespace af = actorflow;

namespace {

af::Tensor F(std::vector<float> v, af::Shape s) { return af::Tensor::from_vector(v, std::move(s)); }

af::Tensor random_tensor(af::Shape s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(static_cast<size_t>(s.num_elements()));
  for (auto& x : v) x = u(rng);
  return F(v, std::move(s));
}

// Reference: C = op(A) * op(B) for one matrix, A stored [m,k] (or [k,m] when ta).
std::vector<double> naive(const std::vector<float>& a, const std::vector<float>& b, int64_t m, int64_t n, int64_t k, bool ta,
                          bool tb) {
  std::vector<double> c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) {
        double x = ta ? a[static_cast<size_t>(p * m + i)] : a[static_cast<size_t>(i * k + p)];
        double y = tb ? b[static_cast<size_t>(j * k + p)] : b[static_cast<size_t>(p * n + j)];
        s += x * y;
      }
      c[static_cast<size_t>(i * n + j)] = s;
    }
  return c;
}

af::Tensor run_matmul(const af::Tensor& a, const af::Tensor& b, bool ta, bool tb) {
  af::Graph g;
  auto y = af::matmul(af::constant(g, a), af::constant(g, b), ta, tb);
  return aft::eval1(g, y);
}

}  // namespace

TEST_CASE("matmul: 2x3 by 3x2 with each transpose combination") {
  // A = [[1,2,3],[4,5,6]], B = [[7,8],[9,10],[11,12]]; A*B = [[58,64],[139,154]].
  const af::Tensor a = F({1, 2, 3, 4, 5, 6}, {2, 3});
  const af::Tensor at = F({1, 4, 2, 5, 3, 6}, {3, 2});
  const af::Tensor b = F({7, 8, 9, 10, 11, 12}, {3, 2});
  const af::Tensor bt = F({7, 9, 11, 8, 10, 12}, {2, 3});
  const std::vector<double> want = {58, 64, 139, 154};
  for (int flags = 0; flags < 4; ++flags) {
    const bool ta = flags & 1, tb = flags & 2;
    CAPTURE(ta);
    CAPTURE(tb);
    af::Graph g;
    auto y = af::matmul(af::constant(g, ta ? at : a, "a"), af::constant(g, tb ? bt : b, "b"), ta, tb);
    CHECK(y.shape() == af::Shape{2, 2});
    CHECK(y.dtype() == af::f32);
    af::Tensor out = aft::eval1(g, y);
    CHECK(out.shape() == af::Shape{2, 2});
    aft::check_close(out, want);
  }
}

TEST_CASE("matmul: f64, i32 and i64") {
  af::Graph g;
  auto a64 = af::constant(g, af::Tensor::from_vector<double>({1.5, 2, -1, 0.25}, {2, 2}));
  auto b64 = af::constant(g, af::Tensor::from_vector<double>({2, 0, 4, 8}, {2, 2}));
  auto ai = af::constant(g, af::Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {3, 2}));
  auto bi = af::constant(g, af::Tensor::from_vector<int32_t>({1, -1, 2, 0}, {2, 2}));
  auto al = af::constant(g, af::Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3}));
  auto bl = af::constant(g, af::Tensor::from_vector<int64_t>({1, 0, 1, 2, 1, 0}, {2, 3}));
  auto y64 = af::matmul(a64, b64);
  auto yi = af::matmul(ai, bi);
  auto yl = af::matmul(al, bl, false, true);
  CHECK(y64.dtype() == af::f64);
  auto out = aft::eval(g, {y64, yi, yl});
  // [[1.5*2+2*4, 2*8], [-2+1, 2]]
  CHECK(out[0].to_vector<double>() == std::vector<double>{11, 16, -1, 2});
  // rows [1,2],[3,4],[5,6] times [[1,-1],[2,0]]
  CHECK(out[1].to_vector<int32_t>() == std::vector<int32_t>{5, -1, 11, -3, 17, -5});
  // [[1+3, 2+2],[4+6, 8+5]]
  CHECK(out[2].to_vector<int64_t>() == std::vector<int64_t>{4, 4, 10, 13});
}

TEST_CASE("matmul: 64x64 random against a naive triple loop, each transpose combination") {
  const int64_t m = 64, n = 64, k = 64;
  const af::Tensor a = random_tensor({m, k}, 1), b = random_tensor({k, n}, 2);
  for (int flags = 0; flags < 4; ++flags) {
    const bool ta = flags & 1, tb = flags & 2;
    CAPTURE(flags);
    // The stored operands are the transposes when a flag is set (square, so same shape).
    auto out = run_matmul(a, b, ta, tb);
    aft::check_close(out, naive(a.to_vector<float>(), b.to_vector<float>(), m, n, k, ta, tb), 1e-4);
  }
}

TEST_CASE("matmul: large and odd sizes use the threaded contraction correctly") {
  const int64_t m = 257, n = 131, k = 300;
  const af::Tensor a = random_tensor({k, m}, 3), b = random_tensor({n, k}, 4);
  auto out = run_matmul(a, b, true, true);
  CHECK(out.shape() == af::Shape{m, n});
  aft::check_close(out, naive(a.to_vector<float>(), b.to_vector<float>(), m, n, k, true, true), 1e-4);
}

TEST_CASE("matmul: an MLP's banded products give the bits of one thread (the samples' figures rest on them)") {
  // 64x784x256 forward (plain and with bias + relu fused) and its weight gradient
  // x^T * dz (12.8M multiply-adds: banded by columns over 2 pool threads), and a batch of
  // 50 (10M). Products from 2^24 on are banded by rows, as they always were, and may
  // differ from one thread in the last bits.
  for (int64_t rows : {64, 50}) {
    CAPTURE(rows);
    const af::Tensor x = random_tensor({rows, 784}, 5), w = random_tensor({784, 256}, 6),
                     dz = random_tensor({rows, 256}, 7), bias = random_tensor({256}, 8);
    std::vector<af::Tensor> outs[2];
    for (int threads : {1, 2}) {
      af::Graph g;
      auto px = af::placeholder(g, af::f32, {-1, 784}, "x");
      auto pw = af::placeholder(g, af::f32, {784, 256}, "w");
      auto pdz = af::placeholder(g, af::f32, {-1, 256}, "dz");
      auto pb = af::placeholder(g, af::f32, {256}, "b");
      auto fwd = af::matmul(px, pw);
      auto fused = af::relu(af::bias_add(af::matmul(px, pw), pb));
      auto grad = af::matmul(px, pdz, true, false);
      af::SessionOptions o;
      o.intra_op_threads = threads;
      auto sess = af::Session::create(g, o).value();
      auto r = sess.run({fwd, fused, grad}, {{px, x}, {pw, w}, {pdz, dz}, {pb, bias}});
      REQUIRE(r.ok());
      outs[threads - 1] = *r;
    }
    for (size_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      CHECK(outs[0][i].equals(outs[1][i]));
    }
  }
}

TEST_CASE("matmul: batched with broadcasting") {
  SUBCASE("[2,2,3] x [3,2]: one b for every batch") {
    af::Graph g;
    auto a = af::constant(g, F({1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 1, 0}, {2, 2, 3}));
    auto b = af::constant(g, F({7, 8, 9, 10, 11, 12}, {3, 2}));
    auto y = af::matmul(a, b);
    CHECK(y.shape() == af::Shape{2, 2, 2});
    aft::check_close(aft::eval1(g, y), {58, 64, 139, 154, 7, 8, 9, 10});
  }
  SUBCASE("[2,2,2] x [2,2,2]: pairwise") {
    af::Graph g;
    auto a = af::constant(g, F({1, 2, 3, 4, 1, 0, 0, 1}, {2, 2, 2}));
    auto b = af::constant(g, F({1, 0, 0, 1, 5, 6, 7, 8}, {2, 2, 2}));
    aft::check_close(aft::eval1(g, af::matmul(a, b)), {1, 2, 3, 4, 5, 6, 7, 8});
  }
  SUBCASE("[2,3] x [2,3,2]: one a for every batch") {
    af::Graph g;
    auto a = af::constant(g, F({1, 2, 3, 4, 5, 6}, {2, 3}));
    auto b = af::constant(g, F({7, 8, 9, 10, 11, 12, 1, 0, 0, 1, 0, 0}, {2, 3, 2}));
    auto y = af::matmul(a, b);
    CHECK(y.shape() == af::Shape{2, 2, 2});
    aft::check_close(aft::eval1(g, y), {58, 64, 139, 154, 1, 2, 4, 5});
  }
  SUBCASE("[5,1,2,3] x [4,3,6] -> [5,4,2,6], against the reference per batch") {
    const af::Tensor a = random_tensor({5, 1, 2, 3}, 5), b = random_tensor({4, 3, 6}, 6);
    af::Graph g;
    auto y = af::matmul(af::constant(g, a), af::constant(g, b));
    CHECK(y.shape() == af::Shape{5, 4, 2, 6});
    af::Tensor out = aft::eval1(g, y);
    REQUIRE(out.shape() == af::Shape{5, 4, 2, 6});
    std::vector<double> want;
    auto va = a.to_vector<float>(), vb = b.to_vector<float>();
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 4; ++j) {
        std::vector<float> ai(va.begin() + i * 6, va.begin() + i * 6 + 6);
        std::vector<float> bj(vb.begin() + j * 18, vb.begin() + j * 18 + 18);
        auto c = naive(ai, bj, 2, 6, 3, false, false);
        want.insert(want.end(), c.begin(), c.end());
      }
    aft::check_close(out, want, 1e-5);
  }
  SUBCASE("transpose_a with an unbatched b, and large batches") {
    // [3,4,5]^T x [4,6] -> [3,5,6]; then [2,128,128] x [2,128,128] (threaded per batch).
    for (int64_t size : {4, 128}) {
      const int64_t batch = size == 4 ? 3 : 2;
      const af::Tensor a = random_tensor({batch, size, size + 1}, 7);
      const af::Tensor b = random_tensor(size == 4 ? af::Shape{4, 6} : af::Shape{2, 128, 128}, 8);
      af::Tensor out = run_matmul(a, b, true, false);
      const int64_t n = size == 4 ? 6 : 128;
      CHECK(out.shape() == af::Shape{batch, size + 1, n});
      std::vector<double> want;
      auto va = a.to_vector<float>(), vb = b.to_vector<float>();
      const int64_t asz = size * (size + 1), bsz = size * n;
      for (int64_t i = 0; i < batch; ++i) {
        std::vector<float> ai(va.begin() + i * asz, va.begin() + (i + 1) * asz);
        std::vector<float> bi = size == 4 ? vb : std::vector<float>(vb.begin() + i * bsz, vb.begin() + (i + 1) * bsz);
        auto c = naive(ai, bi, size + 1, n, size, true, false);
        want.insert(want.end(), c.begin(), c.end());
      }
      aft::check_close(out, want, 1e-4);
    }
  }
}

TEST_CASE("matmul: empty operands") {
  af::Graph g;
  auto a = af::constant(g, af::Tensor(af::f32, {0, 3}));
  auto b = af::constant(g, F({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4}));
  auto y = af::matmul(a, b);
  CHECK(y.shape() == af::Shape{0, 4});
  // An inner dim of 0 gives zeros, not garbage.
  auto c = af::constant(g, af::Tensor(af::f32, {2, 0}));
  auto d = af::constant(g, af::Tensor(af::f32, {0, 3}));
  auto z = af::matmul(c, d);
  auto out = aft::eval(g, {y, z});
  CHECK(out[0].shape() == af::Shape{0, 4});
  CHECK(out[0].num_elements() == 0);
  CHECK(out[1].shape() == af::Shape{2, 3});
  aft::check_close(out[1], {0, 0, 0, 0, 0, 0});
}

TEST_CASE("matmul: inner dimensions that differ fail at build time, naming both inputs") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {2, 3}, "x");
  auto w = af::constant(g, af::Tensor::zeros(af::f32, {4, 5}), "w");
  try {
    af::matmul(x, w, false, false, "matmul");
    FAIL("expected an error");
  } catch (const af::Error& e) {
    std::string msg = e.what();
    CHECK(msg.find("MatMul 'matmul': inner dimensions differ: 'x' (float32[2,3]) and 'w' (float32[4,5])") != std::string::npos);
  }
  // With transpose_b the inner dim of w is 5.
  CHECK_THROWS_AS(af::matmul(x, w, false, true), af::Error);
  CHECK_THROWS_AS(af::matmul(x, w, true, false), af::Error);
  // The graph is unchanged by failed adds: x and w only.
  CHECK(g.num_nodes() == 2);
}

TEST_CASE("matmul: other build-time errors") {
  af::Graph g;
  auto v = af::placeholder(g, af::f32, {3}, "v");
  auto m = af::placeholder(g, af::f32, {3, 3}, "m");
  auto d = af::placeholder(g, af::f64, {3, 3}, "d");
  auto s = af::placeholder(g, af::string, {3, 3}, "s");
  auto b1 = af::placeholder(g, af::f32, {2, 3, 3}, "b1");
  auto b2 = af::placeholder(g, af::f32, {4, 3, 3}, "b2");
  auto msg = [](auto&& f) {
    try {
      f();
    } catch (const af::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(msg([&] { af::matmul(v, m); }).find("'v' (float32[3]) must have rank >= 2") != std::string::npos);
  CHECK(msg([&] { af::matmul(m, d); }).find("different dtypes") != std::string::npos);
  CHECK(msg([&] { af::matmul(s, s); }).find("'s' (string[3,3])") != std::string::npos);
  std::string batch = msg([&] { af::matmul(b1, b2); });
  CHECK(batch.find("batch dimensions") != std::string::npos);
  CHECK(batch.find("'b1' (float32[2,3,3])") != std::string::npos);
  CHECK(batch.find("'b2' (float32[4,3,3])") != std::string::npos);
}

TEST_CASE("matmul: unknown dims propagate and are checked at run time") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1, 3}, "x");
  auto w = af::constant(g, F({1, 0, 0, 1, 0, 1, 0, 1, 0, 0, 1, 1}, {3, 4}), "w");
  auto y = af::matmul(x, w);
  CHECK(y.shape() == af::Shape{-1, 4});
  CHECK(y.shape().to_string() == "[?,4]");
  auto out = aft::eval1(g, y, {{x, F({1, 2, 3, 4, 5, 6}, {2, 3})}});
  CHECK(out.shape() == af::Shape{2, 4});
  aft::check_close(out, {1, 2, 3, 6, 4, 5, 6, 15});

  // Unknown rank on one side: the result's rank is unknown too.
  auto u = af::placeholder(g, af::f32, af::Shape::unknown_rank(), "u");
  CHECK_FALSE(af::matmul(u, w).shape().has_rank());
  // Unknown batch dim and unknown inner dims.
  auto p = af::placeholder(g, af::f32, {-1, 2, -1}, "p");
  auto q = af::placeholder(g, af::f32, {-1, 5}, "q");
  auto pq = af::matmul(p, q);
  CHECK(pq.shape() == af::Shape{-1, 2, 5});
  auto bad = aft::eval_status(g, pq, {{p, af::Tensor::zeros(af::f32, {1, 2, 3})}, {q, af::Tensor::zeros(af::f32, {4, 5})}});
  CHECK_FALSE(bad.ok());
  CHECK(bad.message().find("inner dimensions differ") != std::string::npos);
  CHECK(bad.message().find("[1,2,3]") != std::string::npos);
  CHECK(bad.message().find("[4,5]") != std::string::npos);
}

TEST_CASE("matmul: the op is marked expensive") {
  const af::OpDef* def = af::OpRegistry::global().find("MatMul");
  REQUIRE(def != nullptr);
  CHECK(def->expensive);
  CHECK(def->default_attrs.count("transpose_a") == 1);
  CHECK(def->default_attrs.count("transpose_b") == 1);
}
