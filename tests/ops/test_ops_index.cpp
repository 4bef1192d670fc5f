// Gather, OneHot, Tile, Pad, Select and Shape: values, edge cases, shape inference and
// run-time errors.
#include <doctest/doctest.h>

#include "test_util.h"

#include <cmath>
#include <cstring>

namespace af = actorflow;

namespace {

af::Output f32(af::Graph& g, std::vector<float> v, af::Shape s, const std::string& name = "Const") {
  return af::constant(g, af::Tensor::from_vector<float>(v, std::move(s)), name);
}
af::Output i32(af::Graph& g, std::vector<int32_t> v, af::Shape s, const std::string& name = "Const") {
  return af::constant(g, af::Tensor::from_vector<int32_t>(v, std::move(s)), name);
}
af::Output i64(af::Graph& g, std::vector<int64_t> v, af::Shape s, const std::string& name = "Const") {
  return af::constant(g, af::Tensor::from_vector<int64_t>(v, std::move(s)), name);
}
af::Output boolean(af::Graph& g, std::vector<bool> v, af::Shape s) {
  return af::constant(g, af::Tensor::from_vector<bool>(v, std::move(s)));
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The message of the af::Error that building throws, or "" if it does not throw.
template <typename F>
std::string build_error(F&& f) {
  try {
    f();
  } catch (const af::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("gather along axis 0 copies whole rows") {
  af::Graph g;
  auto p = f32(g, {1, 2, 3, 4, 5, 6}, {3, 2});
  auto y = af::gather(p, i32(g, {2, 0, 2}, {3}));
  CHECK(y.shape() == af::Shape{3, 2});
  auto t = aft::eval1(g, y);
  CHECK(t.shape() == af::Shape{3, 2});
  CHECK(t.to_vector<float>() == std::vector<float>{5, 6, 1, 2, 5, 6});
}

TEST_CASE("gather along axis 1 and along a negative axis") {
  af::Graph g;
  auto p = f32(g, {1, 2, 3, 4, 5, 6}, {2, 3});
  auto idx = i64(g, {2, 0}, {2});
  auto y1 = af::gather(p, idx, 1);
  auto y2 = af::gather(p, idx, -1);
  CHECK(y1.shape() == af::Shape{2, 2});
  auto out = aft::eval(g, {y1, y2});
  CHECK(out[0].to_vector<float>() == std::vector<float>{3, 1, 6, 4});
  CHECK(out[1].to_vector<float>() == std::vector<float>{3, 1, 6, 4});
}

TEST_CASE("gather on a middle axis of a rank-3 tensor") {
  af::Graph g;
  // p[i][j][k] = 100 i + 10 j + k, shape [2,3,2]
  std::vector<float> v;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) v.push_back(static_cast<float>(100 * i + 10 * j + k));
  auto y = af::gather(f32(g, v, {2, 3, 2}), i32(g, {2, 1}, {2}), 1);
  CHECK(y.shape() == af::Shape{2, 2, 2});
  CHECK(aft::eval1(g, y).to_vector<float>() == std::vector<float>{20, 21, 10, 11, 120, 121, 110, 111});
}

TEST_CASE("gather with 2-D indices puts the indices' shape in place of the axis") {
  af::Graph g;
  auto vec = f32(g, {10, 20, 30, 40}, {4});
  auto mat = f32(g, {1, 2, 3, 4, 5, 6}, {3, 2});
  auto idx = i32(g, {3, 1, 0, 0}, {2, 2});
  auto a = af::gather(vec, idx);
  auto b = af::gather(mat, i32(g, {0, 2, 1, 1}, {2, 2}));
  auto c = af::gather(mat, i32(g, {1, 0, 0, 1}, {2, 2}), 1);
  CHECK(a.shape() == af::Shape{2, 2});
  CHECK(b.shape() == af::Shape{2, 2, 2});
  CHECK(c.shape() == af::Shape{3, 2, 2});
  auto out = aft::eval(g, {a, b, c});
  CHECK(out[0].to_vector<float>() == std::vector<float>{40, 20, 10, 10});
  CHECK(out[1].to_vector<float>() == std::vector<float>{1, 2, 5, 6, 3, 4, 3, 4});
  CHECK(out[2].to_vector<float>() == std::vector<float>{2, 1, 1, 2, 4, 3, 3, 4, 6, 5, 5, 6});
}

TEST_CASE("gather of empty indices, of strings, and of a large table") {
  af::Graph g;
  auto p = f32(g, {1, 2, 3, 4}, {2, 2});
  auto empty = af::gather(p, i64(g, {}, {0}));
  CHECK(empty.shape() == af::Shape{0, 2});
  auto words = af::constant(g, af::Tensor::from_vector<std::string>({"a", "bb", "ccc"}, {3}));
  auto picked = af::gather(words, i32(g, {2, 2, 0}, {3}));
  // Big enough that the copy is sharded over the pool.
  const int rows = 1000, cols = 64, n = 5000;
  std::vector<float> table(rows * cols);
  for (int i = 0; i < rows * cols; ++i) table[static_cast<size_t>(i)] = static_cast<float>(i);
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = (i * 7919) % rows;
  auto big = af::gather(f32(g, table, {rows, cols}), i32(g, ids, {n}));
  auto out = aft::eval(g, {empty, picked, big});
  CHECK(out[0].shape() == af::Shape{0, 2});
  CHECK(out[0].num_elements() == 0);
  CHECK(out[1].to_vector<std::string>() == std::vector<std::string>{"ccc", "ccc", "a"});
  REQUIRE(out[2].shape() == af::Shape{n, cols});
  const float* pb = out[2].data<float>();
  bool all_match = true;
  for (int i = 0; i < n && all_match; ++i)
    for (int j = 0; j < cols; ++j)
      all_match = all_match && pb[i * cols + j] == static_cast<float>(ids[static_cast<size_t>(i)] * cols + j);
  CHECK(all_match);
}

TEST_CASE("gather: an index out of range is a run-time error naming the index and the range") {
  af::Graph g;
  auto p = f32(g, {1, 2, 3, 4, 5, 6}, {3, 2});
  auto y = af::gather(p, i32(g, {0, 5}, {2}), 0, "g");
  auto s = aft::eval_status(g, y);
  REQUIRE_FALSE(s.ok());
  INFO(s.to_string());
  CHECK(contains(s.message(), "'g'"));
  CHECK(contains(s.message(), "indices[1] = 5"));
  CHECK(contains(s.message(), "[0, 3)"));

  auto neg = af::gather(p, i64(g, {0, 1, -1, 2}, {2, 2}), 0, "neg");
  auto s2 = aft::eval_status(g, neg);
  REQUIRE_FALSE(s2.ok());
  INFO(s2.to_string());
  CHECK(contains(s2.message(), "indices[1,0] = -1"));

  auto ax1 = af::gather(p, i32(g, {2}, {1}), 1, "ax1");
  auto s3 = aft::eval_status(g, ax1);
  REQUIRE_FALSE(s3.ok());
  CHECK(contains(s3.message(), "indices[0] = 2 is not in [0, 2)"));
}

TEST_CASE("gather: shape inference with unknown dims, and build-time errors") {
  af::Graph g;
  auto p = af::placeholder(g, af::f32, {-1, 4}, "params");
  auto idx = af::placeholder(g, af::i32, {-1}, "ids");
  CHECK(af::gather(p, idx).shape() == af::Shape{-1, 4});
  CHECK(af::gather(p, idx, 1).shape() == af::Shape{-1, -1});
  auto unknown = af::placeholder(g, af::f32, af::Shape::unknown_rank(), "u");
  CHECK_FALSE(af::gather(unknown, idx).shape().has_rank());
  auto y = af::gather(p, idx, 1);
  auto t = aft::eval1(g, y, {{p, af::Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4})},
                             {idx, af::Tensor::from_vector<int32_t>({3, 0, 1}, {3})}});
  CHECK(t.to_vector<float>() == std::vector<float>{4, 1, 2, 8, 5, 6});

  CHECK_THROWS_AS(af::gather(p, idx, 2), af::Error);
  std::string e = build_error([&] { af::gather(p, idx, -3, "bad_axis"); });
  CHECK(contains(e, "bad_axis"));
  CHECK(contains(e, "'params' (float32[?,4])"));
  auto fidx = af::placeholder(g, af::f32, {2}, "float_ids");
  e = build_error([&] { af::gather(p, fidx); });
  CHECK(contains(e, "'float_ids' (float32[2])"));
  auto scalar = af::constant(g, 1.0f, "scalar");
  CHECK(contains(build_error([&] { af::gather(scalar, idx); }), "'scalar'"));
}

TEST_CASE("one_hot: rows, custom values and dtype, out-of-range indices give an all-off row") {
  af::Graph g;
  auto a = af::one_hot(i32(g, {0, 2, -1, 3}, {4}), 3);
  CHECK(a.shape() == af::Shape{4, 3});
  CHECK(a.dtype() == af::f32);
  auto b = af::one_hot(i64(g, {1, 0, 5, 2}, {2, 2}), 3, 5, -1, af::i32);
  CHECK(b.shape() == af::Shape{2, 2, 3});
  CHECK(b.dtype() == af::i32);
  auto c = af::one_hot(af::constant(g, af::Tensor::scalar<int64_t>(1)), 2, 1, 0, af::boolean);
  CHECK(c.shape() == af::Shape{2});
  auto d = af::one_hot(i32(g, {}, {0}), 4);
  auto out = aft::eval(g, {a, b, c, d});
  CHECK(out[0].to_vector<float>() == std::vector<float>{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0});
  CHECK(out[1].to_vector<int32_t>() == std::vector<int32_t>{-1, 5, -1, 5, -1, -1, -1, -1, -1, -1, -1, 5});
  CHECK(out[2].to_vector<bool>() == std::vector<bool>{false, true});
  CHECK(out[3].shape() == af::Shape{0, 4});
}

TEST_CASE("one_hot: build-time errors") {
  af::Graph g;
  auto fl = af::placeholder(g, af::f32, {3}, "labels");
  CHECK(contains(build_error([&] { af::one_hot(fl, 3); }), "'labels' (float32[3])"));
  auto ids = af::placeholder(g, af::i32, {-1}, "ids");
  CHECK(af::one_hot(ids, 10).shape() == af::Shape{-1, 10});
  CHECK(contains(build_error([&] { af::one_hot(ids, -1, 1, 0, af::f32, "neg_depth"); }), "neg_depth"));
  CHECK_THROWS_AS(af::one_hot(ids, 3, 300, 0, af::u8), af::Error);
  CHECK_THROWS_AS(af::one_hot(ids, 3, 1, 0, af::string), af::Error);
}

TEST_CASE("tile repeats along each axis") {
  af::Graph g;
  auto x = f32(g, {1, 2, 3, 4}, {2, 2});
  auto a = af::tile(x, {1, 2});
  auto b = af::tile(x, {2, 1});
  auto c = af::tile(x, {2, 3});
  auto d = af::tile(i32(g, {7, 8, 9}, {3}), {2});
  auto e = af::tile(x, {0, 2});
  auto s = af::tile(af::constant(g, 3.5f), {});
  auto r3 = af::tile(f32(g, {1, 2}, {1, 2, 1}), {2, 1, 2});
  CHECK(c.shape() == af::Shape{4, 6});
  CHECK(e.shape() == af::Shape{0, 4});
  auto out = aft::eval(g, {a, b, c, d, e, s, r3});
  CHECK(out[0].to_vector<float>() == std::vector<float>{1, 2, 1, 2, 3, 4, 3, 4});
  CHECK(out[1].to_vector<float>() == std::vector<float>{1, 2, 3, 4, 1, 2, 3, 4});
  CHECK(out[2].to_vector<float>() ==
        std::vector<float>{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4});
  CHECK(out[3].to_vector<int32_t>() == std::vector<int32_t>{7, 8, 9, 7, 8, 9});
  CHECK(out[4].shape() == af::Shape{0, 4});
  CHECK(out[5].shape() == af::Shape{});
  CHECK(out[5].item<float>() == 3.5f);
  CHECK(out[6].shape() == af::Shape{2, 2, 2});
  CHECK(out[6].to_vector<float>() == std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2});
}

TEST_CASE("tile: unknown dims and build-time errors") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1, 3}, "x");
  CHECK(af::tile(x, {2, 2}).shape() == af::Shape{-1, 6});
  CHECK(af::tile(x, {0, 1}).shape() == af::Shape{0, 3});
  auto u = af::placeholder(g, af::f32, af::Shape::unknown_rank(), "u");
  CHECK(af::tile(u, {2, 1, 3}).shape() == af::Shape{-1, -1, -1});
  std::string e = build_error([&] { af::tile(x, {2}, "short"); });
  CHECK(contains(e, "short"));
  CHECK(contains(e, "'x' (float32[?,3])"));
  CHECK_THROWS_AS(af::tile(x, {1, -2}), af::Error);
  // Element counts that would overflow int64 are refused, not wrapped.
  auto one = f32(g, {1}, {1, 1});
  CHECK(contains(build_error([&] { af::tile(one, {int64_t{1} << 40, int64_t{1} << 40}, "huge"); }), "huge"));
  CHECK_THROWS_AS(af::one_hot(i32(g, {0, 1, 2, 3}, {4}), int64_t{1} << 47), af::Error);
  CHECK_THROWS_AS(af::pad(one, {{int64_t{1} << 40, 0}, {int64_t{1} << 40, 0}}), af::Error);
  // Rank is only known at run time here: the kernel checks it.
  auto t = af::tile(u, {2, 2}, "late");
  auto s = aft::eval_status(g, t, {{u, af::Tensor::from_vector<float>({1, 2, 3}, {3})}});
  REQUIRE_FALSE(s.ok());
  CHECK(contains(s.message(), "late"));
}

TEST_CASE("pad a rank-2 tensor with a constant") {
  af::Graph g;
  auto x = f32(g, {1, 2, 3, 4}, {2, 2});
  auto a = af::pad(x, {{1, 0}, {0, 2}}, 9);
  auto b = af::pad(x, {{0, 0}, {1, 1}});
  auto c = af::pad(i32(g, {5, 6}, {2}), {{2, 1}}, -1);
  auto d = af::pad(f32(g, {}, {0, 2}), {{1, 1}, {0, 0}}, 7);
  auto s = af::pad(af::constant(g, 2.0f), {});
  CHECK(a.shape() == af::Shape{3, 4});
  auto out = aft::eval(g, {a, b, c, d, s});
  CHECK(out[0].to_vector<float>() == std::vector<float>{9, 9, 9, 9, 1, 2, 9, 9, 3, 4, 9, 9});
  CHECK(out[1].to_vector<float>() == std::vector<float>{0, 1, 2, 0, 0, 3, 4, 0});
  CHECK(out[2].to_vector<int32_t>() == std::vector<int32_t>{-1, -1, 5, 6, -1});
  CHECK(out[3].shape() == af::Shape{2, 2});
  CHECK(out[3].to_vector<float>() == std::vector<float>{7, 7, 7, 7});
  CHECK(out[4].item<float>() == 2.0f);
}

TEST_CASE("pad of a rank-3 tensor, unknown dims and build-time errors") {
  af::Graph g;
  auto x = f32(g, {1, 2, 3, 4}, {2, 1, 2});
  auto y = af::pad(x, {{0, 1}, {1, 0}, {0, 1}});
  CHECK(y.shape() == af::Shape{3, 2, 3});
  CHECK(aft::eval1(g, y).to_vector<float>() ==
        std::vector<float>{0, 0, 0, 1, 2, 0, 0, 0, 0, 3, 4, 0, 0, 0, 0, 0, 0, 0});
  auto p = af::placeholder(g, af::f32, {-1, 3}, "p");
  CHECK(af::pad(p, {{1, 1}, {2, 2}}).shape() == af::Shape{-1, 7});
  std::string e = build_error([&] { af::pad(p, {{1, 1}}, 0, "few"); });
  CHECK(contains(e, "few"));
  CHECK(contains(e, "'p' (float32[?,3])"));
  CHECK_THROWS_AS(af::pad(p, {{-1, 0}, {0, 0}}), af::Error);
  CHECK_THROWS_AS(af::pad(i32(g, {1}, {1}), {{1, 1}}, 1e12), af::Error);
}

TEST_CASE("select with broadcasting of condition and branches") {
  af::Graph g;
  auto a = f32(g, {1, 2, 3, 4, 5, 6}, {2, 3});
  auto b = f32(g, {-1, -2, -3, -4, -5, -6}, {2, 3});
  auto same = af::where(boolean(g, {true, false, true, false, false, true}, {2, 3}), a, b);
  auto scalar_t = af::where(af::constant(g, af::Tensor::scalar<bool>(true)), a, b);
  auto scalar_f = af::where(af::constant(g, af::Tensor::scalar<bool>(false)), a, b);
  auto row = af::where(boolean(g, {true, false, true}, {3}), a, b);
  auto col = af::where(boolean(g, {false, true}, {2, 1}), a, f32(g, {0}, {}));
  auto grid = af::where(boolean(g, {true, false}, {2, 1}), f32(g, {1, 2, 3}, {3}), f32(g, {10, 20}, {2, 1}));
  CHECK(row.shape() == af::Shape{2, 3});
  CHECK(grid.shape() == af::Shape{2, 3});
  auto out = aft::eval(g, {same, scalar_t, scalar_f, row, col, grid});
  CHECK(out[0].to_vector<float>() == std::vector<float>{1, -2, 3, -4, -5, 6});
  CHECK(out[1].to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(out[2].to_vector<float>() == std::vector<float>{-1, -2, -3, -4, -5, -6});
  CHECK(out[3].to_vector<float>() == std::vector<float>{1, -2, 3, 4, -5, 6});
  CHECK(out[4].to_vector<float>() == std::vector<float>{0, 0, 0, 4, 5, 6});
  CHECK(out[5].to_vector<float>() == std::vector<float>{1, 2, 3, 20, 20, 20});
}

TEST_CASE("select with one scalar branch (ReluGrad's where(x > 0, g, 0)) over rows longer than a vector") {
  af::Graph g;
  const int64_t rows = 3, cols = 37;  // odd lengths: the loops' remainders too
  std::vector<float> av, bv;
  std::vector<bool> cv;
  for (int64_t i = 0; i < rows * cols; ++i) {
    av.push_back(static_cast<float>(i));
    bv.push_back(static_cast<float>(-i));
    cv.push_back(i % 3 != 0);
  }
  af::Tensor ct(af::boolean, {rows, cols});
  for (size_t i = 0; i < cv.size(); ++i) ct.data<bool>()[i] = cv[i];
  auto c = af::constant(g, ct);
  auto a = f32(g, av, {rows, cols});
  auto b = f32(g, bv, {rows, cols});
  auto zero_else = af::where(c, a, f32(g, {7}, {}));
  auto zero_then = af::where(c, f32(g, {7}, {}), b);
  auto out = aft::eval(g, {zero_else, zero_then});
  std::vector<float> want_else, want_then;
  for (size_t i = 0; i < cv.size(); ++i) {
    want_else.push_back(cv[i] ? av[i] : 7.0f);
    want_then.push_back(cv[i] ? 7.0f : bv[i]);
  }
  CHECK(out[0].to_vector<float>() == want_else);
  CHECK(out[1].to_vector<float>() == want_then);
}

TEST_CASE("select blends rows without a branch: the branches' bits, NaN and -0 kept, every element size") {
  af::Graph g;
  const int64_t n = 75;  // odd: the vector loops' remainders too
  af::Tensor ct(af::boolean, {n});
  std::vector<float> av, bv;
  std::vector<double> ad, bd;
  std::vector<uint8_t> ai, bi;
  for (int64_t i = 0; i < n; ++i) {
    ct.data<bool>()[i] = (i * 7) % 5 < 2;
    av.push_back(i % 4 == 0 ? -0.0f : (i % 4 == 1 ? std::nanf("") : static_cast<float>(i)));
    bv.push_back(-static_cast<float>(i) - 0.5f);
    ad.push_back(static_cast<double>(i) * 1e300);
    bd.push_back(i % 2 ? -0.0 : -static_cast<double>(i));
    ai.push_back(static_cast<uint8_t>(i));
    bi.push_back(static_cast<uint8_t>(200 - i));
  }
  auto c = af::constant(g, ct);
  af::Tensor adt(af::f64, {n}), bdt(af::f64, {n}), ait(af::u8, {n}), bit(af::u8, {n});
  for (int64_t i = 0; i < n; ++i) {
    adt.data<double>()[i] = ad[static_cast<size_t>(i)];
    bdt.data<double>()[i] = bd[static_cast<size_t>(i)];
    ait.data<uint8_t>()[i] = ai[static_cast<size_t>(i)];
    bit.data<uint8_t>()[i] = bi[static_cast<size_t>(i)];
  }
  auto out = aft::eval(g, {af::where(c, f32(g, av, {n}), f32(g, bv, {n})),
                           af::where(c, af::constant(g, adt), af::constant(g, bdt)),
                           af::where(c, af::constant(g, ait), af::constant(g, bit))});
  for (int64_t i = 0; i < n; ++i) {
    const bool take = ct.data<bool>()[i];
    const auto u = static_cast<size_t>(i);
    float want = take ? av[u] : bv[u];
    CHECK(std::memcmp(&out[0].data<float>()[i], &want, sizeof want) == 0);
    double wd = take ? ad[u] : bd[u];
    CHECK(std::memcmp(&out[1].data<double>()[i], &wd, sizeof wd) == 0);
    CHECK(out[2].data<uint8_t>()[i] == (take ? ai[u] : bi[u]));
  }
}

TEST_CASE("select of strings and of empty tensors, and errors") {
  af::Graph g;
  auto w = af::constant(g, af::Tensor::from_vector<std::string>({"x", "y"}, {2}));
  auto v = af::constant(g, af::Tensor::from_vector<std::string>({"p", "q"}, {2}));
  auto s = af::where(boolean(g, {false, true}, {2}), w, v);
  auto e = af::where(boolean(g, {}, {0}), f32(g, {}, {0}), f32(g, {1}, {1}));
  auto out = aft::eval(g, {s, e});
  CHECK(out[0].to_vector<std::string>() == std::vector<std::string>{"p", "y"});
  CHECK(out[1].shape() == af::Shape{0});

  auto a = f32(g, {1, 2, 3}, {3}, "a");
  auto ints = i32(g, {1, 2, 3}, {3}, "ints");
  auto fcond = f32(g, {1, 0, 1}, {3}, "fcond");
  auto cond = boolean(g, {true, false, true}, {3});
  CHECK(contains(build_error([&] { af::where(fcond, a, a); }), "'fcond' (float32[3])"));
  CHECK(contains(build_error([&] { af::where(cond, a, ints); }), "'ints' (int32[3])"));
  std::string msg = build_error([&] { af::where(cond, a, f32(g, {1, 2}, {2}, "two"), "bad_sel"); });
  CHECK(contains(msg, "bad_sel"));
  CHECK(contains(msg, "'two' (float32[2])"));

  auto pc = af::placeholder(g, af::boolean, {-1}, "pc");
  auto sel = af::where(pc, a, a, "late_sel");
  CHECK(sel.shape() == af::Shape{3});
  auto st = aft::eval_status(g, sel, {{pc, af::Tensor::from_vector<bool>({true, false}, {2})}});
  REQUIRE_FALSE(st.ok());
  CHECK(contains(st.message(), "late_sel"));
}

TEST_CASE("shape_of gives the runtime shape as an i64 vector") {
  af::Graph g;
  auto a = af::shape_of(f32(g, {1, 2, 3, 4, 5, 6}, {2, 3}));
  auto s = af::shape_of(af::constant(g, 1.0f));
  auto p = af::placeholder(g, af::f32, {-1, 3}, "p");
  auto ps = af::shape_of(p);
  auto u = af::shape_of(af::placeholder(g, af::f32, af::Shape::unknown_rank(), "u"));
  auto strs = af::shape_of(af::constant(g, af::Tensor::from_vector<std::string>({"a"}, {1, 1})));
  CHECK(a.dtype() == af::i64);
  CHECK(a.shape() == af::Shape{2});
  CHECK(s.shape() == af::Shape{0});
  CHECK(ps.shape() == af::Shape{2});
  CHECK(u.shape() == af::Shape{-1});
  auto out = aft::eval(g, {a, s, ps, strs}, {{p, af::Tensor::from_vector<float>(std::vector<float>(12, 0.f), {4, 3})}});
  CHECK(out[0].to_vector<int64_t>() == std::vector<int64_t>{2, 3});
  CHECK(out[1].shape() == af::Shape{0});
  CHECK(out[2].to_vector<int64_t>() == std::vector<int64_t>{4, 3});
  CHECK(out[3].to_vector<int64_t>() == std::vector<int64_t>{1, 1});
}
