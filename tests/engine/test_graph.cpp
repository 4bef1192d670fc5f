// The graph IR: names and scopes, control dependencies, topological order, cycles,
// pruning, shape inference at build time, and errors at session creation.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/kernel.h>
#include <actorflow/op_registry.h>

#include "test_util.h"

namespace af = actorflow;

// An op with a definition but no kernel, to check the session-creation error.
AF_REGISTER_OP("TestOnlyNoKernel").inputs(1).shape_fn(aft::same_shape);

TEST_CASE("unique names, name scopes, device scopes") {
  af::Graph g;
  auto a = af::constant(g, 1.0f, "c");
  auto b = af::constant(g, 2.0f, "c");
  CHECK(a.node().name == "c");
  CHECK(b.node().name == "c_1");
  af::Output inner;
  {
    af::NameScope s(g, "layer");
    af::DeviceScope d(g, "/job:worker/task:1/cpu:0");
    inner = af::add(a, b);
    {
      af::NameScope s2(g, "sub");
      auto deep = af::neg(inner);
      CHECK(deep.node().name == "layer/sub/Neg");
    }
  }
  CHECK(inner.node().name == "layer/Add");
  CHECK(inner.node().device == "/job:worker/task:1/cpu:0");
  {
    af::NameScope s(g, "layer");  // a second scope of the same name
    auto x = af::neg(a);
    CHECK(x.node().name == "layer_1/Neg");
  }
  CHECK(af::neg(a).node().device.empty());
  CHECK(g.find_node("layer/Add") != nullptr);
  auto found = g.find_output("layer/Add:0");
  REQUIRE(found.ok());
  CHECK(found->node_id() == inner.node_id());
  CHECK_FALSE(g.find_output("nope").ok());
}

TEST_CASE("variables are named under their scope, with Assign and initializer beside") {
  af::Graph g;
  af::Output w;
  {
    af::NameScope s(g, "dense1");
    w = af::variable(g, af::zeros(g, {3, 2}), "w");
  }
  CHECK(w.node().name == "dense1/w");
  CHECK(g.find_node("dense1/w/Assign") != nullptr);
  CHECK(g.collection("variables").size() == 1);
  CHECK(g.collection("init_ops").size() == 1);
}

TEST_CASE("control dependencies scope and group") {
  af::Graph g;
  auto a = af::constant(g, 1.0f, "a");
  auto v = af::variable(g, af::zeros(g, {}), "v");
  auto upd = af::assign_add(v, a);
  af::Output read;
  {
    af::ControlDependencies deps(g, {af::Operation(upd)});
    read = af::read_variable(v, "read");
  }
  REQUIRE(read.node().control_inputs.size() == 1);
  CHECK(read.node().control_inputs[0] == upd.node_id());
  auto grp = af::group(g, {af::Operation(upd), af::Operation(read)});
  CHECK(grp.node().control_inputs.size() == 2);
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  for (int i = 1; i <= 3; ++i) {
    auto out = sess.run({read});
    REQUIRE(out.ok());
    CHECK((*out)[0].item<float>() == doctest::Approx(i));  // the update runs first
  }
}

TEST_CASE("topological order, cycles and pruning") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {}, "x");
  auto a = x + 1.0;
  auto b = a * 2.0;
  auto unrelated = x - 5.0;
  auto order = g.topological_order();
  REQUIRE(order.ok());
  std::vector<int> pos(static_cast<size_t>(g.num_nodes()));
  for (size_t i = 0; i < order->size(); ++i) pos[static_cast<size_t>((*order)[i])] = static_cast<int>(i);
  CHECK(pos[static_cast<size_t>(x.node_id())] < pos[static_cast<size_t>(a.node_id())]);
  CHECK(pos[static_cast<size_t>(a.node_id())] < pos[static_cast<size_t>(b.node_id())]);
  auto needed = g.prune({b.node_id()});
  CHECK(std::find(needed.begin(), needed.end(), unrelated.node_id()) == needed.end());
  CHECK(std::find(needed.begin(), needed.end(), x.node_id()) != needed.end());
  // A control edge from b back to a would close a cycle: refused, graph unchanged.
  auto st = g.add_control_input(a.node_id(), b.node_id());
  CHECK_FALSE(st.ok());
  CHECK(st.message().find("cycle") != std::string::npos);
  CHECK(g.check_acyclic().ok());
  CHECK(g.add_control_input(unrelated.node_id(), b.node_id()).ok());
  CHECK(g.to_string().find("^") != std::string::npos);
}

TEST_CASE("shape inference: unknown dims propagate, errors name nodes and shapes") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1, 3}, "x");
  auto w = af::constant(g, af::Tensor::zeros(af::f32, {4, 5}), "w");
  try {
    (void)af::matmul(x, w, false, false, "mm");
    FAIL("matmul of [?,3] and [4,5] must fail");
  } catch (const af::Error& e) {
    std::string m = e.what();
    CHECK(m.find("'x'") != std::string::npos);
    CHECK(m.find("'w'") != std::string::npos);
    CHECK(m.find("[?,3]") != std::string::npos);
    CHECK(m.find("[4,5]") != std::string::npos);
  }
  int before = g.num_nodes();
  CHECK_THROWS_AS(af::add(x, af::constant(g, af::Tensor::zeros(af::f32, {4}))), af::Error);
  CHECK(g.num_nodes() == before + 1);  // the constant only: the failed add left nothing
  CHECK_THROWS_AS(af::add(x, af::constant(g, 1)), af::Error);  // f32 + i32
  auto y = x + af::constant(g, std::vector<float>{1, 2, 3}, af::Shape{3});
  CHECK(y.shape() == af::Shape{-1, 3});
}

TEST_CASE("an op without a kernel fails at session creation, naming the node") {
  af::Graph g;
  auto x = af::constant(g, 1.0f);
  af::NodeSpec spec;
  spec.op = "TestOnlyNoKernel";
  spec.name = "lonely";
  spec.inputs = {x};
  REQUIRE(g.add_node(spec).ok());
  auto s = af::Session::create(g);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().message().find("lonely") != std::string::npos);
  CHECK(s.status().message().find("TestOnlyNoKernel") != std::string::npos);
  CHECK_THROWS_AS(af::Session::create(g).value(), af::Error);  // value() of a failed Result throws
  af::SessionOptions seq;
  seq.executor = "sequential";
  CHECK_FALSE(af::Session::create(g, seq).ok());
}

TEST_CASE("unknown op in a node spec is refused at build time") {
  af::Graph g;
  af::NodeSpec spec;
  spec.op = "DefinitelyNotAnOp";
  auto r = g.add_node(spec);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("DefinitelyNotAnOp") != std::string::npos);
}

TEST_CASE("feeding an intermediate tensor cuts the graph there") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {}, "x");
  auto a = x * 10.0;
  auto b = a + 1.0;
  auto sess = af::Session::create(g).value();
  auto out = sess.run({b}, {{a, af::Tensor::scalar(5.0f)}});  // x is not needed
  REQUIRE(out.ok());
  CHECK((*out)[0].item<float>() == 6.0f);
}
