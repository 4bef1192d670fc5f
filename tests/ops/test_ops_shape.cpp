// Shape manipulation: Reshape, Transpose, ExpandDims, Squeeze, Concat, Split, SplitV,
// Slice — values, every dtype family (numbers, bool, string), negative axes, scalars and
// empty tensors, unknown dims at graph time, and errors at build and run time.
#include <functional>
#include <limits>
#include <map>
#include <numeric>

#include "actorflow/kernel.h"
#include "actorflow/ops/cpu_device.h"
#include "test_util.h"

namespace af = actorflow;

namespace {

af::Tensor F(std::vector<float> v, af::Shape s) { return af::Tensor::from_vector(v, std::move(s)); }
af::Tensor S(std::vector<std::string> v, af::Shape s) { return af::Tensor::from_vector(v, std::move(s)); }
af::Tensor B(std::vector<bool> v, af::Shape s) { return af::Tensor::from_vector(v, std::move(s)); }
af::Tensor iota_f(af::Shape s) {
  std::vector<float> v(static_cast<size_t>(s.num_elements()));
  std::iota(v.begin(), v.end(), 0.0f);
  return F(v, std::move(s));
}

// The message of the af::Error `f` throws ("no error" if none).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const af::Error& e) {
    return e.what();
  }
  return "no error";
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Runs the node's CPU kernel directly, to observe buffer sharing.
af::Tensor run_direct(const af::Output& y, const af::Tensor& input) {
  auto k = af::KernelRegistry::global().create(y.node(), af::DeviceType::CPU);
  REQUIRE(k.ok());
  af::OpKernelContext ctx(y.node(), {input}, af::default_cpu_device(), nullptr, 1);
  (*k)->compute(ctx);
  REQUIRE(ctx.ok());
  return ctx.output(0);
}

// Element (i,j,k) of a [d0,d1,d2] tensor of floats.
float at3(const af::Tensor& t, int64_t i, int64_t j, int64_t k) {
  return t.data<float>()[(i * t.dim(1) + j) * t.dim(2) + k];
}

}  // namespace

// ---------------------------------------------------------------- Reshape

TEST_CASE("reshape: values keep their order; -1 is inferred") {
  af::Graph g;
  auto x = af::constant(g, iota_f({2, 3}), "x");
  auto a = af::reshape(x, {3, 2});
  auto b = af::reshape(x, {-1, 2});
  auto c = af::reshape(x, {-1});
  CHECK(b.shape() == af::Shape{3, 2});
  CHECK(c.shape() == af::Shape{6});
  auto out = aft::eval(g, {a, b, c});
  CHECK(out[0].shape() == af::Shape{3, 2});
  CHECK(out[1].shape() == af::Shape{3, 2});
  aft::check_close(out[1], {0, 1, 2, 3, 4, 5});
  aft::check_close(out[2], {0, 1, 2, 3, 4, 5});
}

TEST_CASE("reshape: scalars, empty tensors and strings") {
  af::Graph g;
  auto one = af::constant(g, F({7}, {1}));
  auto s = af::reshape(one, af::Shape{});
  auto s11 = af::reshape(s, {1, 1});
  auto empty = af::constant(g, af::Tensor(af::f32, {0, 3}));
  auto e = af::reshape(empty, {3, 0});
  auto e2 = af::reshape(empty, {-1, 3});
  CHECK(e2.shape() == af::Shape{0, 3});
  auto str = af::reshape(af::constant(g, S({"a", "b", "c", "d"}, {4})), {2, 2});
  auto out = aft::eval(g, {s, s11, e, e2, str});
  CHECK(out[0].shape() == af::Shape{});
  CHECK(out[0].item<float>() == 7);
  CHECK(out[1].shape() == af::Shape{1, 1});
  CHECK(out[2].shape() == af::Shape{3, 0});
  CHECK(out[3].shape() == af::Shape{0, 3});
  CHECK(out[4].shape() == af::Shape{2, 2});
  CHECK(out[4].to_vector<std::string>() == std::vector<std::string>{"a", "b", "c", "d"});
}

TEST_CASE("reshape: the kernel shares the input's buffer") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {2, 3}, "x");
  af::Tensor in = iota_f({2, 3});
  af::Tensor out = run_direct(af::reshape(x, {6}), in);
  CHECK(out.shape() == af::Shape{6});
  CHECK(out.shares_buffer_with(in));
}

TEST_CASE("reshape: bad shapes fail at build time") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {2, 3}, "x");
  std::string m = error_of([&] { af::reshape(x, {4}, "r"); });
  CHECK(contains(m, "Reshape 'r'"));
  CHECK(contains(m, "'x' (float32[2,3])"));
  CHECK(contains(m, "[4]"));
  CHECK(contains(error_of([&] { af::reshape(x, {-1, 4}); }), "not a multiple of 4"));
  CHECK(contains(error_of([&] { af::reshape(x, {-1, -1}); }), "at most one -1"));
  CHECK(contains(error_of([&] { af::reshape(x, {-2, 3}); }), "negative"));
  auto empty = af::placeholder(g, af::f32, {0, 3}, "empty");
  CHECK(contains(error_of([&] { af::reshape(empty, {0, -1}); }), "cannot be inferred"));
  // Known dims bound the element count even when others are unknown: 3*k can't be 4.
  auto p = af::placeholder(g, af::f32, {-1, 3}, "p");
  CHECK(contains(error_of([&] { af::reshape(p, {4}); }), "not a multiple of 3"));
}

TEST_CASE("reshape: unknown dims at graph time, checked at run time") {
  af::Graph g;
  auto p = af::placeholder(g, af::f32, {-1, 3}, "p");
  auto flat = af::reshape(p, {-1});
  auto rows = af::reshape(p, {-1, 6});
  auto fixed = af::reshape(p, {2, 3});
  CHECK(flat.shape() == af::Shape{-1});
  CHECK(rows.shape() == af::Shape{-1, 6});
  CHECK(fixed.shape() == af::Shape{2, 3});
  auto u = af::placeholder(g, af::f32, af::Shape::unknown_rank(), "u");
  CHECK(af::reshape(u, {2, -1}).shape() == af::Shape{2, -1});
  auto out = aft::eval(g, {flat, rows}, {{p, iota_f({4, 3})}});
  CHECK(out[0].shape() == af::Shape{12});
  CHECK(out[1].shape() == af::Shape{2, 6});
  auto bad = aft::eval_status(g, fixed, {{p, iota_f({4, 3})}});
  CHECK_FALSE(bad.ok());
  CHECK(contains(bad.message(), "[4,3]"));
  CHECK(contains(bad.message(), "[2,3]"));
  auto bad2 = aft::eval_status(g, rows, {{p, iota_f({1, 3})}});
  CHECK_FALSE(bad2.ok());
}

// ---------------------------------------------------------------- Transpose

TEST_CASE("transpose: rank 2, default perm and strings") {
  af::Graph g;
  auto x = af::constant(g, iota_f({2, 3}));
  auto t = af::transpose(x);
  CHECK(t.shape() == af::Shape{3, 2});
  auto s = af::transpose(af::constant(g, S({"a", "b", "c", "d", "e", "f"}, {2, 3})), {1, 0});
  auto bl = af::transpose(af::constant(g, B({true, false, false, false}, {2, 2})));
  auto out = aft::eval(g, {t, s, bl});
  aft::check_close(out[0], {0, 3, 1, 4, 2, 5});
  CHECK(out[1].to_vector<std::string>() == std::vector<std::string>{"a", "d", "b", "e", "c", "f"});
  CHECK(out[2].shape() == af::Shape{2, 2});
  CHECK(out[2].data<bool>()[0]);
  CHECK_FALSE(out[2].data<bool>()[1]);
}

TEST_CASE("transpose: every perm of a rank-3 tensor") {
  const af::Tensor x = iota_f({2, 3, 4});
  std::vector<int64_t> perm = {0, 1, 2};
  do {
    CAPTURE(af::Shape(perm).to_string());
    af::Graph g;
    auto t = af::transpose(af::constant(g, x), perm);
    af::Tensor out = aft::eval1(g, t);
    REQUIRE(out.shape() == af::Shape{x.dim(static_cast<int>(perm[0])), x.dim(static_cast<int>(perm[1])),
                                     x.dim(static_cast<int>(perm[2]))});
    bool all = true;
    for (int64_t i = 0; i < out.dim(0); ++i)
      for (int64_t j = 0; j < out.dim(1); ++j)
        for (int64_t k = 0; k < out.dim(2); ++k) {
          int64_t src[3];
          src[perm[0]] = i;
          src[perm[1]] = j;
          src[perm[2]] = k;
          all = all && at3(out, i, j, k) == at3(x, src[0], src[1], src[2]);
        }
    CHECK(all);
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST_CASE("transpose: large, size-1 dims, rank 4 and identity sharing") {
  af::Graph g;
  const af::Tensor big = iota_f({67, 130});
  auto t = af::transpose(af::constant(g, big));
  // [1,5,1,3] -> perm [3,2,1,0] = [3,1,5,1]: a 2-D transpose after dropping 1s.
  auto ones = af::transpose(af::constant(g, iota_f({1, 5, 1, 3})), {3, 2, 1, 0});
  // Rank 4 general path: [2,3,4,5] with perm [3,1,0,2] -> [5,3,2,4].
  const af::Tensor r4 = iota_f({2, 3, 4, 5});
  auto t4 = af::transpose(af::constant(g, r4), {3, 1, 0, 2});
  auto out = aft::eval(g, {t, ones, t4});
  REQUIRE(out[0].shape() == af::Shape{130, 67});
  bool ok = true;
  for (int64_t i = 0; i < 130; ++i)
    for (int64_t j = 0; j < 67; ++j) ok = ok && out[0].data<float>()[i * 67 + j] == static_cast<float>(j * 130 + i);
  CHECK(ok);
  CHECK(out[1].shape() == af::Shape{3, 1, 5, 1});
  aft::check_close(out[1], {0, 3, 6, 9, 12, 1, 4, 7, 10, 13, 2, 5, 8, 11, 14});
  REQUIRE(out[2].shape() == af::Shape{5, 3, 2, 4});
  ok = true;
  for (int64_t a = 0; a < 5; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 2; ++c)
        for (int64_t d = 0; d < 4; ++d)
          ok = ok && out[2].data<float>()[((a * 3 + b) * 2 + c) * 4 + d] == static_cast<float>(((c * 3 + b) * 4 + d) * 5 + a);
  CHECK(ok);

  // Moving only size-1 dims leaves the element order alone: no copy.
  auto x = af::placeholder(g, af::f32, {1, 4, 1}, "x");
  af::Tensor in = iota_f({1, 4, 1});
  af::Tensor shared = run_direct(af::transpose(x, {2, 1, 0}), in);
  CHECK(shared.shape() == af::Shape{1, 4, 1});
  CHECK(shared.shares_buffer_with(in));
}

TEST_CASE("transpose: unknown dims, bad perms, empty tensors and scalars") {
  af::Graph g;
  auto p = af::placeholder(g, af::f32, {-1, 3, 4}, "p");
  CHECK(af::transpose(p, {2, 0, 1}).shape() == af::Shape{4, -1, 3});
  auto u = af::placeholder(g, af::f32, af::Shape::unknown_rank(), "u");
  CHECK(af::transpose(u, {1, 0}).shape() == af::Shape{-1, -1});
  CHECK_FALSE(af::transpose(u).shape().has_rank());
  std::string m = error_of([&] { af::transpose(p, {0, 1}); });
  CHECK(contains(m, "'p' (float32[?,3,4])"));
  CHECK(contains(m, "rank 3"));
  CHECK(contains(error_of([&] { af::transpose(p, {0, 1, 1}); }), "not a permutation"));
  CHECK(contains(error_of([&] { af::transpose(p, {0, 1, 3}); }), "not a permutation"));
  CHECK(contains(error_of([&] { af::transpose(p, {-1, 0, 1}); }), "not a permutation"));
  auto e = af::transpose(af::constant(g, af::Tensor(af::f32, {0, 2, 3})), {2, 0, 1});
  auto s = af::transpose(af::constant(g, 5.0f));
  auto out = aft::eval(g, {e, s});
  CHECK(out[0].shape() == af::Shape{3, 0, 2});
  CHECK(out[1].shape() == af::Shape{});
  CHECK(out[1].item<float>() == 5);
}

// ---------------------------------------------------------------- ExpandDims / Squeeze

TEST_CASE("expand_dims: positions, negative axes, scalars, buffer sharing") {
  af::Graph g;
  auto x = af::constant(g, iota_f({2, 3}), "x");
  CHECK(af::expand_dims(x, 0).shape() == af::Shape{1, 2, 3});
  CHECK(af::expand_dims(x, 1).shape() == af::Shape{2, 1, 3});
  CHECK(af::expand_dims(x, 2).shape() == af::Shape{2, 3, 1});
  CHECK(af::expand_dims(x, -1).shape() == af::Shape{2, 3, 1});
  CHECK(af::expand_dims(x, -3).shape() == af::Shape{1, 2, 3});
  auto s = af::expand_dims(af::constant(g, 3.0f), -1);
  CHECK(s.shape() == af::Shape{1});
  auto y = af::expand_dims(x, -1);
  auto out = aft::eval(g, {y, s});
  CHECK(out[0].shape() == af::Shape{2, 3, 1});
  aft::check_close(out[0], {0, 1, 2, 3, 4, 5});
  aft::check_close(out[1], {3});
  CHECK(contains(error_of([&] { af::expand_dims(x, 3); }), "axis 3 is out of range"));
  CHECK(contains(error_of([&] { af::expand_dims(x, -4); }), "out of range"));
  auto p = af::placeholder(g, af::string, {-1, 2}, "p");
  CHECK(af::expand_dims(p, 1).shape() == af::Shape{-1, 1, 2});
  af::Tensor in = S({"a", "b"}, {1, 2});
  af::Tensor shared = run_direct(af::expand_dims(p, 1), in);
  CHECK(shared.shape() == af::Shape{1, 1, 2});
  CHECK(shared.shares_buffer_with(in));
}

TEST_CASE("squeeze: all size-1 dims, named axes, errors, unknown dims") {
  af::Graph g;
  auto x = af::constant(g, iota_f({1, 3, 1, 2}), "x");
  auto all = af::squeeze(x);
  auto some = af::squeeze(x, {-2});
  CHECK(all.shape() == af::Shape{3, 2});
  CHECK(some.shape() == af::Shape{1, 3, 2});
  auto one = af::squeeze(af::constant(g, F({4}, {1, 1})));
  CHECK(one.shape() == af::Shape{});
  auto out = aft::eval(g, {all, some, one});
  CHECK(out[0].shape() == af::Shape{3, 2});
  aft::check_close(out[0], {0, 1, 2, 3, 4, 5});
  CHECK(out[1].shape() == af::Shape{1, 3, 2});
  CHECK(out[2].item<float>() == 4);
  std::string m = error_of([&] { af::squeeze(x, {1}, "sq"); });
  CHECK(contains(m, "Squeeze 'sq'"));
  CHECK(contains(m, "'x' (float32[1,3,1,2])"));
  CHECK(contains(m, "not 1"));
  CHECK(contains(error_of([&] { af::squeeze(x, {4}); }), "out of range"));

  auto p = af::placeholder(g, af::f32, {-1, 1, 3}, "p");
  CHECK_FALSE(af::squeeze(p).shape().has_rank());
  auto named = af::squeeze(p, {0});
  CHECK(named.shape() == af::Shape{1, 3});
  af::Tensor in = iota_f({1, 1, 3});
  af::Tensor shared = run_direct(named, in);
  CHECK(shared.shares_buffer_with(in));
  auto bad = aft::eval_status(g, named, {{p, iota_f({2, 1, 3})}});
  CHECK_FALSE(bad.ok());
  CHECK(contains(bad.message(), "not 1"));
}

// ---------------------------------------------------------------- Concat

TEST_CASE("concat: axes 0, 1 and -1, strings and bools") {
  af::Graph g;
  auto a = af::constant(g, iota_f({2, 2}));
  auto b = af::constant(g, F({10, 11, 12, 13, 14, 15}, {2, 3}));
  auto c0 = af::concat({a, af::constant(g, F({20, 21}, {1, 2}))}, 0);
  auto c1 = af::concat({a, b}, 1);
  auto cm = af::concat({b, a, b}, -1);
  CHECK(c0.shape() == af::Shape{3, 2});
  CHECK(c1.shape() == af::Shape{2, 5});
  CHECK(cm.shape() == af::Shape{2, 8});
  auto s = af::concat({af::constant(g, S({"a", "b"}, {2})), af::constant(g, S({"c"}, {1}))}, 0);
  auto bl = af::concat({af::constant(g, B({true}, {1})), af::constant(g, B({false, true}, {2}))}, -1);
  auto single = af::concat({a}, 0);
  auto out = aft::eval(g, {c0, c1, cm, s, bl, single});
  aft::check_close(out[0], {0, 1, 2, 3, 20, 21});
  aft::check_close(out[1], {0, 1, 10, 11, 12, 2, 3, 13, 14, 15});
  aft::check_close(out[2], {10, 11, 12, 0, 1, 10, 11, 12, 13, 14, 15, 2, 3, 13, 14, 15});
  CHECK(out[3].to_vector<std::string>() == std::vector<std::string>{"a", "b", "c"});
  REQUIRE(out[4].num_elements() == 3);
  CHECK(out[4].data<bool>()[0]);
  CHECK_FALSE(out[4].data<bool>()[1]);
  CHECK(out[4].data<bool>()[2]);
  aft::check_close(out[5], {0, 1, 2, 3});
}

TEST_CASE("concat: empty pieces, unknown dims and errors naming the input") {
  af::Graph g;
  auto a = af::constant(g, iota_f({2, 2}), "a");
  auto e = af::constant(g, af::Tensor(af::f32, {2, 0}), "e");
  auto ce = af::concat({e, a, e}, 1);
  CHECK(ce.shape() == af::Shape{2, 2});
  aft::check_close(aft::eval1(g, ce), {0, 1, 2, 3});

  auto p = af::placeholder(g, af::f32, {-1, 2}, "p");
  auto q = af::placeholder(g, af::f32, {3, -1}, "q");
  CHECK(af::concat({p, q}, 0).shape() == af::Shape{-1, 2});
  CHECK(af::concat({p, q}, 1).shape() == af::Shape{3, -1});
  CHECK(af::concat({a, q}, 0).shape() == af::Shape{5, 2});
  auto u = af::placeholder(g, af::f32, af::Shape::unknown_rank(), "u");
  CHECK(af::concat({a, u}, 0).shape() == af::Shape{-1, 2});

  auto wrong_dim = af::constant(g, iota_f({3, 3}), "wrong_dim");
  std::string m = error_of([&] { af::concat({a, wrong_dim}, 0, "cat"); });
  CHECK(contains(m, "Concat 'cat'"));
  CHECK(contains(m, "'wrong_dim' (float32[3,3])"));
  auto wrong_type = af::constant(g, af::Tensor::zeros(af::f64, {2, 2}), "wrong_type");
  CHECK(contains(error_of([&] { af::concat({a, a, wrong_type}, 0); }), "input 2 'wrong_type' (float64[2,2])"));
  auto wrong_rank = af::constant(g, F({1, 2}, {2}), "wrong_rank");
  CHECK(contains(error_of([&] { af::concat({a, wrong_rank}, 0); }), "'wrong_rank' (float32[2]) has rank 1"));
  CHECK(contains(error_of([&] { af::concat({a, a}, 2); }), "out of range"));
  CHECK(contains(error_of([&] { af::concat({af::constant(g, 1.0f), af::constant(g, 2.0f)}, 0); }), "scalars"));

  auto bad = aft::eval_status(g, af::concat({p, q}, 0), {{p, iota_f({1, 2})}, {q, iota_f({3, 4})}});
  CHECK_FALSE(bad.ok());
  CHECK(contains(bad.message(), "[3,4]"));
}

// ---------------------------------------------------------------- Split / SplitV

TEST_CASE("split: into equal parts, and concat undoes it") {
  af::Graph g;
  const af::Tensor v = iota_f({4, 6});
  auto x = af::constant(g, v, "x");
  auto parts = af::split(x, 3, 1);
  REQUIRE(parts.size() == 3);
  for (auto& p : parts) CHECK(p.shape() == af::Shape{4, 2});
  auto rows = af::split(x, 2, -2);
  REQUIRE(rows.size() == 2);
  CHECK(rows[1].shape() == af::Shape{2, 6});
  auto back = af::concat(parts, -1);
  auto out = aft::eval(g, {parts[0], parts[2], rows[1], back});
  aft::check_close(out[0], {0, 1, 6, 7, 12, 13, 18, 19});
  aft::check_close(out[1], {4, 5, 10, 11, 16, 17, 22, 23});
  aft::check_close(out[2], {12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  CHECK(out[3].equals(v));

  // Strings, and a rank-3 round trip along the middle axis.
  auto s = af::split(af::constant(g, S({"a", "b", "c", "d"}, {2, 2})), 2, 1);
  const af::Tensor r3 = iota_f({2, 4, 3});
  auto r3parts = af::split(af::constant(g, r3), 4, 1);
  auto out2 = aft::eval(g, {s[0], s[1], af::concat(r3parts, 1)});
  CHECK(out2[0].to_vector<std::string>() == std::vector<std::string>{"a", "c"});
  CHECK(out2[1].to_vector<std::string>() == std::vector<std::string>{"b", "d"});
  CHECK(out2[2].equals(r3));
}

TEST_CASE("split: errors, unknown dims and empty tensors") {
  af::Graph g;
  auto x = af::constant(g, iota_f({4, 6}), "x");
  std::string m = error_of([&] { af::split(x, 4, 1, "sp"); });
  CHECK(contains(m, "Split 'sp'"));
  CHECK(contains(m, "'x' (float32[4,6])"));
  CHECK(contains(m, "not divisible"));
  CHECK(contains(error_of([&] { af::split(x, 0, 1); }), "num_split"));
  CHECK(contains(error_of([&] { af::split(x, 2, 2); }), "out of range"));
  CHECK(contains(error_of([&] { af::split(af::constant(g, 1.0f), 1, 0); }), "scalar"));

  auto p = af::placeholder(g, af::f32, {-1, 3}, "p");
  auto ps = af::split(p, 2, 0);
  REQUIRE(ps.size() == 2);
  CHECK(ps[0].shape() == af::Shape{-1, 3});
  auto u = af::placeholder(g, af::f32, af::Shape::unknown_rank(), "u");
  auto us = af::split(u, 3, 0);
  CHECK(us.size() == 3);
  CHECK_FALSE(us[2].shape().has_rank());
  auto out = aft::eval(g, {ps[0], ps[1]}, {{p, iota_f({4, 3})}});
  aft::check_close(out[1], {6, 7, 8, 9, 10, 11});
  auto bad = aft::eval_status(g, ps[0], {{p, iota_f({3, 3})}});
  CHECK_FALSE(bad.ok());
  CHECK(contains(bad.message(), "not divisible"));

  auto e = af::split(af::constant(g, af::Tensor(af::f32, {0, 4})), 2, 1);
  auto eo = aft::eval(g, {e[0], e[1]});
  CHECK(eo[0].shape() == af::Shape{0, 2});
  CHECK(eo[1].num_elements() == 0);
}

TEST_CASE("split_v: sizes with one -1, errors") {
  af::Graph g;
  auto x = af::constant(g, iota_f({2, 5}), "x");
  auto parts = af::split(x, std::vector<int64_t>{1, -1, 2}, -1);
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].shape() == af::Shape{2, 1});
  CHECK(parts[1].shape() == af::Shape{2, 2});
  CHECK(parts[2].shape() == af::Shape{2, 2});
  auto zero = af::split(x, std::vector<int64_t>{0, 5}, 1);
  auto out = aft::eval(g, {parts[0], parts[1], parts[2], zero[0], zero[1], af::concat(parts, 1)});
  aft::check_close(out[0], {0, 5});
  aft::check_close(out[1], {1, 2, 6, 7});
  aft::check_close(out[2], {3, 4, 8, 9});
  CHECK(out[3].shape() == af::Shape{2, 0});
  aft::check_close(out[4], {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  aft::check_close(out[5], {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});

  std::string m = error_of([&] { af::split(x, std::vector<int64_t>{2, 2}, 1, "sv"); });
  CHECK(contains(m, "SplitV 'sv'"));
  CHECK(contains(m, "'x' (float32[2,5])"));
  CHECK(contains(m, "do not add up"));
  CHECK(contains(error_of([&] { af::split(x, std::vector<int64_t>{-1, -1}, 1); }), "more than one -1"));
  CHECK(contains(error_of([&] { af::split(x, std::vector<int64_t>{4, -1, 2}, 1); }), "do not add up"));
  CHECK(contains(error_of([&] { af::split(x, std::vector<int64_t>{}, 1); }), "'sizes'"));

  auto p = af::placeholder(g, af::f32, {3, -1}, "p");
  auto ps = af::split(p, std::vector<int64_t>{2, -1}, 1);
  CHECK(ps[0].shape() == af::Shape{3, 2});
  CHECK(ps[1].shape() == af::Shape{3, -1});
  auto bad = aft::eval_status(g, ps[1], {{p, iota_f({3, 1})}});
  CHECK_FALSE(bad.ok());
  CHECK(contains(bad.message(), "do not add up"));
}

// ---------------------------------------------------------------- Slice

TEST_CASE("slice: boxes, size -1, rank 3, strings and scalars") {
  af::Graph g;
  auto x = af::constant(g, iota_f({3, 4}), "x");
  auto a = af::slice(x, {1, 1}, {2, 2});
  auto b = af::slice(x, {1, 2}, {-1, -1});
  auto c = af::slice(x, {0, 3}, {3, 1});
  CHECK(a.shape() == af::Shape{2, 2});
  CHECK(b.shape() == af::Shape{2, 2});
  const af::Tensor t3 = iota_f({2, 3, 4});
  auto d = af::slice(af::constant(g, t3), {1, 0, 1}, {1, -1, 2});
  CHECK(d.shape() == af::Shape{1, 3, 2});
  auto s = af::slice(af::constant(g, S({"a", "b", "c", "d", "e"}, {5})), {1}, {3});
  auto sc = af::slice(af::constant(g, 2.5f), {}, {});
  auto e = af::slice(x, {3, 0}, {-1, 4});
  CHECK(e.shape() == af::Shape{0, 4});
  auto out = aft::eval(g, {a, b, c, d, s, sc, e});
  aft::check_close(out[0], {5, 6, 9, 10});
  aft::check_close(out[1], {6, 7, 10, 11});
  aft::check_close(out[2], {3, 7, 11});
  aft::check_close(out[3], {13, 14, 17, 18, 21, 22});
  CHECK(out[4].to_vector<std::string>() == std::vector<std::string>{"b", "c", "d"});
  CHECK(out[5].item<float>() == 2.5f);
  CHECK(out[6].shape() == af::Shape{0, 4});
}

TEST_CASE("slice: out of bounds at build time, and at run time for unknown dims") {
  af::Graph g;
  auto x = af::constant(g, iota_f({3, 4}), "x");
  std::string m = error_of([&] { af::slice(x, {2, 0}, {2, 4}, "sl"); });
  CHECK(contains(m, "Slice 'sl'"));
  CHECK(contains(m, "out of bounds"));
  CHECK(contains(m, "'x' (float32[3,4])"));
  CHECK(contains(error_of([&] { af::slice(x, {4, 0}, {-1, -1}); }), "out of bounds"));
  CHECK(contains(error_of([&] { af::slice(x, {-1, 0}, {1, 1}); }), "bad slice"));
  CHECK(contains(error_of([&] { af::slice(x, {0, 0}, {1, -2}); }), "bad slice"));
  CHECK(contains(error_of([&] { af::slice(x, {0}, {1}); }), "rank 2"));
  CHECK(contains(error_of([&] { af::slice(x, {0, 0}, {1}); }), "different lengths"));

  auto p = af::placeholder(g, af::f32, {-1, 4}, "p");
  auto y = af::slice(p, {1, 1}, {-1, 2});
  CHECK(y.shape() == af::Shape{-1, 2});
  auto z = af::slice(p, {2, 0}, {1, 4});
  CHECK(z.shape() == af::Shape{1, 4});
  aft::check_close(aft::eval1(g, y, {{p, iota_f({3, 4})}}), {5, 6, 9, 10});
  auto bad = aft::eval_status(g, z, {{p, iota_f({2, 4})}});
  CHECK_FALSE(bad.ok());
  CHECK(bad.code() == af::Code::out_of_range);
  CHECK(contains(bad.message(), "[2,4]"));
}

// ---------------------------------------------------------------- hostile GraphDefs

TEST_CASE("shape functions reject bad attributes instead of crashing") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {2, 3}, "x");
  const int64_t big = std::numeric_limits<int64_t>::max(), small = std::numeric_limits<int64_t>::min();
  struct Case {
    const char* op;
    std::map<std::string, af::AttrValue> attrs;
  };
  const std::vector<Case> cases = {
      {"Reshape", {{"shape", "not a shape"}}},
      {"Reshape", {{"shape", af::Shape{2, -7}}}},
      {"Reshape", {{"shape", af::Shape{big, big}}}},
      {"Reshape", {}},
      {"Transpose", {{"perm", af::AttrValue::Ints{5, 0}}}},
      {"Transpose", {{"perm", af::AttrValue::Ints{0, 0}}}},
      {"ExpandDims", {{"axis", big}}},
      {"ExpandDims", {{"axis", small}}},
      {"Squeeze", {{"axes", af::AttrValue::Ints{small}}}},
      {"Concat", {{"axis", small}}},
      {"Split", {{"num_split", int64_t{1} << 40}, {"axis", int64_t{0}}}},
      {"Split", {{"num_split", int64_t{-1}}}},
      {"Split", {{"axis", int64_t{0}}}},
      {"SplitV", {{"sizes", af::AttrValue::Ints{-3, 5}}}},
      {"SplitV", {{"sizes", af::AttrValue::Ints{big, big}}}},
      {"Slice", {{"begin", af::AttrValue::Ints{big, 0}}, {"size", af::AttrValue::Ints{1, 1}}}},
      {"Slice", {{"begin", af::AttrValue::Ints{0, 0}}, {"size", af::AttrValue::Ints{big, 1}}}},
      {"Slice", {{"begin", af::AttrValue::Ints{0, 0}}}},
  };
  int i = 0;
  for (const Case& c : cases) {
    af::Node n;
    n.name = "bad" + std::to_string(i++);
    n.op = c.op;
    n.inputs = {x.endpoint()};
    n.attrs = c.attrs;
    CAPTURE(n.name);
    CAPTURE(c.op);
    auto r = g.add_node_raw(std::move(n));
    CHECK_FALSE(r.ok());
  }
  // Attributes of the wrong kind fall back to defaults where that is harmless.
  af::Node mm;
  mm.name = "mm";
  mm.op = "MatMul";
  mm.inputs = {x.endpoint(), x.endpoint()};
  mm.attrs = {{"transpose_a", "yes"}, {"transpose_b", true}};
  auto r = g.add_node_raw(std::move(mm));
  REQUIRE(r.ok());
  CHECK(r->output(0).shape() == af::Shape{2, 2});
}
