// Gradient checks of every op with a registered gradient: symbolic gradients against
// central differences in f64. Each graph is built three times, with the inputs' static
// shapes, with every dim unknown and with unknown ranks, so both the static and the
// runtime-shaped paths of the gradient functions run. The last case checks that no
// registered gradient is left out.
#include <doctest/doctest.h>

#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gradient_check.h"
#include "test_util.h"

namespace af = actorflow;

namespace {

using Xs = std::vector<af::Output>;
using Build = std::function<af::Output(const Xs&)>;

// The ops each case below checks. The coverage case compares their union with the
// gradient registry; each case confirms its own claim by finding the ops in its graphs.
const std::map<std::string, std::vector<std::string>>& claims() {
  static const std::map<std::string, std::vector<std::string>> m = {
      {"unary math", {"Neg", "Abs", "Exp", "Log", "Sqrt", "Rsqrt", "Square"}},
      {"activations", {"Relu", "Sigmoid", "Tanh", "Softplus"}},
      {"softmax", {"Softmax", "LogSoftmax"}},
      {"pass-through", {"Identity", "PlaceholderWithDefault", "Cast"}},
      {"binary", {"Add", "Sub", "Mul", "Div", "Pow", "Maximum", "Minimum", "SquaredDifference", "AddN"}},
      {"reductions", {"Sum", "Mean", "Max", "Min", "Prod"}},
      {"matmul", {"MatMul"}},
      {"reshape", {"Reshape", "Transpose", "ExpandDims", "Squeeze"}},
      {"concat split", {"Concat", "Split", "SplitV"}},
      {"slice pad tile", {"Slice", "Pad", "Tile"}},
      {"gather", {"Gather"}},
      {"select", {"Select"}},
      {"dropout", {"Dropout"}},
      {"gradient support", {"BroadcastReduced", "SumToShapeOf"}},
  };
  return m;
}

// Ops whose gradients are checked by finite differences in other test programs, and
// which: the nn ops and their second-order gradient ops, the losses, BiasAdd.
const std::map<std::string, std::string>& checked_elsewhere() {
  // Paths under tests/.
  static const std::map<std::string, std::string> m = {
      {"Conv2D", "ops/test_ops_nn_grads.cpp"},
      {"Conv2DBackpropInput", "ops/test_ops_nn_grads.cpp"},
      {"Conv2DBackpropFilter", "ops/test_ops_nn_grads.cpp"},
      {"MaxPool", "ops/test_ops_nn_grads.cpp"},
      {"MaxPoolGrad", "ops/test_ops_nn_grads.cpp"},
      {"MaxPoolGradGrad", "ops/test_ops_nn_grads.cpp"},
      {"AvgPool", "ops/test_ops_nn_grads.cpp"},
      {"AvgPoolGrad", "ops/test_ops_nn_grads.cpp"},
      {"FusedBatchNorm", "ops/test_ops_nn_grads.cpp"},
      {"BiasAdd", "engine/test_losses.cpp"},
      {"BiasAddGrad", "engine/test_losses.cpp"},
      {"L2Loss", "engine/test_losses.cpp"},
      {"SoftmaxCrossEntropyWithLogits", "engine/test_losses.cpp"},
      {"SparseSoftmaxCrossEntropyWithLogits", "engine/test_losses.cpp"},
      {"SigmoidCrossEntropyWithLogits", "engine/test_losses.cpp"},
      {"DynamicStitch", "engine/test_partitioned_variables.cpp"}};
  return m;
}

// The op types a case's functions built, checked against its claim at the end.
class Claim {
 public:
  explicit Claim(std::string name) : name_(std::move(name)) { REQUIRE(claims().count(name_) == 1); }
  // Nodes [0, end) of g: what the case built, before the checker added its loss.
  void saw(const af::Graph& g, int end) {
    for (int i = 0; i < end; ++i) seen_.insert(g.node(i).op);
  }
  void verify() const {
    for (const auto& op : claims().at(name_))
      CHECK_MESSAGE(seen_.count(op) == 1, "case '" << name_ << "' never built " << op);
  }

 private:
  std::string name_;
  std::set<std::string> seen_;
};

af::Shape unknown_dims(const af::Shape& s) { return af::Shape(std::vector<int64_t>(static_cast<size_t>(s.rank()), -1)); }

// d build(xs) / d xs against central differences: with static shapes, with every dim
// of every x unknown (same rank), and with unknown ranks.
void check_grads(Claim& claim, const std::string& what, const std::vector<af::Tensor>& values, const Build& build,
                 double tol = 1e-6, const aft::GradCheckOptions& opts = {}) {
  const char* modes[] = {" (static shapes)", " (unknown dims)", " (unknown rank)"};
  for (int mode = 0; mode < 3; ++mode) {
    const std::string label = what + modes[mode];
    INFO(label);
    af::Graph g;
    Xs xs;
    for (size_t i = 0; i < values.size(); ++i) {
      const af::Shape& s = values[i].shape();
      xs.push_back(af::placeholder(g, af::f64, mode == 0 ? s : mode == 1 ? unknown_dims(s) : af::Shape::unknown_rank(),
                                   "x" + std::to_string(i)));
    }
    af::Output y = build(xs);
    claim.saw(g, g.num_nodes());
    CHECK(aft::gradient_error(g, y, xs, values, opts) <= tol);
  }
}

af::Tensor rnd(af::Shape s, double lo, double hi, uint32_t seed) { return aft::random_f64(std::move(s), lo, hi, seed); }

// Values in [-2, -0.3] U [0.3, 2]: away from the kinks of abs, relu and friends.
af::Tensor away_from_zero(af::Shape s, uint32_t seed) {
  af::Tensor t = rnd(std::move(s), -1.7, 1.7, seed);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    double& v = t.data<double>()[i];
    v = v < 0 ? v - 0.3 : v + 0.3;
  }
  return t;
}

af::Tensor f64s(std::vector<double> v, af::Shape s) { return af::Tensor::from_vector<double>(v, std::move(s)); }

// An op the DSL has no function for.
af::Output raw_op(const std::string& op, std::vector<af::Output> inputs, std::map<std::string, af::AttrValue> attrs = {}) {
  af::NodeSpec spec;
  spec.op = op;
  spec.name = op;
  spec.inputs = std::move(inputs);
  spec.attrs = std::move(attrs);
  auto r = spec.inputs[0].graph()->add_node(std::move(spec));
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  return r->output(0);
}

af::Output i64s(af::Graph& g, std::vector<int64_t> v, af::Shape s) { return af::constant(g, v, std::move(s), "indices"); }

}  // namespace

TEST_CASE("gradient check: unary math") {
  Claim claim("unary math");
  const af::Shape s{2, 3};
  auto mixed = away_from_zero(s, 11);
  auto pos = rnd(s, 0.5, 2.0, 12);
  check_grads(claim, "neg", {mixed}, [](const Xs& x) { return af::neg(x[0]); });
  check_grads(claim, "abs", {mixed}, [](const Xs& x) { return af::abs(x[0]); });
  check_grads(claim, "exp", {mixed}, [](const Xs& x) { return af::exp(x[0]); });
  check_grads(claim, "log", {pos}, [](const Xs& x) { return af::log(x[0]); });
  check_grads(claim, "sqrt", {pos}, [](const Xs& x) { return af::sqrt(x[0]); });
  check_grads(claim, "rsqrt", {pos}, [](const Xs& x) { return af::rsqrt(x[0]); });
  check_grads(claim, "square", {mixed}, [](const Xs& x) { return af::square(x[0]); });
  check_grads(claim, "a chain on a scalar", {af::Tensor::scalar(0.7)},
              [](const Xs& x) { return af::log(af::square(x[0]) + 1.0) * af::exp(af::neg(x[0])); });
  claim.verify();
}

TEST_CASE("gradient check: activations") {
  Claim claim("activations");
  auto mixed = away_from_zero({3, 4}, 21);
  check_grads(claim, "relu", {mixed}, [](const Xs& x) { return af::relu(x[0]); });
  check_grads(claim, "sigmoid", {mixed}, [](const Xs& x) { return af::sigmoid(x[0]); });
  check_grads(claim, "tanh", {mixed}, [](const Xs& x) { return af::tanh(x[0]); });
  check_grads(claim, "softplus", {mixed}, [](const Xs& x) { return af::softplus(x[0]); });
  claim.verify();
}

TEST_CASE("gradient check: softmax and log_softmax over the last axis") {
  Claim claim("softmax");
  check_grads(claim, "softmax 2-D", {rnd({2, 4}, -2, 2, 31)}, [](const Xs& x) { return af::softmax(x[0]); });
  check_grads(claim, "softmax 3-D", {rnd({2, 2, 3}, -2, 2, 32)}, [](const Xs& x) { return af::softmax(x[0]); });
  check_grads(claim, "log_softmax 2-D", {rnd({2, 4}, -2, 2, 33)}, [](const Xs& x) { return af::log_softmax(x[0]); });
  check_grads(claim, "log_softmax 1-D", {rnd({5}, -2, 2, 34)}, [](const Xs& x) { return af::log_softmax(x[0]); });
  claim.verify();
}

TEST_CASE("gradient check: identity, placeholder_with_default, float casts") {
  Claim claim("pass-through");
  auto v = rnd({2, 3}, -1, 1, 41);
  check_grads(claim, "identity", {v}, [](const Xs& x) { return af::identity(x[0]) * x[0]; });
  check_grads(claim, "placeholder_with_default", {v},
              [](const Xs& x) { return af::square(af::placeholder_with_default(x[0], x[0].shape())); });
  check_grads(claim, "cast f64 -> f64", {v}, [](const Xs& x) { return af::cast(x[0], af::f64) * 3.0; });
  claim.verify();
}

TEST_CASE("cast: float-to-float casts pass the gradient, casts through integers block it") {
  af::Graph g;
  auto x = af::placeholder(g, af::f64, {3}, "x");
  auto through_f32 = af::cast(af::cast(x, af::f32), af::f64) * 3.0;
  auto through_int = af::cast(af::cast(x, af::i32), af::f64);
  auto d = af::gradients({af::reduce_sum(through_f32 + through_int)}, {x});
  REQUIRE(d[0].valid());
  CHECK(d[0].dtype() == af::f64);
  aft::check_close(aft::eval1(g, d[0], {{x, f64s({0.5, 1.5, -2.5}, {3})}}), {3, 3, 3});
  auto only_int = af::gradients({af::reduce_sum(through_int)}, {x});
  CHECK_FALSE(only_int[0].valid());
}

TEST_CASE("gradient check: binary ops with broadcasting") {
  Claim claim("binary");
  const std::vector<std::pair<af::Shape, af::Shape>> shapes = {
      {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{2, 1}, {1, 3}}, {{}, {2, 3}}, {{3, 1, 2}, {2, 1}}};
  uint32_t seed = 50;
  for (auto& [sa, sb] : shapes) {
    const std::string dims = sa.to_string() + " and " + sb.to_string();
    auto a = away_from_zero(sa, ++seed), b = away_from_zero(sb, ++seed);
    auto a_pos = rnd(sa, 0.5, 2.0, ++seed);
    check_grads(claim, "add " + dims, {a, b}, [](const Xs& x) { return x[0] + x[1]; });
    check_grads(claim, "sub " + dims, {a, b}, [](const Xs& x) { return x[0] - x[1]; });
    check_grads(claim, "mul " + dims, {a, b}, [](const Xs& x) { return x[0] * x[1]; });
    check_grads(claim, "div " + dims, {a, b}, [](const Xs& x) { return x[0] / x[1]; });
    check_grads(claim, "pow " + dims, {a_pos, b}, [](const Xs& x) { return af::pow(x[0], x[1]); });
    check_grads(claim, "maximum " + dims, {a, b}, [](const Xs& x) { return af::maximum(x[0], x[1]); });
    check_grads(claim, "minimum " + dims, {a, b}, [](const Xs& x) { return af::minimum(x[0], x[1]); });
    check_grads(claim, "squared_difference " + dims, {a, b},
                [](const Xs& x) { return raw_op("SquaredDifference", {x[0], x[1]}); });
  }
  check_grads(claim, "add_n", {rnd({2, 2}, -1, 1, 71), rnd({2, 2}, -1, 1, 72)},
              [](const Xs& x) { return af::add_n({x[0], x[0] * x[1], x[1]}); });
  claim.verify();
}

TEST_CASE("maximum/minimum: ties send the gradient to the first input") {
  af::Graph g;
  auto a = af::placeholder(g, af::f64, {3}, "a");
  auto b = af::placeholder(g, af::f64, {3}, "b");
  auto d = af::gradients({af::reduce_sum(af::maximum(a, b) + af::minimum(a, b) * 10.0)}, {a, b});
  auto out = aft::eval(g, {d[0], d[1]}, {{a, f64s({1, 2, 3}, {3})}, {b, f64s({0, 2, 4}, {3})}});
  aft::check_close(out[0], {1, 11, 10});
  aft::check_close(out[1], {10, 0, 1});
}

TEST_CASE("gradient check: reductions over all, one and several axes, with and without keepdims") {
  Claim claim("reductions");
  using Reduce = af::Output (*)(const af::Output&, std::vector<int64_t>, bool, const std::string&);
  const std::vector<std::pair<std::string, Reduce>> ops = {{"sum", af::reduce_sum},
                                                           {"mean", af::reduce_mean},
                                                           {"max", af::reduce_max},
                                                           {"min", af::reduce_min},
                                                           {"prod", af::reduce_prod}};
  const std::vector<std::vector<int64_t>> axes_list = {{}, {1}, {0, -1}};
  auto v = away_from_zero({2, 3, 2}, 81);
  for (auto& [name, fn] : ops)
    for (auto& axes : axes_list)
      for (bool keep : {false, true}) {
        std::string what = name + " axes [";
        for (auto a : axes) what += std::to_string(a) + " ";
        what += keep ? "] keepdims" : "]";
        check_grads(claim, what, {v}, [fn = fn, axes = axes, keep](const Xs& x) { return fn(x[0], axes, keep, "R"); });
      }
  // Prod is smooth through zeros: one zero in a group, and two.
  auto z = f64s({0.5, 0, 2, -1.5, 0, 0, 3, 1.25}, {2, 4});
  check_grads(claim, "prod with zeros", {z}, [](const Xs& x) { return af::reduce_prod(x[0], {1}); });
  claim.verify();
}

TEST_CASE("max/min split the gradient equally between ties; prod handles zeros") {
  af::Graph g;
  auto x = af::placeholder(g, af::f64, {2, 3}, "x");
  auto dmax = af::gradients({af::reduce_sum(af::reduce_max(x, {1}) * af::constant(g, f64s({1, 2}, {2})))}, {x});
  auto dmin = af::gradients({af::reduce_min(x)}, {x});
  auto dprod = af::gradients({af::reduce_sum(af::reduce_prod(x, {1}, true))}, {x});
  auto out = aft::eval(g, {dmax[0], dmin[0], dprod[0]}, {{x, f64s({3, 1, 3, 0, 5, 0}, {2, 3})}});
  aft::check_close(out[0], {0.5, 0, 0.5, 0, 2, 0});
  aft::check_close(out[1], {0, 0, 0, 0.5, 0, 0.5});
  aft::check_close(out[2], {3, 9, 3, 0, 0, 0});
  aft::check_close(aft::eval1(g, dprod[0], {{x, f64s({3, 1, 3, 0, 5, 2}, {2, 3})}}), {3, 9, 3, 10, 0, 0});
}

TEST_CASE("gradient check: matmul, every transpose combination, batched with broadcast batch dims") {
  Claim claim("matmul");
  const int64_t m = 2, k = 3, n = 2;
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> batches = {
      {{}, {}}, {{2}, {}}, {{}, {2}}, {{2, 1}, {3}}, {{1}, {2}}};
  uint32_t seed = 90;
  for (auto& [ba, bb] : batches)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        std::vector<int64_t> da = ba, db = bb;
        da.insert(da.end(), {ta ? k : m, ta ? m : k});
        db.insert(db.end(), {tb ? n : k, tb ? k : n});
        af::Shape sa(da), sb(db);
        std::string what = "matmul " + sa.to_string() + (ta ? "^T" : "") + " x " + sb.to_string() + (tb ? "^T" : "");
        check_grads(claim, what, {rnd(sa, -1, 1, ++seed), rnd(sb, -1, 1, ++seed)},
                    [ta = ta, tb = tb](const Xs& x) { return af::matmul(x[0], x[1], ta, tb); });
      }
  claim.verify();
}

TEST_CASE("gradient check: reshape, transpose, expand_dims, squeeze") {
  Claim claim("reshape");
  auto v = rnd({2, 3}, -1, 1, 101);
  auto v3 = rnd({2, 3, 2}, -1, 1, 102);
  auto ones = rnd({2, 1, 3, 1}, -1, 1, 103);
  check_grads(claim, "reshape", {v}, [](const Xs& x) { return af::reshape(x[0], {3, 2}); });
  check_grads(claim, "reshape -1", {v3}, [](const Xs& x) { return af::reshape(x[0], {-1, 4}); });
  check_grads(claim, "transpose", {v3}, [](const Xs& x) { return af::transpose(x[0], {1, 2, 0}); });
  check_grads(claim, "transpose reversed", {v3}, [](const Xs& x) { return af::transpose(x[0]); });
  check_grads(claim, "expand_dims 1", {v}, [](const Xs& x) { return af::expand_dims(x[0], 1); });
  check_grads(claim, "expand_dims -1", {v}, [](const Xs& x) { return af::expand_dims(x[0], -1); });
  check_grads(claim, "expand_dims -3", {v}, [](const Xs& x) { return af::expand_dims(x[0], -3); });
  check_grads(claim, "squeeze axis", {ones}, [](const Xs& x) { return af::squeeze(x[0], {-1}); });
  check_grads(claim, "squeeze all", {ones}, [](const Xs& x) { return af::squeeze(x[0]); });
  claim.verify();
}

TEST_CASE("gradient check: concat, split, split with sizes") {
  Claim claim("concat split");
  auto a = rnd({2, 2}, -1, 1, 111), b = rnd({2, 3}, -1, 1, 112), c = rnd({1, 2}, -1, 1, 113);
  auto v = rnd({2, 6}, -1, 1, 114);
  check_grads(claim, "concat axis 1", {a, b}, [](const Xs& x) { return af::concat({x[0], x[1], x[0]}, 1); });
  check_grads(claim, "concat axis -2", {a, c}, [](const Xs& x) { return af::concat({x[0], x[1]}, -2); });
  check_grads(claim, "concat of one", {a}, [](const Xs& x) { return af::concat({x[0]}, 0) * x[0]; });
  check_grads(claim, "split, all parts used", {v}, [](const Xs& x) {
    auto p = af::split(x[0], 3, 1);
    return p[0] * p[1] + p[2];
  });
  check_grads(claim, "split, one part used", {v}, [](const Xs& x) { return af::split(x[0], 2, -1)[1]; });
  check_grads(claim, "split_v", {v}, [](const Xs& x) {
    auto p = af::split(x[0], std::vector<int64_t>{1, -1, 2}, 1);
    return af::concat({p[2], p[0]}, 1) * 2.0 + af::reduce_sum(p[1]);
  });
  claim.verify();
}

TEST_CASE("gradient check: slice, pad, tile") {
  Claim claim("slice pad tile");
  auto v = rnd({3, 4}, -1, 1, 121);
  auto small = rnd({2, 2}, -1, 1, 122);
  check_grads(claim, "slice", {v}, [](const Xs& x) { return af::slice(x[0], {0, 1}, {2, 2}); });
  check_grads(claim, "slice to the end", {v}, [](const Xs& x) { return af::slice(x[0], {1, 0}, {-1, 3}); });
  check_grads(claim, "pad", {small}, [](const Xs& x) { return af::pad(x[0], {{1, 0}, {2, 1}}, 0.5); });
  check_grads(claim, "tile", {small}, [](const Xs& x) { return af::tile(x[0], {2, 3}); });
  check_grads(claim, "tile rank 3", {rnd({1, 2, 3}, -1, 1, 123)}, [](const Xs& x) { return af::tile(x[0], {3, 1, 2}); });
  check_grads(claim, "tile scalar", {af::Tensor::scalar(0.25)}, [](const Xs& x) { return af::tile(x[0], {}) * x[0]; });
  claim.verify();
}

TEST_CASE("gradient check: gather on axis 0 (sparse), other axes (dense), repeated indices") {
  Claim claim("gather");
  auto p = rnd({4, 3}, -1, 1, 131);
  auto p3 = rnd({2, 3, 2}, -1, 1, 132);
  auto g0 = [](const Xs& x) { return af::gather(x[0], i64s(*x[0].graph(), {2, 0, 2, 3}, {4}), 0); };
  check_grads(claim, "axis 0", {p}, g0);
  check_grads(claim, "axis 0, 2-D indices", {p}, [](const Xs& x) {
    return af::gather(x[0], i64s(*x[0].graph(), {1, 1, 3, 0}, {2, 2}), 0);
  });
  check_grads(claim, "axis -2 is axis 0", {p}, [](const Xs& x) {
    return af::gather(x[0], i64s(*x[0].graph(), {3, 3}, {2}), -2);
  });
  check_grads(claim, "scalar index, i32", {p}, [](const Xs& x) {
    return af::gather(x[0], af::constant(*x[0].graph(), af::Tensor::scalar(int32_t{2})), 0);
  });
  check_grads(claim, "axis 1", {p}, [](const Xs& x) { return af::gather(x[0], i64s(*x[0].graph(), {2, 0, 2}, {3}), 1); });
  check_grads(claim, "axis -1 of rank 3", {p3}, [](const Xs& x) {
    return af::gather(x[0], i64s(*x[0].graph(), {1, 1, 0}, {3, 1}), -1);
  });
  check_grads(claim, "a gathered value used twice", {p},
              [g0](const Xs& x) { return g0(x) * af::gather(x[0], i64s(*x[0].graph(), {0}, {1}), 0); });
  claim.verify();
}

TEST_CASE("gradient check: select with broadcast condition and branches") {
  Claim claim("select");
  auto a = rnd({2, 3}, -1, 1, 141), b = rnd({3}, -1, 1, 142);
  check_grads(claim, "select", {a, b}, [](const Xs& x) {
    auto cond = af::constant(*x[0].graph(), af::Tensor::from_vector<bool>({true, false, false, true, true, false}, {2, 3}));
    return af::where(cond, x[0], x[1]);
  });
  check_grads(claim, "select, column condition, scalar branch", {a, af::Tensor::scalar(0.75)}, [](const Xs& x) {
    auto cond = af::constant(*x[0].graph(), af::Tensor::from_vector<bool>({false, true}, {2, 1}));
    return af::where(cond, x[0], x[1]) * x[1];
  });
  claim.verify();
}

TEST_CASE("gradient check: dropout in training (a fixed mask per session) and with a fed flag") {
  Claim claim("dropout");
  aft::GradCheckOptions fresh;
  fresh.fresh_session_per_run = true;
  auto xv = away_from_zero({4, 6}, 151);
  // The mask must drop some elements and keep others, or the check proves little.
  {
    af::Graph g;
    auto x = af::placeholder(g, af::f64, {4, 6}, "x");
    auto y = af::dropout(x, 0.5, true, 5);
    auto out = aft::eval(g, {af::Output(&g, y.node_id(), 1)}, {{x, xv}});
    int dropped = 0;
    for (int64_t i = 0; i < out[0].num_elements(); ++i) dropped += out[0].data<double>()[i] == 0;
    CHECK(dropped > 0);
    CHECK(dropped < 24);
  }
  check_grads(claim, "dropout keep 0.5", {xv}, [](const Xs& x) { return af::dropout(x[0], 0.5, true, 5) * x[0]; },
              1e-6, fresh);
  for (bool training : {true, false}) {
    CAPTURE(training);
    check_grads(claim, "dropout, training fed", {xv}, [training](const Xs& x) {
      auto flag = af::placeholder_with_default(af::constant(*x[0].graph(), af::Tensor::scalar(training)), af::Shape{}, "training");
      return af::dropout(x[0], 0.7, flag, 9);
    }, 1e-6, fresh);
  }
  claim.verify();
}

TEST_CASE("gradient check: BroadcastReduced and SumToShapeOf, the ops reduction gradients build") {
  Claim claim("gradient support");
  auto x = rnd({2, 3, 4}, -1, 1, 161);
  struct Case {
    std::vector<int64_t> axes;
    af::Shape reduced;  // the gradient of the reduction: keepdims or not
    bool mean;
  };
  for (const Case& c : {Case{{1}, {2, 4}, false}, Case{{1}, {2, 1, 4}, true}, Case{{0, 2}, {3}, true},
                        Case{{0, 2}, {1, 3, 1}, false}, Case{{}, {}, false}, Case{{}, {}, true}}) {
    CAPTURE(c.reduced.to_string());
    CAPTURE(c.mean);
    // y = BroadcastReduced(g, x) * x: the op's gradient flows to g; x only lends its shape,
    // so the product gives x a gradient too.
    check_grads(claim, "BroadcastReduced", {rnd(c.reduced, -1, 1, 162), x}, [&c](const Xs& v) {
      return raw_op("BroadcastReduced", {v[0], v[1]}, {{"axes", af::AttrValue::Ints(c.axes)}, {"mean", c.mean}}) * v[1];
    });
  }
  // SumToShapeOf(g, like) sums a broadcast gradient back to like's shape.
  check_grads(claim, "SumToShapeOf", {rnd({2, 3}, -1, 1, 163), rnd({3}, -1, 1, 164)}, [](const Xs& v) {
    return raw_op("SumToShapeOf", {v[0], v[1]}) * v[1];
  });
  check_grads(claim, "SumToShapeOf to a scalar", {rnd({2, 3}, -1, 1, 165), af::Tensor::scalar(0.5)}, [](const Xs& v) {
    return raw_op("SumToShapeOf", {v[0], v[1]}) * v[1];
  });
  claim.verify();
}

TEST_CASE("gather of a variable: the gradient is sparse, and densified equals the dense one") {
  af::Graph g;
  auto emb = af::variable(g, rnd({5, 3}, -1, 1, 151), "emb");
  auto idx = i64s(g, {1, 3, 1, 4}, {2, 2});
  auto r = af::constant(g, rnd({2, 2, 3}, 0.5, 1.5, 152), "r");
  auto loss = af::reduce_sum(af::gather(emb, idx) * r);
  auto sparse = af::gradients_sparse({loss}, {emb});
  REQUIRE(sparse[0].sparse());
  CHECK(sparse[0].indices.shape() == af::Shape{4});
  CHECK(sparse[0].values.shape() == af::Shape{4, 3});
  // Reference: the same lookup as a one-hot product, whose gradient is dense.
  auto one_hot = af::one_hot(af::reshape(idx, {-1}), 5, 1, 0, af::f64);
  auto ref_loss = af::reduce_sum(af::reshape(af::matmul(one_hot, emb), {2, 2, 3}) * r);
  auto ref = af::gradients({ref_loss}, {emb});
  auto dense = af::gradients({loss}, {emb});
  auto out = aft::eval(g, {sparse[0].indices, sparse[0].values, af::densify(sparse[0], emb), ref[0], dense[0], r});
  CHECK(out[0].to_vector<int64_t>() == std::vector<int64_t>{1, 3, 1, 4});
  aft::check_close(out[1], out[5].to_vector<double>(), 1e-12);
  const std::vector<double> want = out[3].to_vector<double>();
  aft::check_close(out[2], want, 1e-12);
  aft::check_close(out[4], want, 1e-12);
  // Row 1 was gathered twice: its two rows of r add up; rows 0 and 2 get nothing.
  const auto rv = out[5].to_vector<double>();
  for (int j = 0; j < 3; ++j) {
    CHECK(want[static_cast<size_t>(3 + j)] == doctest::Approx(rv[static_cast<size_t>(j)] + rv[static_cast<size_t>(6 + j)]));
    CHECK(want[static_cast<size_t>(j)] == 0);
    CHECK(want[static_cast<size_t>(6 + j)] == 0);
  }
}

TEST_CASE("gradients with unknown dims: a placeholder {-1, 3} through a small network") {
  af::Graph g;
  auto x = af::placeholder(g, af::f64, {-1, 3}, "x");
  auto w = af::placeholder(g, af::f64, {3, 2}, "w");
  auto b = af::placeholder(g, af::f64, {2}, "b");
  auto h = af::tanh(af::matmul(x, w) + b);                                    // [?, 2]
  auto z = af::concat({h, af::slice(x, {0, 1}, {-1, 2}) * 0.5}, 1);            // [?, 4]
  auto y = af::reduce_mean(af::reshape(af::log_softmax(z), {-1}));
  auto d = af::gradients({y}, {x, w, b});
  CHECK(d[0].shape() == af::Shape{-1, 3});
  CHECK(d[1].shape() == af::Shape{3, 2});
  CHECK(d[2].shape() == af::Shape{2});
  auto wv = rnd({3, 2}, -1, 1, 161), bv = rnd({2}, -1, 1, 162);
  for (int64_t batch : {1, 4}) {
    CAPTURE(batch);
    auto xv = rnd({batch, 3}, -1, 1, 163);
    auto out = aft::eval(g, {d[0], d[1], d[2]}, {{x, xv}, {w, wv}, {b, bv}});
    CHECK(out[0].shape() == af::Shape{batch, 3});
    CHECK(out[1].shape() == af::Shape{3, 2});
    CHECK(aft::gradient_error(g, y, {x, w, b}, {xv, wv, bv}) <= 1e-6);
  }
}

TEST_CASE("every op with a registered gradient is gradient-checked") {
  std::set<std::string> covered;
  for (auto& [name, ops] : claims()) covered.insert(ops.begin(), ops.end());
  const auto registered = af::GradientRegistry::global().ops_with_gradients();
  const std::set<std::string> with_grad(registered.begin(), registered.end());
  for (const auto& op : registered)
    CHECK_MESSAGE((covered.count(op) == 1 || checked_elsewhere().count(op) == 1), "no gradient check covers op " << op);
  // And every claimed op really has a gradient (a stale claim would hide a missing one).
  for (const auto& op : covered) CHECK_MESSAGE(with_grad.count(op) == 1, op << " is claimed but has no gradient");
  for (const auto& [op, file] : checked_elsewhere()) {
    CHECK_MESSAGE(with_grad.count(op) == 1, op << " is said to be checked in " << file << " but has no gradient");
    CHECK_MESSAGE(covered.count(op) == 0, op << " is claimed here and in " << file);
    // The file named runs finite-difference checks.
    std::ifstream f(std::string(AF_SOURCE_DIR) + "/tests/" + file);
    std::string text(std::istreambuf_iterator<char>(f), {});
    CHECK_MESSAGE(text.find("aft::gradient_error(") != std::string::npos, file << " runs no gradient_error for " << op);
  }
  CHECK(covered.size() >= 43);
}

TEST_CASE("sparse gradients of two gathers (i32 and i64 indices) of one variable aggregate") {
  af::Graph g;
  auto emb = af::variable(g, rnd({4, 2}, -1, 1, 171), "emb");
  auto a = af::gather(emb, af::constant(g, af::Tensor::from_vector<int32_t>({3, 0})));
  auto b = af::gather(emb, i64s(g, {0}, {1}));
  auto loss = af::reduce_sum(a) + af::reduce_sum(b * 2.0);
  auto sparse = af::gradients_sparse({loss}, {emb});
  REQUIRE(sparse[0].sparse());
  CHECK(sparse[0].indices.dtype() == af::i64);
  auto out = aft::eval(g, {sparse[0].indices, af::densify(sparse[0], emb)});
  CHECK(out[0].num_elements() == 3);
  aft::check_close(out[1], {3, 3, 0, 0, 0, 0, 1, 1});
}
