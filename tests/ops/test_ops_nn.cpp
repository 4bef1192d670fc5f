// NN ops: Conv2D (+ backprops), MaxPool / AvgPool (+ grads), FusedBatchNorm, Dropout,
// flatten and embedding_lookup: values against hand-computed and naive-loop references,
// shape inference and its errors, runtime errors, empty tensors. Gradient checks are in
// test_ops_nn_grads.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "gradient_check.h"
#include "nn_reference.h"
#include "test_util.h"

namespace af = actorflow;
using aft::nnref::naive_conv;
using aft::nnref::naive_conv_backprop;
using aft::nnref::naive_max_pool_grad;
using aft::nnref::naive_pool;

namespace {

std::vector<double> values_of(const af::Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.num_elements()));
  for (int64_t i = 0; i < t.num_elements(); ++i) v[static_cast<size_t>(i)] = t.element_as_double(i);
  return v;
}

af::Tensor to_f32(const af::Tensor& t) {
  af::Tensor r(af::f32, t.shape());
  for (int64_t i = 0; i < t.num_elements(); ++i) r.data<float>()[i] = static_cast<float>(t.data<double>()[i]);
  return r;
}

af::Tensor iota(af::Shape s, double start = 1) {
  af::Tensor t(af::f64, s);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<double>()[i] = start + static_cast<double>(i);
  return t;
}

// Pooling geometries for the value and gradient tests: SAME windows clipped at the edges,
// overlapping (stride below the window) and strided past it, several channels.
struct PoolCase {
  af::Shape x;
  int k0, k1, s0, s1;
  const char* pad;
};
const PoolCase kPoolCases[] = {{{2, 5, 5, 3}, 2, 2, 2, 2, "SAME"},  {{2, 5, 5, 3}, 3, 3, 2, 2, "VALID"},
                               {{3, 7, 6, 9}, 3, 2, 1, 2, "SAME"},  {{1, 6, 6, 4}, 1, 1, 3, 3, "SAME"},
                               {{2, 8, 8, 17}, 3, 3, 1, 1, "SAME"}, {{1, 4, 9, 5}, 4, 4, 3, 2, "VALID"},
                               // Windows that tile the input (the kernels' tiled paths).
                               {{2, 6, 8, 17}, 2, 2, 2, 2, "VALID"}, {{1, 6, 9, 3}, 3, 3, 3, 3, "SAME"},
                               {{3, 4, 4, 64}, 2, 2, 2, 2, "SAME"}};

}  // namespace

TEST_CASE("conv2d: hand-computed values, VALID / SAME / stride 2") {
  af::Graph g;
  auto x = af::constant(g, iota({1, 3, 3, 1}));
  // A 2x2 filter summing the diagonal: x[i,j] + x[i+1,j+1].
  auto w = af::constant(g, af::Tensor::from_vector<double>({1, 0, 0, 1}, {2, 2, 1, 1}));
  auto valid = af::conv2d(x, w, {1, 1}, "VALID");
  auto same = af::conv2d(x, w, {1, 1}, "SAME");
  auto same2 = af::conv2d(x, w, {2, 2}, "SAME");
  auto tf_strides = af::conv2d(x, w, {1, 2, 2, 1}, "SAME");
  CHECK(valid.shape() == af::Shape{1, 2, 2, 1});
  CHECK(same.shape() == af::Shape{1, 3, 3, 1});
  CHECK(same2.shape() == af::Shape{1, 2, 2, 1});
  auto out = aft::eval(g, {valid, same, same2, tf_strides});
  aft::check_close(out[0], {6, 8, 12, 14});
  // SAME with an even filter pads after (bottom/right) only.
  aft::check_close(out[1], {6, 8, 3, 12, 14, 6, 7, 8, 9});
  aft::check_close(out[2], {6, 3, 7, 9});
  aft::check_close(out[3], {6, 3, 7, 9});
}

TEST_CASE("conv2d matches a naive loop (f64 and f32, paddings, strides, 1x1, threads)") {
  struct Case {
    af::Shape x, w;
    int sh, sw;
    const char* pad;
  };
  const Case cases[] = {
      {{2, 5, 5, 2}, {3, 3, 2, 3}, 1, 1, "SAME"},  {{2, 5, 5, 2}, {3, 3, 2, 3}, 2, 2, "SAME"},
      {{2, 5, 5, 2}, {3, 3, 2, 3}, 1, 1, "VALID"}, {{2, 5, 5, 2}, {3, 3, 2, 3}, 2, 2, "VALID"},
      {{3, 7, 6, 3}, {2, 4, 3, 5}, 2, 3, "SAME"},  {{3, 7, 6, 3}, {2, 4, 3, 5}, 3, 1, "VALID"},
      {{2, 4, 4, 5}, {1, 1, 5, 4}, 1, 1, "SAME"},  {{2, 4, 4, 5}, {1, 1, 5, 4}, 2, 2, "VALID"},
      {{9, 12, 11, 16}, {5, 5, 16, 8}, 1, 1, "SAME"},  // several chunks per thread
  };
  for (const auto& cs : cases) {
    CAPTURE(cs.x.to_string());
    CAPTURE(cs.w.to_string());
    CAPTURE(cs.pad);
    CAPTURE(cs.sh);
    auto xv = aft::random_f64(cs.x, -1, 1, 3);
    auto wv = aft::random_f64(cs.w, -1, 1, 4);
    const bool same = std::string(cs.pad) == "SAME";
    auto ref = naive_conv(xv, wv, cs.sh, cs.sw, same);
    for (int threads : {1, 4}) {
      af::Graph g;
      auto x = af::placeholder(g, af::f64, cs.x, "x");
      auto w = af::placeholder(g, af::f64, cs.w, "w");
      auto y = af::conv2d(x, w, {cs.sh, cs.sw}, cs.pad);
      CHECK(y.shape() == ref.shape());
      af::SessionOptions opts;
      opts.intra_op_threads = threads;
      auto out = aft::eval(g, {y}, {{x, xv}, {w, wv}}, opts);
      aft::check_close(out[0], values_of(ref), 1e-12);

      af::Graph g32;
      auto x32 = af::placeholder(g32, af::f32, cs.x, "x");
      auto w32 = af::placeholder(g32, af::f32, cs.w, "w");
      auto y32 = af::conv2d(x32, w32, {cs.sh, cs.sw}, cs.pad);
      auto out32 = aft::eval(g32, {y32}, {{x32, to_f32(xv)}, {w32, to_f32(wv)}}, opts);
      CHECK(out32[0].dtype() == af::f32);
      aft::check_close(out32[0], values_of(ref), 1e-4);
    }
  }
}

TEST_CASE("conv2d backprop ops match naive loops") {
  struct Case {
    af::Shape x, w;
    int s;
    const char* pad;
  };
  const Case cases[] = {{{2, 5, 5, 2}, {3, 3, 2, 3}, 1, "SAME"}, {{2, 5, 5, 2}, {3, 3, 2, 3}, 2, "VALID"},
                        {{3, 6, 7, 3}, {2, 2, 3, 4}, 2, "SAME"}, {{2, 4, 4, 3}, {1, 1, 3, 2}, 1, "VALID"},
                        {{8, 10, 9, 6}, {3, 5, 6, 7}, 1, "SAME"}};
  for (const auto& cs : cases) {
    CAPTURE(cs.x.to_string());
    CAPTURE(cs.pad);
    const bool same = std::string(cs.pad) == "SAME";
    auto xv = aft::random_f64(cs.x, -1, 1, 5);
    auto wv = aft::random_f64(cs.w, -1, 1, 6);
    auto yshape = naive_conv(xv, wv, cs.s, cs.s, same).shape();
    auto dyv = aft::random_f64(yshape, -1, 1, 7);
    af::Tensor dx_ref, dw_ref;
    naive_conv_backprop(xv, wv, dyv, cs.s, cs.s, same, &dx_ref, &dw_ref);
    for (int threads : {1, 3}) {
      af::Graph g;
      auto x = af::placeholder(g, af::f64, cs.x, "x");
      auto w = af::placeholder(g, af::f64, cs.w, "w");
      auto y = af::conv2d(x, w, {cs.s, cs.s}, cs.pad, "y");
      auto dy = af::placeholder(g, af::f64, yshape, "dy");
      auto d = af::gradients({y}, {x, w}, {dy});
      CHECK(d[0].node().op == "Conv2DBackpropInput");
      CHECK(d[1].node().op == "Conv2DBackpropFilter");
      af::SessionOptions opts;
      opts.intra_op_threads = threads;
      auto out = aft::eval(g, {d[0], d[1]}, {{x, xv}, {w, wv}, {dy, dyv}}, opts);
      aft::check_close(out[0], values_of(dx_ref), 1e-12);
      aft::check_close(out[1], values_of(dw_ref), 1e-12);
    }
  }
}

TEST_CASE("conv2d: shape inference with unknown dims and unknown rank") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1, 28, 28, 1}, "x");
  auto w = af::placeholder(g, af::f32, {5, 5, 1, 32}, "w");
  CHECK(af::conv2d(x, w, {1, 1}, "SAME").shape() == af::Shape{-1, 28, 28, 32});
  CHECK(af::conv2d(x, w, {2, 2}, "VALID").shape() == af::Shape{-1, 12, 12, 32});
  auto xu = af::placeholder(g, af::f32, {-1, -1, 9, -1}, "xu");
  CHECK(af::conv2d(xu, w, {1, 1}, "VALID").shape() == af::Shape{-1, -1, 5, 32});
  auto xr = af::placeholder(g, af::f32, af::Shape::unknown_rank(), "xr");
  CHECK(af::conv2d(xr, w).shape() == af::Shape{-1, -1, -1, 32});
  auto wr = af::placeholder(g, af::f32, af::Shape::unknown_rank(), "wr");
  CHECK(af::conv2d(x, wr).shape() == af::Shape{-1, -1, -1, -1});
  CHECK(af::max_pool2d(x, {2, 2}, {2, 2}).shape() == af::Shape{-1, 14, 14, 1});
  CHECK(af::avg_pool2d(xr, {2, 2}, {2, 2}).shape() == af::Shape{-1, -1, -1, -1});
  // 7 with SAME, stride 2: ceil(7/2) = 4; VALID, window 3: (7-3)/2 + 1 = 3.
  auto x7 = af::placeholder(g, af::f32, {1, 7, 7, 3}, "x7");
  CHECK(af::max_pool2d(x7, {3, 3}, {2, 2}, "SAME").shape() == af::Shape{1, 4, 4, 3});
  CHECK(af::max_pool2d(x7, {3, 3}, {2, 2}, "VALID").shape() == af::Shape{1, 3, 3, 3});
}

TEST_CASE("conv2d: shape errors name the nodes and shapes") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {2, 5, 5, 3}, "images");
  auto w = af::placeholder(g, af::f32, {3, 3, 2, 4}, "kernel");
  try {
    af::conv2d(x, w, {1, 1}, "SAME", "conv");
    FAIL("expected a channel mismatch error");
  } catch (const af::Error& e) {
    std::string m = e.what();
    CHECK(m.find("conv") != std::string::npos);
    CHECK(m.find("'images' (float32[2,5,5,3])") != std::string::npos);
    CHECK(m.find("'kernel' (float32[3,3,2,4])") != std::string::npos);
    CHECK(m.find("channels") != std::string::npos);
  }
  auto w3 = af::placeholder(g, af::f32, {3, 3, 3, 4}, "w3");
  auto w64 = af::placeholder(g, af::f64, {3, 3, 3, 4}, "w64");
  auto v3 = af::placeholder(g, af::f32, {3, 3, 4}, "v3");
  auto small = af::placeholder(g, af::f32, {2, 1, 1, 3}, "small");
  auto ints = af::placeholder(g, af::i32, {2, 5, 5, 3}, "ints");
  CHECK_THROWS_WITH_AS(af::conv2d(x, w64), doctest::Contains("different dtypes"), af::Error);
  CHECK_THROWS_WITH_AS(af::conv2d(x, v3), doctest::Contains("'v3' (float32[3,3,4]) must have rank 4"), af::Error);
  CHECK_THROWS_WITH_AS(af::conv2d(x, w3, {1, 1}, "same"), doctest::Contains("\"SAME\" or \"VALID\""), af::Error);
  CHECK_THROWS_WITH_AS(af::conv2d(x, w3, {0, 1}), doctest::Contains("'strides' must be positive"), af::Error);
  CHECK_THROWS_WITH_AS(af::conv2d(x, w3, {1, 1, 1}), doctest::Contains("2 (or 4) elements"), af::Error);
  CHECK_THROWS_WITH_AS(af::conv2d(x, w3, {2, 1, 1, 1}), doctest::Contains("[1, h, w, 1]"), af::Error);
  CHECK_THROWS_WITH_AS(af::conv2d(small, w3, {1, 1}, "VALID"), doctest::Contains("'small' (float32[2,1,1,3])"), af::Error);
  CHECK_THROWS_WITH_AS(af::conv2d(ints, w3), doctest::Contains("float32 or float64"), af::Error);
  CHECK_THROWS_WITH_AS(af::max_pool2d(x, {2}, {1, 1}), doctest::Contains("'ksize'"), af::Error);
  CHECK_THROWS_WITH_AS(af::avg_pool2d(v3, {2, 2}, {1, 1}), doctest::Contains("must have rank 4"), af::Error);
  CHECK_THROWS_WITH_AS(af::max_pool2d(small, {3, 3}, {1, 1}, "VALID"), doctest::Contains("larger than the input"), af::Error);
}

TEST_CASE("hostile attributes give errors, never crashes") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {2, 5, 5, 3}, "x");
  auto w = af::placeholder(g, af::f32, {3, 3, 3, 4}, "w");
  auto v = af::placeholder(g, af::f32, {3}, "v");
  using Attrs = std::map<std::string, af::AttrValue>;
  using Ints = af::AttrValue::Ints;
  auto status = [&](const std::string& op, std::vector<af::Output> inputs, Attrs attrs) {
    af::NodeSpec spec;
    spec.op = op;
    spec.inputs = std::move(inputs);
    spec.attrs = std::move(attrs);
    return g.add_node(std::move(spec)).status();
  };
  const int64_t huge = int64_t{1} << 62;
  const std::vector<Attrs> bad_windows = {
      {{"padding", "SAME"}, {"strides", "2"}},
      {{"padding", int64_t{1}}},
      {{"padding", "SAME"}, {"strides", Ints{}}},
      {{"padding", "SAME"}, {"strides", Ints{-1, 1}}},
      {{"padding", "SAME"}, {"strides", Ints{huge, 1}}},
      {{"padding", "SAME"}, {"strides", Ints{1, 1, 1, 1, 1}}},
      {{"padding", "SAME"}, {"strides", af::AttrValue::Floats{1, 1}}},
  };
  for (const auto& a : bad_windows) {
    CHECK_FALSE(status("Conv2D", {x, w}, a).ok());
    Attrs p = a;
    p["ksize"] = Ints{2, 2};
    CHECK_FALSE(status("MaxPool", {x}, p).ok());
    CHECK_FALSE(status("AvgPool", {x}, p).ok());
  }
  for (const auto& k : {Ints{huge, 2}, Ints{0, 2}, Ints{2}, Ints{1, 2, 2, 2}})
    CHECK_FALSE(status("MaxPool", {x}, {{"padding", "SAME"}, {"ksize", k}}).ok());
  CHECK_FALSE(status("Conv2D", {x, w}, {}).ok());  // padding is required
  CHECK_FALSE(status("Conv2DBackpropInput", {x, w, x}, {{"padding", "SAME"}}).ok());
  CHECK_FALSE(status("MaxPoolGrad", {x, x, x}, {{"padding", "VALID"}, {"ksize", Ints{2, 2}}, {"strides", Ints{2, 2}}}).ok());
  for (const af::AttrValue& e : {af::AttrValue("x"), af::AttrValue(std::nan("")), af::AttrValue(-1.0)})
    CHECK_FALSE(status("FusedBatchNorm", {x, v, v, v, v}, {{"epsilon", e}}).ok());
  CHECK_FALSE(status("FusedBatchNormGrad", {x, x, v, v, v, v}, {}).ok());
  for (const af::AttrValue& k : {af::AttrValue("0.5"), af::AttrValue(0.0), af::AttrValue(std::nan("")), af::AttrValue(2.0)})
    CHECK_FALSE(status("Dropout", {x}, {{"keep_prob", k}}).ok());
  CHECK_FALSE(status("Dropout", {x}, {{"keep_prob", 0.5}, {"seed", "1"}}).ok());
  CHECK_FALSE(status("Dropout", {x, x}, {{"keep_prob", 0.5}}).ok());

  // A window far larger than the input is fine with SAME: every window is the whole input.
  auto any = af::placeholder(g, af::f64, af::Shape::unknown_rank(), "any");
  auto big = af::max_pool2d(any, {int64_t{1} << 30, int64_t{1} << 30}, {1, 1}, "SAME");
  auto bigavg = af::avg_pool2d(any, {int64_t{1} << 30, 3}, {2, 2}, "SAME");
  auto out = aft::eval(g, {big, bigavg}, {{any, iota({1, 3, 3, 1})}});
  aft::check_close(out[0], {9, 9, 9, 9, 9, 9, 9, 9, 9});
  aft::check_close(out[1], {4.5, 5.5, 4.5, 5.5});
}

TEST_CASE("conv2d: runtime errors and empty tensors") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, af::Shape::unknown_rank(), "x");
  auto w = af::placeholder(g, af::f32, af::Shape::unknown_rank(), "w");
  auto y = af::conv2d(x, w, {1, 1}, "VALID");
  auto st = aft::eval_status(g, y, {{x, af::Tensor::zeros(af::f32, {1, 4, 4, 3})}, {w, af::Tensor::zeros(af::f32, {2, 2, 2, 1})}});
  CHECK_FALSE(st.ok());
  CHECK(st.message().find("3 channels") != std::string::npos);
  CHECK(st.message().find("[2,2,2,1]") != std::string::npos);
  st = aft::eval_status(g, y, {{x, af::Tensor::zeros(af::f32, {1, 1, 4, 3})}, {w, af::Tensor::zeros(af::f32, {3, 3, 3, 1})}});
  CHECK_FALSE(st.ok());
  CHECK(st.message().find("larger than the input") != std::string::npos);
  st = aft::eval_status(g, y, {{x, af::Tensor::zeros(af::f32, {4, 4, 3})}, {w, af::Tensor::zeros(af::f32, {2, 2, 3, 1})}});
  CHECK(st.message().find("rank 4") != std::string::npos);
  auto p = af::max_pool2d(x, {2, 2}, {2, 2});
  st = aft::eval_status(g, p, {{x, af::Tensor::zeros(af::f32, {4, 4})}});
  CHECK(st.message().find("rank 4") != std::string::npos);

  // Empty batch, empty channels, empty output channels.
  auto e = aft::eval(g, {y}, {{x, af::Tensor::zeros(af::f32, {0, 4, 4, 3})}, {w, af::Tensor::zeros(af::f32, {2, 2, 3, 5})}});
  CHECK(e[0].shape() == af::Shape{0, 3, 3, 5});
  e = aft::eval(g, {y}, {{x, af::Tensor::zeros(af::f32, {1, 3, 3, 0})}, {w, af::Tensor::zeros(af::f32, {2, 2, 0, 2})}});
  CHECK(e[0].shape() == af::Shape{1, 2, 2, 2});
  aft::check_close(e[0], std::vector<double>(8, 0.0));
  e = aft::eval(g, {p}, {{x, af::Tensor::zeros(af::f32, {0, 4, 4, 3})}});
  CHECK(e[0].shape() == af::Shape{0, 2, 2, 3});
  // The gradients of an empty batch are empty (dx) and zero (dw).
  af::Graph g2;
  auto x2 = af::placeholder(g2, af::f64, {-1, 4, 4, 2}, "x");
  auto w2 = af::placeholder(g2, af::f64, {3, 3, 2, 2}, "w");
  auto d = af::gradients({af::reduce_sum(af::conv2d(x2, w2))}, {x2, w2});
  e = aft::eval(g2, {d[0], d[1]}, {{x2, af::Tensor::zeros(af::f64, {0, 4, 4, 2})}, {w2, aft::random_f64({3, 3, 2, 2})}});
  CHECK(e[0].shape() == af::Shape{0, 4, 4, 2});
  CHECK(e[1].shape() == af::Shape{3, 3, 2, 2});
  aft::check_close(e[1], std::vector<double>(36, 0.0));
}

TEST_CASE("pooling: hand-computed values and naive loops") {
  af::Graph g;
  auto x = af::constant(g, iota({1, 4, 4, 1}));
  aft::check_close(aft::eval1(g, af::max_pool2d(x, {2, 2}, {2, 2})), {6, 8, 14, 16});
  aft::check_close(aft::eval1(g, af::avg_pool2d(x, {2, 2}, {2, 2})), {3.5, 5.5, 11.5, 13.5});
  auto x3 = af::constant(g, iota({1, 3, 3, 1}));
  // SAME 3x3: the corner window holds 4 input elements and averages over those 4.
  aft::check_close(aft::eval1(g, af::avg_pool2d(x3, {3, 3}, {1, 1}, "SAME")), {3, 3.5, 4, 4.5, 5, 5.5, 6, 6.5, 7});
  aft::check_close(aft::eval1(g, af::max_pool2d(x3, {3, 3}, {1, 1}, "SAME")), {5, 6, 6, 8, 9, 9, 8, 9, 9});
  // Negative inputs: padding never wins a max.
  auto neg = af::constant(g, af::Tensor::from_vector<double>({-4, -3, -2, -1}, {1, 2, 2, 1}));
  aft::check_close(aft::eval1(g, af::max_pool2d(neg, {3, 3}, {1, 1}, "SAME")), {-1, -1, -1, -1});

  for (const auto& cs : kPoolCases) {
    CAPTURE(cs.x.to_string());
    CAPTURE(cs.pad);
    auto xv = aft::random_f64(cs.x, -1, 1, 11);
    const bool same = std::string(cs.pad) == "SAME";
    for (bool is_max : {true, false}) {
      af::Graph g2;
      auto xp = af::placeholder(g2, af::f64, cs.x, "x");
      auto y = is_max ? af::max_pool2d(xp, {cs.k0, cs.k1}, {cs.s0, cs.s1}, cs.pad)
                      : af::avg_pool2d(xp, {cs.k0, cs.k1}, {cs.s0, cs.s1}, cs.pad);
      auto ref = naive_pool(xv, cs.k0, cs.k1, cs.s0, cs.s1, same, is_max);
      CHECK(y.shape() == ref.shape());
      aft::check_close(aft::eval1(g2, y, {{xp, xv}}), values_of(ref), 1e-12);
    }
  }
}

TEST_CASE("max pool gradient goes to the first maximum of each window") {
  af::Graph g;
  // Ties: the whole window is 1; the first element in scan order gets the gradient.
  auto x = af::placeholder(g, af::f64, {1, 2, 4, 1}, "x");
  auto y = af::max_pool2d(x, {2, 2}, {2, 2});
  auto d = af::gradients({y}, {x});
  auto v = aft::eval1(g, d[0], {{x, af::Tensor::from_vector<double>({1, 1, 0, 2, 1, 1, 3, 2}, {1, 2, 4, 1})}});
  aft::check_close(v, {1, 0, 0, 0, 0, 0, 1, 0});
  // Overlapping windows accumulate at a shared maximum.
  auto x2 = af::placeholder(g, af::f64, {1, 1, 3, 1}, "x2");
  auto d2 = af::gradients({af::max_pool2d(x2, {1, 2}, {1, 1})}, {x2});
  aft::check_close(aft::eval1(g, d2[0], {{x2, af::Tensor::from_vector<double>({0, 5, 1}, {1, 1, 3, 1})}}), {0, 2, 0});
}

TEST_CASE("max pool gradient matches a first-maximum reference: padding, overlaps, channels, ties, f32 and f64") {
  for (const auto& cs : kPoolCases) {
    CAPTURE(cs.x.to_string());
    CAPTURE(cs.pad);
    // Four distinct values: most windows hold ties, which go to the first in scan order.
    auto xv = aft::random_f64(cs.x, 0, 4, 21);
    for (int64_t i = 0; i < xv.num_elements(); ++i) xv.data<double>()[i] = std::floor(xv.data<double>()[i]);
    const bool same = std::string(cs.pad) == "SAME";
    const auto yshape = naive_pool(xv, cs.k0, cs.k1, cs.s0, cs.s1, same, true).shape();
    auto dyv = aft::random_f64(yshape, -1, 1, 22);
    auto ref = values_of(naive_max_pool_grad(xv, dyv, cs.k0, cs.k1, cs.s0, cs.s1, same));
    for (bool f32 : {false, true}) {
      CAPTURE(f32);
      af::Graph g;
      const af::DType t = f32 ? af::f32 : af::f64;
      auto xp = af::placeholder(g, t, cs.x, "x");
      auto dyp = af::placeholder(g, t, yshape, "dy");
      auto y = af::max_pool2d(xp, {cs.k0, cs.k1}, {cs.s0, cs.s1}, cs.pad);
      auto d = af::gradients({y}, {xp}, {dyp});
      auto got = f32 ? aft::eval1(g, d[0], {{xp, to_f32(xv)}, {dyp, to_f32(dyv)}}) : aft::eval1(g, d[0], {{xp, xv}, {dyp, dyv}});
      aft::check_close(got, ref, f32 ? 1e-6 : 1e-12);
    }
  }
}

TEST_CASE("fused batch norm: training and inference values") {
  af::Graph g;
  // x [4, 2]: channel 0 = 1, 2, 3, 4 (mean 2.5, var 1.25); channel 1 = 10, 10, 10, 14 (mean 11, var 3).
  auto x = af::constant(g, af::Tensor::from_vector<double>({1, 10, 2, 10, 3, 10, 4, 14}, {4, 2}));
  auto scale = af::constant(g, af::Tensor::from_vector<double>({2, 1}));
  auto offset = af::constant(g, af::Tensor::from_vector<double>({0.5, -1}));
  auto mean = af::constant(g, af::Tensor::from_vector<double>({1, 2}));
  auto var = af::constant(g, af::Tensor::from_vector<double>({4, 9}));
  const double eps = 0.001;
  auto tr = af::fused_batch_norm(x, scale, offset, mean, var, eps, true);
  auto inf = af::fused_batch_norm(x, scale, offset, mean, var, eps, false);
  CHECK(tr.y.shape() == af::Shape{4, 2});
  CHECK(tr.batch_mean.shape() == af::Shape{2});
  auto out = aft::eval(g, {tr.y, tr.batch_mean, tr.batch_variance, inf.y, inf.batch_mean, inf.batch_variance});
  std::vector<double> xs = {1, 10, 2, 10, 3, 10, 4, 14};
  std::vector<double> yt, yi;
  const double m[2] = {2.5, 11}, v[2] = {1.25, 3}, sc[2] = {2, 1}, of[2] = {0.5, -1}, mi[2] = {1, 2}, vi[2] = {4, 9};
  for (size_t i = 0; i < xs.size(); ++i) {
    size_t c = i % 2;
    yt.push_back((xs[i] - m[c]) / std::sqrt(v[c] + eps) * sc[c] + of[c]);
    yi.push_back((xs[i] - mi[c]) / std::sqrt(vi[c] + eps) * sc[c] + of[c]);
  }
  aft::check_close(out[0], yt, 1e-12);
  aft::check_close(out[1], {2.5, 11}, 1e-12);
  aft::check_close(out[2], {1.25 * 4 / 3, 3.0 * 4 / 3}, 1e-12);  // Bessel-corrected
  aft::check_close(out[3], yi, 1e-12);
  aft::check_close(out[4], {1, 2});
  aft::check_close(out[5], {4, 9});

  // f32 on a 4-D input, with a runtime mode flag.
  af::Graph g2;
  auto x4 = af::placeholder(g2, af::f32, {-1, 3, 3, 2}, "x");
  auto flag = af::placeholder(g2, af::boolean, {}, "training");
  auto ones = af::constant(g2, af::Tensor::filled(af::f32, {2}, 1.0));
  auto zeros = af::constant(g2, af::Tensor::filled(af::f32, {2}, 0.0));
  auto bn = af::fused_batch_norm(x4, ones, zeros, zeros, ones, flag, 0.0);
  auto xv = to_f32(aft::random_f64({5, 3, 3, 2}, 3, 5, 9));
  auto on = aft::eval(g2, {bn.y, bn.batch_mean}, {{x4, xv}, {flag, af::Tensor::scalar(true)}});
  auto off = aft::eval(g2, {bn.y, bn.batch_mean}, {{x4, xv}, {flag, af::Tensor::scalar(false)}});
  // Training: per-channel mean 0 and variance 1; inference with (0, 1): y = x.
  double s0 = 0, s1 = 0;
  for (int64_t i = 0; i < on[0].num_elements(); i += 2) {
    s0 += on[0].data<float>()[i];
    s1 += on[0].data<float>()[i] * on[0].data<float>()[i];
  }
  CHECK(std::fabs(s0 / 45) < 1e-5);
  CHECK(std::fabs(s1 / 45 - 1) < 1e-4);
  CHECK(off[0].equals(xv));
  aft::check_close(off[1], {0, 0});

  // Errors: a per-channel vector of the wrong length names both inputs.
  auto bad = af::constant(g2, af::Tensor::filled(af::f32, {3}, 1.0), "bad_scale");
  CHECK_THROWS_WITH_AS(af::fused_batch_norm(x4, bad, zeros, zeros, ones), doctest::Contains("'bad_scale' (float32[3])"),
                       af::Error);
  auto v1 = af::placeholder(g2, af::f32, {4}, "v1");
  CHECK_THROWS_WITH_AS(af::fused_batch_norm(v1, ones, zeros, zeros, ones), doctest::Contains("rank >= 2"), af::Error);
  auto iflag = af::placeholder(g2, af::i32, {}, "iflag");
  CHECK_THROWS_WITH_AS(af::fused_batch_norm(x4, ones, zeros, zeros, ones, iflag), doctest::Contains("bool scalar"),
                       af::Error);
  // Runtime: empty batch gives an empty y.
  auto e = aft::eval(g2, {bn.y}, {{x4, af::Tensor::zeros(af::f32, {0, 3, 3, 2})}, {flag, af::Tensor::scalar(true)}});
  CHECK(e[0].shape() == af::Shape{0, 3, 3, 2});
}

TEST_CASE("dropout: scaling, mask, seeds, and off at inference") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1, 100}, "x");
  auto y = af::dropout(x, 0.7, true, 5);
  REQUIRE(y.node().op == "Dropout");
  auto ones = af::Tensor::filled(af::f32, {40, 100}, 1.0);
  auto sess = af::Session::create(g).value();
  auto a = sess.run({y, af::Output(y.graph(), y.node_id(), 1)}, {{x, ones}});
  REQUIRE(a.ok());
  const af::Tensor& yv = (*a)[0];
  const af::Tensor& mv = (*a)[1];
  int kept = 0;
  bool scaled = true;
  for (int64_t i = 0; i < yv.num_elements(); ++i) {
    float v = yv.data<float>()[i];
    if (v != 0) {
      ++kept;
      scaled = scaled && std::fabs(v - 1 / 0.7f) < 1e-6;
    }
    CHECK(v == mv.data<float>()[i]);
  }
  CHECK(scaled);
  CHECK(kept > 2600);
  CHECK(kept < 3000);
  // The next run draws a fresh mask; a new session replays the first. (Kernel state,
  // like a random op's, is per session and fetch set, so the runs fetch the same set.)
  auto b = sess.run({y, af::Output(y.graph(), y.node_id(), 1)}, {{x, ones}});
  CHECK_FALSE((*b)[0].equals(yv));
  auto sess2 = af::Session::create(g).value();
  CHECK((*sess2.run({y, af::Output(y.graph(), y.node_id(), 1)}, {{x, ones}}))[0].equals(yv));

  // Kept exactly where RandomUniform with the same seeds draws >= 1 - keep_prob.
  af::Graph g2;
  g2.set_seed(3);
  auto u = af::random_uniform(g2, {40, 100}, 0, 1, 9);
  auto c = af::constant(g2, ones);
  auto d = af::dropout(c, 0.7, true, 9);
  auto r = aft::eval(g2, {u, d});
  for (int64_t i = 0; i < r[0].num_elements(); ++i)
    CHECK((r[1].data<float>()[i] != 0) == (static_cast<double>(r[0].data<float>()[i]) >= 1.0 - 0.7));
  // The same in float64 (two values a block), on a size that leaves a partial block and
  // blocks past the last full batch of lanes.
  {
    af::Graph g3;
    g3.set_seed(4);
    auto u64 = af::random_uniform(g3, {97, 61}, 0, 1, 11, af::f64);
    auto d64 = af::dropout(af::constant(g3, af::Tensor::filled(af::f64, {97, 61}, 1.0)), 0.6, true, 11);
    af::SessionOptions two;
    two.intra_op_threads = 2;
    auto s3 = af::Session::create(g3, two).value();
    auto r3 = s3.run({u64, d64});
    REQUIRE(r3.ok());
    int64_t kept3 = 0;
    for (int64_t i = 0; i < (*r3)[0].num_elements(); ++i) {
      const bool kept_here = (*r3)[1].data<double>()[i] != 0;
      kept3 += kept_here;
      CHECK(kept_here == ((*r3)[0].data<double>()[i] >= 1.0 - 0.6));
    }
    CHECK(kept3 > 0);
    CHECK(kept3 < (*r3)[0].num_elements());
  }

  // Off at inference: a false flag returns x itself; a false bool fed at run time
  // passes x through with a mask of ones.
  CHECK(af::dropout(x, 0.5, false).node_id() == x.node_id());
  auto flag = af::placeholder(g, af::boolean, {}, "training");
  auto yf = af::dropout(x, 0.5, flag, 1);
  auto xv = to_f32(aft::random_f64({3, 100}));
  auto sess3 = af::Session::create(g).value();
  auto off = sess3.run({yf, af::Output(&g, yf.node_id(), 1)}, {{x, xv}, {flag, af::Tensor::scalar(false)}});
  REQUIRE(off.ok());
  CHECK((*off)[0].equals(xv));
  CHECK((*off)[1].equals(af::Tensor::filled(af::f32, {3, 100}, 1.0)));
  auto on = sess3.run({yf}, {{x, xv}, {flag, af::Tensor::scalar(true)}});
  CHECK_FALSE((*on)[0].equals(xv));
  // keep_prob 1 keeps everything.
  CHECK(aft::eval1(g, af::dropout(x, 1.0, true), {{x, xv}}).equals(xv));

  CHECK_THROWS_AS(af::dropout(x, 0.0), af::Error);
  CHECK_THROWS_AS(af::dropout(x, 1.5), af::Error);
  auto ix = af::placeholder(g, af::i32, {3}, "ix");
  CHECK_THROWS_WITH_AS(af::dropout(ix, 0.5), doctest::Contains("float32 or float64"), af::Error);
  // Empty input.
  auto e = aft::eval1(g, af::dropout(x, 0.5, true, 2), {{x, af::Tensor::zeros(af::f32, {0, 100})}});
  CHECK(e.shape() == af::Shape{0, 100});
}

TEST_CASE("flatten and embedding_lookup") {
  af::Graph g;
  auto x = af::placeholder(g, af::f64, {-1, 2, 3, 2}, "x");
  auto f = af::flatten(x);
  CHECK(f.shape() == af::Shape{-1, 12});
  auto v = aft::eval1(g, f, {{x, iota({2, 2, 3, 2})}});
  CHECK(v.shape() == af::Shape{2, 12});
  CHECK(v.data<double>()[13] == 14);
  auto x2 = af::placeholder(g, af::f64, {3, -1}, "x2");
  CHECK(af::flatten(x2).shape() == af::Shape{3, -1});
  auto xr = af::placeholder(g, af::f64, {-1, -1}, "xr");
  CHECK_THROWS_AS(af::flatten(xr), af::Error);

  auto params = af::constant(g, af::Tensor::from_vector<double>({0, 1, 10, 11, 20, 21}, {3, 2}));
  auto ids = af::constant(g, af::Tensor::from_vector<int64_t>({2, 0, 2, 1}, {2, 2}));
  auto e = af::embedding_lookup(params, ids);
  CHECK(e.shape() == af::Shape{2, 2, 2});
  aft::check_close(aft::eval1(g, e), {20, 21, 0, 1, 20, 21, 10, 11});
}

TEST_CASE("speed: conv 5x5 32->64 on [64,14,14,32] f32, forward + backward") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {64, 14, 14, 32}, "x");
  auto w = af::placeholder(g, af::f32, {5, 5, 32, 64}, "w");
  auto y = af::conv2d(x, w, {1, 1}, "SAME");
  auto dy = af::placeholder(g, af::f32, {64, 14, 14, 64}, "dy");
  auto d = af::gradients({y}, {x, w}, {dy});
  auto sess = af::Session::create(g).value();
  af::FeedDict feeds = {{x, to_f32(aft::random_f64({64, 14, 14, 32}))},
                        {w, to_f32(aft::random_f64({5, 5, 32, 64}, -0.1, 0.1))},
                        {dy, to_f32(aft::random_f64({64, 14, 14, 64}))}};
  auto time = [&](std::vector<af::Fetch> fetches) {
    REQUIRE(sess.run(fetches, feeds).ok());  // warm-up
    const int reps = 5;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) REQUIRE(sess.run(fetches, feeds).ok());
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
  };
  double fwd = time({y});
  double all = time({y, d[0], d[1]});
  MESSAGE("conv 5x5 32->64 [64,14,14,32] f32: forward " << fwd << " ms, forward+backward " << all << " ms");
  CHECK(fwd > 0);
  CHECK(all > fwd * 0.5);
}
