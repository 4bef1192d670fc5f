// Gradient checks (central differences in f64, relative error <= 1e-6) of the NN ops:
// Conv2D and its backprops (second order), MaxPool / AvgPool and their gradients,
// FusedBatchNorm in training, inference and runtime-flag modes, Dropout.
#include <doctest/doctest.h>

#include "gradient_check.h"
#include "test_util.h"

namespace af = actorflow;

namespace {

struct ConvCase {
  af::Shape x, w;
  int64_t sh, sw;
  const char* pad;
};

// N=2, H=W=5, C=2, O=3 with both paddings and strides 1 and 2, plus an even filter
// (asymmetric SAME padding) and a 1x1 filter.
const ConvCase kConvCases[] = {
    {{2, 5, 5, 2}, {3, 3, 2, 3}, 1, 1, "SAME"}, {{2, 5, 5, 2}, {3, 3, 2, 3}, 2, 2, "SAME"},
    {{2, 5, 5, 2}, {3, 3, 2, 3}, 1, 1, "VALID"}, {{2, 5, 5, 2}, {3, 3, 2, 3}, 2, 2, "VALID"},
    {{2, 5, 4, 2}, {2, 2, 2, 3}, 2, 1, "SAME"}, {{2, 4, 4, 2}, {1, 1, 2, 3}, 1, 1, "VALID"},
};

af::Shape conv_out(const ConvCase& cs) {
  auto out = [&](int64_t in, int64_t k, int64_t s) {
    return std::string(cs.pad) == "SAME" ? (in + s - 1) / s : (in - k) / s + 1;
  };
  return af::Shape{cs.x.dim(0), out(cs.x.dim(1), cs.w.dim(0), cs.sh), out(cs.x.dim(2), cs.w.dim(1), cs.sw), cs.w.dim(3)};
}

}  // namespace

TEST_CASE("gradient check: conv2d w.r.t. input and filter") {
  for (const auto& cs : kConvCases) {
    CAPTURE(cs.x.to_string());
    CAPTURE(cs.w.to_string());
    CAPTURE(std::string(cs.pad));
    CAPTURE(cs.sh);
    af::Graph g;
    auto x = af::placeholder(g, af::f64, cs.x, "x");
    auto w = af::placeholder(g, af::f64, cs.w, "w");
    auto y = af::conv2d(x, w, {cs.sh, cs.sw}, cs.pad);
    CHECK(aft::gradient_error(g, y, {x, w}, {aft::random_f64(cs.x, -1, 1, 1), aft::random_f64(cs.w, -1, 1, 2)}) <= 1e-6);
  }
}

TEST_CASE("gradient check: conv2d with an unknown batch dim") {
  af::Graph g;
  auto x = af::placeholder(g, af::f64, {-1, 5, 5, 2}, "x");
  auto w = af::placeholder(g, af::f64, {3, 3, 2, 3}, "w");
  auto y = af::conv2d(x, w, {2, 2}, "SAME");
  CHECK(aft::gradient_error(g, y, {x, w}, {aft::random_f64({2, 5, 5, 2}, -1, 1, 3), aft::random_f64({3, 3, 2, 3}, -1, 1, 4)}) <= 1e-6);
}

TEST_CASE("gradient check: conv2d backprop ops (second order)") {
  for (const auto& cs : kConvCases) {
    CAPTURE(cs.x.to_string());
    CAPTURE(std::string(cs.pad));
    CAPTURE(cs.sh);
    auto xv = aft::random_f64(cs.x, -1, 1, 5);
    auto wv = aft::random_f64(cs.w, -1, 1, 6);
    auto dyv = aft::random_f64(conv_out(cs), -1, 1, 7);
    // dx = BackpropInput(x_shape, w, dy) is checked w.r.t. w and dy with x constant;
    // dw = BackpropFilter(x, w_shape, dy) w.r.t. x and dy with w constant.
    for (int which : {0, 1}) {
      CAPTURE(which);
      af::Graph g;
      auto x = which == 0 ? af::constant(g, xv, "x") : af::placeholder(g, af::f64, cs.x, "x");
      auto w = which == 1 ? af::constant(g, wv, "w") : af::placeholder(g, af::f64, cs.w, "w");
      auto dy = af::placeholder(g, af::f64, conv_out(cs), "dy");
      auto y = af::conv2d(x, w, {cs.sh, cs.sw}, cs.pad);
      auto d = af::gradients({y}, {x, w}, {dy});
      if (which == 0) {
        REQUIRE(d[0].node().op == "Conv2DBackpropInput");
        CHECK(aft::gradient_error(g, d[0], {w, dy}, {wv, dyv}) <= 1e-6);
      } else {
        REQUIRE(d[1].node().op == "Conv2DBackpropFilter");
        CHECK(aft::gradient_error(g, d[1], {x, dy}, {xv, dyv}) <= 1e-6);
      }
    }
  }
}

TEST_CASE("gradient check: max and average pooling") {
  struct Case {
    af::Shape x;
    int64_t k0, k1, s0, s1;
    const char* pad;
  };
  const Case cases[] = {{{2, 5, 5, 2}, 2, 2, 2, 2, "SAME"}, {{2, 5, 5, 2}, 3, 3, 1, 1, "SAME"},
                        {{2, 5, 5, 2}, 2, 2, 2, 2, "VALID"}, {{2, 5, 5, 2}, 3, 2, 1, 2, "VALID"}};
  for (const auto& cs : cases) {
    CAPTURE(cs.x.to_string());
    CAPTURE(std::string(cs.pad));
    CAPTURE(cs.k0);
    CAPTURE(cs.s0);
    // Distinct values, well apart relative to the finite-difference step: no ties.
    auto xv = aft::random_f64(cs.x, -1, 1, 21);
    af::Graph g;
    auto x = af::placeholder(g, af::f64, cs.x, "x");
    auto mp = af::max_pool2d(x, {cs.k0, cs.k1}, {cs.s0, cs.s1}, cs.pad);
    auto ap = af::avg_pool2d(x, {cs.k0, cs.k1}, {cs.s0, cs.s1}, cs.pad);
    CHECK(aft::gradient_error(g, mp, {x}, {xv}) <= 1e-6);
    CHECK(aft::gradient_error(g, ap, {x}, {xv}) <= 1e-6);

    // Second order: the pool gradients are linear in the incoming gradient.
    auto gy = af::placeholder(g, af::f64, mp.shape(), "gy");
    auto gyv = aft::random_f64(mp.shape(), -1, 1, 22);
    auto dmp = af::gradients({mp}, {x}, {gy})[0];
    auto dap = af::gradients({ap}, {x}, {gy})[0];
    REQUIRE(dmp.node().op == "MaxPoolGrad");
    REQUIRE(dap.node().op == "AvgPoolGrad");
    // x is held fixed (fed) while checking d(dx)/d(gy).
    auto xc = af::constant(g, xv, "x_value");
    auto dmp_c = af::gradients({af::max_pool2d(xc, {cs.k0, cs.k1}, {cs.s0, cs.s1}, cs.pad)}, {xc}, {gy})[0];
    auto dap_c = af::gradients({af::avg_pool2d(xc, {cs.k0, cs.k1}, {cs.s0, cs.s1}, cs.pad)}, {xc}, {gy})[0];
    CHECK(aft::gradient_error(g, dmp_c, {gy}, {gyv}) <= 1e-6);
    CHECK(aft::gradient_error(g, dap_c, {gy}, {gyv}) <= 1e-6);
    // Third order: MaxPoolGradGrad's gradient is MaxPoolGrad again.
    auto gx = af::placeholder(g, af::f64, cs.x, "gx");
    auto ddmp = af::gradients({dmp_c}, {gy}, {gx})[0];
    REQUIRE(ddmp.node().op == "MaxPoolGradGrad");
    CHECK(aft::gradient_error(g, ddmp, {gx}, {aft::random_f64(cs.x, -1, 1, 23)}) <= 1e-6);
  }
}

TEST_CASE("gradient check: fused batch norm, training") {
  for (bool four_d : {true, false}) {
    CAPTURE(four_d);
    af::Graph g;
    af::Shape xs = four_d ? af::Shape{2, 3, 2, 3} : af::Shape{5, 3};
    auto x = af::placeholder(g, af::f64, xs, "x");
    auto scale = af::placeholder(g, af::f64, {3}, "scale");
    auto offset = af::placeholder(g, af::f64, {3}, "offset");
    auto mean = af::constant(g, af::Tensor::from_vector<double>({0, 0, 0}));
    auto var = af::constant(g, af::Tensor::from_vector<double>({1, 1, 1}));
    auto bn = af::fused_batch_norm(x, scale, offset, mean, var, 1e-3, true);
    auto xv = aft::random_f64(xs, -2, 2, 41);
    auto sv = aft::random_f64({3}, 0.5, 2, 42);
    auto ov = aft::random_f64({3}, -1, 1, 43);
    // Batch normalization's x-gradient cancels within each channel, so central
    // differences with the default step (1e-6) are dominated by roundoff (~1.5e-6 on
    // small elements); a step of 1e-5 balances roundoff and truncation.
    const double step = 1e-5;
    CHECK(aft::gradient_error(g, bn.y, {x, scale, offset}, {xv, sv, ov}, step) <= 1e-6);
    // The statistics outputs are differentiable too (d_batch_mean / d_batch_variance).
    CHECK(aft::gradient_error(g, bn.batch_mean, {x, scale, offset}, {xv, sv, ov}, step) <= 1e-6);
    CHECK(aft::gradient_error(g, bn.batch_variance, {x, scale, offset}, {xv, sv, ov}, step) <= 1e-6);
    CHECK(aft::gradient_error(g, bn.y * 2.0 + af::reduce_sum(bn.batch_variance) * bn.y, {x, scale, offset}, {xv, sv, ov},
                              step) <= 1e-6);
  }
}

TEST_CASE("gradient check: fused batch norm, inference and runtime flag") {
  af::Graph g;
  auto x = af::placeholder(g, af::f64, {2, 3, 2, 3}, "x");
  auto scale = af::placeholder(g, af::f64, {3}, "scale");
  auto offset = af::placeholder(g, af::f64, {3}, "offset");
  auto mean = af::placeholder(g, af::f64, {3}, "mean");
  auto var = af::placeholder(g, af::f64, {3}, "var");
  auto xv = aft::random_f64({2, 3, 2, 3}, -2, 2, 41);
  auto sv = aft::random_f64({3}, 0.5, 2, 42);
  auto ov = aft::random_f64({3}, -1, 1, 43);
  auto mv = aft::random_f64({3}, -0.5, 0.5, 44);
  auto vv = aft::random_f64({3}, 0.5, 2, 45);
  auto bn = af::fused_batch_norm(x, scale, offset, mean, var, 1e-3, false);
  const double step = 1e-5;  // see the training case
  CHECK(aft::gradient_error(g, bn.y, {x, scale, offset, mean, var}, {xv, sv, ov, mv, vv}, step) <= 1e-6);

  // With a runtime flag the graph is the same for both modes; check each mode's
  // gradient by feeding the flag through a placeholder_with_default.
  for (bool training : {true, false}) {
    CAPTURE(training);
    af::Graph g2;
    auto x2 = af::placeholder(g2, af::f64, {2, 3, 2, 3}, "x");
    auto s2 = af::placeholder(g2, af::f64, {3}, "scale");
    auto o2 = af::placeholder(g2, af::f64, {3}, "offset");
    auto m2 = af::placeholder(g2, af::f64, {3}, "mean");
    auto v2 = af::placeholder(g2, af::f64, {3}, "var");
    auto flag = af::placeholder_with_default(af::constant(g2, af::Tensor::scalar(training)), {}, "training");
    auto bn2 = af::fused_batch_norm(x2, s2, o2, m2, v2, flag, 1e-3);
    CHECK(aft::gradient_error(g2, bn2.y, {x2, s2, o2, m2, v2}, {xv, sv, ov, mv, vv}, step) <= 1e-6);
    CHECK(aft::gradient_error(g2, bn2.batch_variance, {x2, s2, o2, m2, v2}, {xv, sv, ov, mv, vv}, step) <= 1e-6);
  }
}

TEST_CASE("gradient of dropout applies the same mask") {
  af::Graph g;
  auto x = af::placeholder(g, af::f64, {4, 50}, "x");
  auto y = af::dropout(x, 0.6, true, 3);
  auto mask = af::Output(&g, y.node_id(), 1);
  auto d = af::gradients({y}, {x});
  auto sess = af::Session::create(g).value();
  auto r = sess.run({y, mask, d[0]}, {{x, aft::random_f64({4, 50}, 1, 2)}});
  REQUIRE(r.ok());
  // One step: the gradient is the mask of that same step (0 or 1/0.6).
  CHECK((*r)[2].equals((*r)[1]));
  int zeros = 0;
  for (int64_t i = 0; i < (*r)[1].num_elements(); ++i) {
    double m = (*r)[1].data<double>()[i];
    CHECK((m == 0 || std::fabs(m - 1 / 0.6) < 1e-12));
    zeros += m == 0;
  }
  CHECK(zeros > 40);
  CHECK(zeros < 120);
}
