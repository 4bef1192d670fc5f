// The gradient support ops of ops/defs/grad_more_ops.cpp on their own: hand-computed
// values, empty tensors and scalars, unknown dims, build-time and run-time errors.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "test_util.h"

namespace af = actorflow;

namespace {

af::Output f64s(af::Graph& g, std::vector<double> v, af::Shape s, const std::string& name = "Const") {
  return af::constant(g, af::Tensor::from_vector<double>(v, std::move(s)), name);
}
af::Output i64s(af::Graph& g, std::vector<int64_t> v, af::Shape s) { return af::constant(g, v, std::move(s), "indices"); }

af::Result<af::Operation> try_op(const std::string& op, std::vector<af::Output> inputs,
                                 std::map<std::string, af::AttrValue> attrs = {}) {
  af::NodeSpec spec;
  spec.op = op;
  spec.name = op;
  spec.inputs = std::move(inputs);
  spec.attrs = std::move(attrs);
  return spec.inputs[0].graph()->add_node(std::move(spec));
}

af::Output op1(const std::string& op, std::vector<af::Output> inputs, std::map<std::string, af::AttrValue> attrs = {}) {
  auto r = try_op(op, std::move(inputs), std::move(attrs));
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  return r->output(0);
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The build-time error message, or "" if the node was added.
std::string build_error(const std::string& op, std::vector<af::Output> inputs,
                        std::map<std::string, af::AttrValue> attrs = {}) {
  auto r = try_op(op, std::move(inputs), std::move(attrs));
  return r.ok() ? "" : r.status().to_string();
}

af::Output ph(af::Graph& g, af::Shape s, const std::string& name) { return af::placeholder(g, af::f64, std::move(s), name); }

af::Tensor t64(std::vector<double> v, af::Shape s) { return af::Tensor::from_vector<double>(v, std::move(s)); }

}  // namespace

TEST_CASE("ReshapeLike: x's elements in like's runtime shape") {
  af::Graph g;
  auto x = ph(g, {-1}, "x");
  auto like = ph(g, {-1, 2}, "like");
  auto y = op1("ReshapeLike", {x, like});
  CHECK(y.shape() == af::Shape{-1, 2});
  auto out = aft::eval1(g, y, {{x, t64({1, 2, 3, 4, 5, 6}, {6})}, {like, af::Tensor::zeros(af::f64, {3, 2})}});
  CHECK(out.shape() == af::Shape{3, 2});
  aft::check_close(out, {1, 2, 3, 4, 5, 6});
  auto st = aft::eval_status(g, y, {{x, t64({1, 2, 3}, {3})}, {like, af::Tensor::zeros(af::f64, {2, 2})}});
  CHECK_FALSE(st.ok());
  CHECK(contains(st.to_string(), "cannot reshape"));
  // Both shapes known: a mismatch is a build-time error naming both inputs.
  auto msg = build_error("ReshapeLike", {f64s(g, {1, 2, 3}, {3}, "three"), f64s(g, {1, 2}, {2}, "two")});
  CHECK(contains(msg, "'three'"));
  CHECK(contains(msg, "'two'"));
}

TEST_CASE("PadLike and SliceLike: a block at `begin`, zeros around it; and back") {
  af::Graph g;
  auto small = f64s(g, {1, 2, 3, 4}, {2, 2}, "small");
  auto big = ph(g, {-1, -1}, "big");
  auto padded = op1("PadLike", {small, big}, {{"begin", af::AttrValue::Ints{1, 0}}});
  auto sliced = op1("SliceLike", {padded, small}, {{"begin", af::AttrValue::Ints{1, 0}}});
  CHECK(padded.shape() == af::Shape{-1, -1});
  CHECK(sliced.shape() == af::Shape{2, 2});
  auto out = aft::eval(g, {padded, sliced}, {{big, af::Tensor::zeros(af::f64, {3, 3})}});
  aft::check_close(out[0], {0, 0, 0, 1, 2, 0, 3, 4, 0});
  aft::check_close(out[1], {1, 2, 3, 4});
  // Does not fit at run time.
  auto st = aft::eval_status(g, padded, {{big, af::Tensor::zeros(af::f64, {2, 3})}});
  CHECK_FALSE(st.ok());
  CHECK(contains(st.to_string(), "does not fit"));
  // Scalars and empty blocks.
  auto s = f64s(g, {7}, {}, "s");
  aft::check_close(aft::eval1(g, op1("PadLike", {s, s}, {{"begin", af::AttrValue::Ints{}}})), {7});
  auto empty = af::constant(g, af::Tensor::zeros(af::f64, {0, 2}), "empty");
  aft::check_close(aft::eval1(g, op1("PadLike", {empty, small}, {{"begin", af::AttrValue::Ints{2, 0}}})), {0, 0, 0, 0});
  // Build-time errors: rank, fit, bad attribute kind, non-float gradient.
  auto big3 = f64s(g, std::vector<double>(9, 0), {3, 3}, "big3");
  CHECK(contains(build_error("PadLike", {small, big3}, {{"begin", af::AttrValue::Ints{0}}}), "'begin'"));
  CHECK(contains(build_error("PadLike", {small, big3}, {{"begin", af::AttrValue::Ints{2, 0}}}), "'big3'"));
  CHECK(contains(build_error("SliceLike", {small, big3}, {{"begin", af::AttrValue::Ints{0, 0}}}), "does not fit"));
  CHECK(contains(build_error("PadLike", {small, big3}, {{"begin", std::string("x")}}), "list of integers"));
  CHECK(contains(build_error("PadLike", {small, big3}, {{"begin", af::AttrValue::Ints{-1, 0}}}), "negative"));
  CHECK(contains(build_error("PadLike", {i64s(g, {1}, {1}), i64s(g, {1}, {1})}, {{"begin", af::AttrValue::Ints{0}}}),
                 "floating point"));
}

TEST_CASE("SplitLike: a gradient cut along an axis like each part") {
  af::Graph g;
  auto grad = f64s(g, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 6}, "grad");
  auto a = ph(g, {2, -1}, "a");
  auto b = ph(g, {2, -1}, "b");
  auto c = ph(g, {2, -1}, "c");
  auto r = try_op("SplitLike", {grad, a, b, c}, {{"axis", int64_t{-1}}});
  REQUIRE(r.ok());
  REQUIRE(r->node().num_outputs() == 3);
  af::FeedDict feeds = {{a, af::Tensor::zeros(af::f64, {2, 1})},
                        {b, af::Tensor::zeros(af::f64, {2, 3})},
                        {c, af::Tensor::zeros(af::f64, {2, 2})}};
  auto out = aft::eval(g, {r->output(0), r->output(1), r->output(2)}, feeds);
  aft::check_close(out[0], {1, 7});
  aft::check_close(out[1], {2, 3, 4, 8, 9, 10});
  aft::check_close(out[2], {5, 6, 11, 12});
  feeds[2].second = af::Tensor::zeros(af::f64, {2, 1});
  auto st = aft::eval_status(g, r->output(0), feeds);
  CHECK_FALSE(st.ok());
  CHECK(contains(st.to_string(), "add up to 5"));
  CHECK(contains(build_error("SplitLike", {grad, f64s(g, {1}, {1}, "rank1")}), "'rank1'"));
  CHECK(contains(build_error("SplitLike", {grad, a}, {{"axis", int64_t{2}}}), "out of range"));
}

TEST_CASE("TileGrad sums the tiles back onto the input") {
  af::Graph g;
  // [1, 2] tiled by [2, 2] -> [2, 4]; every input element collects 4 values.
  auto grad = f64s(g, {1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}, "grad");
  auto like = ph(g, {-1, -1}, "like");
  auto y = op1("TileGrad", {grad, like}, {{"multiples", af::AttrValue::Ints{2, 2}}});
  aft::check_close(aft::eval1(g, y, {{like, af::Tensor::zeros(af::f64, {1, 2})}}), {1 + 3 + 5 + 7, 2 + 4 + 6 + 8});
  auto st = aft::eval_status(g, y, {{like, af::Tensor::zeros(af::f64, {2, 2})}});
  CHECK_FALSE(st.ok());
  CHECK(contains(st.to_string(), "tiled by [2,2]"));
  // A zero multiple: the input gets zeros.
  auto empty = af::constant(g, af::Tensor::zeros(af::f64, {0, 2}), "empty");
  auto untiled = op1("TileGrad", {empty, f64s(g, {5, 5}, {1, 2})}, {{"multiples", af::AttrValue::Ints{0, 1}}});
  aft::check_close(aft::eval1(g, untiled), {0, 0});
  CHECK(contains(build_error("TileGrad", {grad, like}, {{"multiples", af::AttrValue::Ints{2}}}), "'multiples'"));
  CHECK(contains(build_error("TileGrad", {grad, like}, {{"multiples", af::AttrValue::Ints{-1, 2}}}), "negative"));
}

TEST_CASE("GatherGrad scatter-adds rows along an axis; GatherGradValues makes one row per index") {
  af::Graph g;
  auto params = ph(g, {2, -1}, "params");
  // gather(params, [2, 0, 2], axis 1) of a [2, 3] params gives [2, 3].
  auto grad = f64s(g, {1, 2, 3, 4, 5, 6}, {2, 3}, "grad");
  auto idx = i64s(g, {2, 0, 2}, {3});
  auto dense = op1("GatherGrad", {grad, idx, params}, {{"axis", int64_t{1}}});
  CHECK(dense.shape() == af::Shape{2, -1});
  af::FeedDict feeds = {{params, af::Tensor::zeros(af::f64, {2, 3})}};
  aft::check_close(aft::eval1(g, dense, feeds), {2, 0, 1 + 3, 5, 0, 4 + 6});
  // Index 2 is out of range for a [2, 2] params: an error naming it, not a stray write.
  auto st = aft::eval_status(g, dense, {{params, af::Tensor::zeros(af::f64, {2, 2})}});
  CHECK_FALSE(st.ok());
  CHECK(contains(st.to_string(), "index 2 is not in [0, 2)"));
  // Empty indices: all zeros.
  auto none = op1("GatherGrad", {af::constant(g, af::Tensor::zeros(af::f64, {0, 3}), "g0"),
                                 af::constant(g, af::Tensor::zeros(af::i64, {0}), "i0"), f64s(g, {1, 2, 3}, {1, 3})});
  aft::check_close(aft::eval1(g, none), {0, 0, 0});
  CHECK(contains(build_error("GatherGrad", {grad, idx, params}, {{"axis", int64_t{2}}}), "out of range"));
  CHECK(contains(build_error("GatherGrad", {grad, grad, params}), "must be one of"));

  auto values = op1("GatherGradValues", {f64s(g, std::vector<double>(12, 1), {2, 2, 3}), i64s(g, {0, 1, 0, 1}, {2, 2})});
  CHECK(values.shape() == af::Shape{4, 3});
  CHECK(aft::eval1(g, values).shape() == af::Shape{4, 3});
  auto scalar_index = op1("GatherGradValues", {f64s(g, {1, 2}, {2}), i64s(g, {0}, {})});
  CHECK(aft::eval1(g, scalar_index).shape() == af::Shape{1, 2});
  CHECK(contains(build_error("GatherGradValues", {f64s(g, {1, 2}, {2}), i64s(g, {0, 1, 0, 1}, {2, 2})}), "lower rank"));
}

TEST_CASE("ProdOfOthers: the product of the rest of each reduction group, zeros included") {
  af::Graph g;
  auto x = f64s(g, {2, 0, 3, 4, 5, 0}, {2, 3}, "x");
  auto rows = op1("ProdOfOthers", {x}, {{"axes", af::AttrValue::Ints{-1}}});
  auto cols = op1("ProdOfOthers", {x}, {{"axes", af::AttrValue::Ints{0}}});
  auto all = op1("ProdOfOthers", {x});
  auto out = aft::eval(g, {rows, cols, all});
  aft::check_close(out[0], {0, 6, 0, 0, 0, 20});
  aft::check_close(out[1], {4, 5, 0, 2, 0, 3});
  aft::check_close(out[2], {0, 0, 0, 0, 0, 0});
  aft::check_close(aft::eval1(g, op1("ProdOfOthers", {f64s(g, {3}, {})})), {1});
  auto empty = af::constant(g, af::Tensor::zeros(af::f64, {0, 2}), "e");
  CHECK(aft::eval1(g, op1("ProdOfOthers", {empty}, {{"axes", af::AttrValue::Ints{0}}})).num_elements() == 0);
  CHECK(contains(build_error("ProdOfOthers", {x}, {{"axes", af::AttrValue::Ints{2}}}), "out of range"));
  CHECK(contains(build_error("ProdOfOthers", {x}, {{"axes", std::string("x")}}), "list of integers"));
}

TEST_CASE("support ops survive hostile attributes and shapes: an error or a result, never a crash") {
  const std::vector<std::pair<std::string, int>> ops = {{"ReshapeLike", 2}, {"PadLike", 2},    {"SliceLike", 2},
                                                        {"SplitLike", 3},   {"TileGrad", 2},   {"GatherGrad", 3},
                                                        {"GatherGradValues", 2}, {"ProdOfOthers", 1}};
  const int64_t huge = int64_t{1} << 62;
  const std::vector<af::AttrValue> values = {af::AttrValue(),
                                             af::AttrValue(std::string("x")),
                                             af::AttrValue(int64_t{1}),
                                             af::AttrValue(int64_t{-7}),
                                             af::AttrValue(af::AttrValue::Ints{}),
                                             af::AttrValue(af::AttrValue::Ints{1, 0}),
                                             af::AttrValue(af::AttrValue::Ints{huge, -huge}),
                                             af::AttrValue(af::AttrValue::Ints{3, 1})};
  const std::vector<af::Shape> shapes = {af::Shape::unknown_rank(), af::Shape{-1, -1}, af::Shape{2, 3}};
  int built = 0, ran = 0;
  for (auto& [op, arity] : ops)
    for (const auto& attr : values)
      for (const auto& shape : shapes) {
        CAPTURE(op);
        af::Graph g;
        std::vector<af::Output> inputs;
        af::FeedDict feeds;
        for (int i = 0; i < arity; ++i) {
          // Indices where the op takes them, f64 elsewhere; runtime values of shape [2, 3].
          const bool index = (op == "GatherGrad" || op == "GatherGradValues") && i == 1;
          auto p = af::placeholder(g, index ? af::i64 : af::f64, shape, "in" + std::to_string(i));
          inputs.push_back(p);
          feeds.push_back({p, index ? af::Tensor::from_vector<int64_t>({0, 1, 0, 1, 0, 1}, {2, 3})
                                    : af::Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3})});
        }
        std::map<std::string, af::AttrValue> attrs;
        if (!attr.empty())
          for (const char* key : {"begin", "multiples", "axis", "axes"}) attrs[key] = attr;
        auto r = try_op(op, inputs, attrs);
        if (!r.ok()) continue;
        ++built;
        auto sess = af::Session::create(g).value();
        if (sess.run({r->output(0)}, feeds).ok()) ++ran;
      }
  // Some combinations are valid (e.g. ReshapeLike of equal shapes), most are not.
  CHECK(built > 0);
  CHECK(ran > 0);
}
