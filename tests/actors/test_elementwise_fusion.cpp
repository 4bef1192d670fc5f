// The elementwise fusion pass (actors/src/elementwise_fusion.cpp) and its
// _FusedElementwise kernel: a chain runs as one node with the unfused nodes' bits, for
// every op it holds, on scalar and same-shape operands, across blocks and pool threads;
// fetched, targeted, awaited or otherwise read intermediates stay; broadcasts it does not
// admit stay unfused, and run-time shapes the one-pass path cannot take still give the
// unfused results (or their errors); a training step gives the same losses and weights.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/layers.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>

#include "../../actors/src/graph_passes.h"

namespace af = actorflow;

namespace {

af::SessionOptions fusing(bool on, int threads = 2) {
  af::SessionOptions o;
  o.optimizer.fuse_elementwise = on;
  o.intra_op_threads = threads;
  return o;
}

// The plan optimize_plan makes for one step (every pass at its default).
std::shared_ptr<af::runtime::OptimizedPlan> plan_of(af::Graph& g, const std::vector<af::Fetch>& fetches,
                                                    const af::FeedDict& feeds = {},
                                                    const std::vector<af::Operation>& targets = {}, bool fuse = true) {
  af::RunRequest req;
  req.fetches = fetches;
  req.feeds = feeds;
  req.targets = targets;
  auto plan = af::make_step_plan(g, req);
  REQUIRE_MESSAGE(plan.ok(), plan.status().to_string());
  af::GraphOptimizerOptions o;
  o.fuse_elementwise = fuse;
  auto p = af::runtime::optimize_plan(g, std::move(*plan), o);
  REQUIRE(p.ok());
  return *p;
}

int count_op(const af::runtime::OptimizedPlan& p, const std::string& op) {
  int n = 0;
  for (int id : p.plan().nodes) n += p.node(id).op == op;
  return n;
}

std::vector<af::Tensor> run(af::Graph& g, const af::SessionOptions& o, const std::vector<af::Fetch>& fetches,
                            const af::FeedDict& feeds = {}, const std::vector<af::Operation>& targets = {}) {
  auto sess = af::Session::create(g, o).value();
  REQUIRE(sess.run_init().ok());
  auto r = sess.run(fetches, feeds, targets);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  return *r;
}

// The plan's nodes that run (constants are only bound into their readers). Counted on
// the plan rather than as actors spawned: the executor may run a cheap plan without any.
int runnable(const af::runtime::OptimizedPlan& p) {
  int n = 0;
  for (int id : p.plan().nodes) n += p.node(id).op != "Const";
  return n;
}

// Bit for bit, except that any NaN matches any NaN: which operand's NaN an add of two
// NaNs passes on depends on the operand order the compiler picked for that loop.
bool same_bits(const af::Tensor& a, const af::Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    const float x = a.data<float>()[i], y = b.data<float>()[i];
    if (std::isnan(x) && std::isnan(y)) continue;
    if (std::memcmp(&x, &y, sizeof x) != 0) return false;
  }
  return true;
}

// Values with the awkward cases in: signed zeros, infinities, NaN, denormals, large and
// negative values (NaN from log and sqrt), spread over `n` elements.
af::Tensor awkward(int64_t n, std::mt19937& rng) {
  const float specials[] = {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), 1e-40f, -1e-40f, 88.5f, -104.f, 1e30f, 1.0f, -1.0f};
  std::uniform_real_distribution<float> u(-6.f, 6.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& e : v) e = rng() % 16 == 0 ? specials[rng() % std::size(specials)] : u(rng);
  return af::Tensor::from_vector(v, {n});
}

}  // namespace

TEST_CASE("a chain of elementwise ops runs as one node, with the unfused nodes' bits") {
  std::mt19937 rng(1);
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1, 5}, "x");
  auto z = af::placeholder(g, af::f32, {-1, 5}, "z");
  // A small DAG: x is read three times, t twice; eight ops, one output.
  auto t = af::tanh(x * 2.0f + 1.0f);
  auto y = af::relu(t - af::sigmoid(z)) * t + af::exp(af::neg(af::square(x)));
  af::FeedDict feeds{{x, af::Tensor::from_vector(std::vector<float>(20, 0.25f), {4, 5})},
                     {z, af::Tensor::from_vector(std::vector<float>(20, -0.5f), {4, 5})}};
  std::uniform_real_distribution<float> u(-3.f, 3.f);
  for (auto& [o, v] : feeds)
    for (int64_t i = 0; i < v.num_elements(); ++i) v.data<float>()[i] = u(rng);

  auto p = plan_of(g, {y}, feeds);
  CHECK(p->stats().fused_elementwise == 1);
  CHECK(p->stats().elementwise_nodes_replaced == 11);
  CHECK(count_op(*p, "_FusedElementwise") == 1);
  const af::Node& fused = p->node(y.node_id());
  CHECK(fused.op == "_FusedElementwise");
  CHECK(fused.name == y.node().name);
  CHECK(fused.inputs.size() == 4);  // x, z and the constants 2 and 1

  CHECK(runnable(*p) == 1);
  CHECK(runnable(*plan_of(g, {y}, feeds, {}, false)) == 11);
  auto on = run(g, fusing(true), {y}, feeds);
  auto off = run(g, fusing(false), {y}, feeds);
  CHECK(same_bits(on[0], off[0]));
  af::SessionOptions ref;
  ref.executor = "sequential";
  auto seq = af::Session::create(g, ref).value().run({y}, feeds);
  REQUIRE(seq.ok());
  CHECK(same_bits(on[0], (*seq)[0]));
}

TEST_CASE("every op the kernel holds gives its own kernel's bits: vectors, scalars, blocks, threads") {
  std::mt19937 rng(7);
  // 5000 elements: several 1024-element blocks and a ragged tail; 400k: sharded over the pool.
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{5000}, int64_t{400000}}) {
    CAPTURE(n);
    af::Graph g;
    auto a = af::placeholder(g, af::f32, {n}, "a");
    auto b = af::placeholder(g, af::f32, {n}, "b");
    auto s = af::placeholder(g, af::f32, {}, "s");
    std::vector<af::Output> outs;
    // Each op between two Negs (exact), so every op is an inner instruction of a chain.
    auto chain = [&](af::Output v) { outs.push_back(af::neg(v)); };
    auto na = af::neg(a), nb = af::neg(b), ns = af::neg(s);
    for (auto [x, y] : {std::pair{na, nb}, std::pair{na, s}, std::pair{s, nb}}) {
      chain(x + y);
      chain(x - y);
      chain(x * y);
      chain(x / y);
      chain(af::maximum(x, y));
      chain(af::minimum(x, y));
      chain(af::pow(x, y));
      chain(af::square(y - x) + af::sqrt(af::abs(y)));  // (x - y would be merged with the Sub above)
    }
    for (auto x : {na, ns * nb}) {
      chain(af::neg(x));
      chain(af::abs(x));
      chain(af::sign(x));
      chain(af::square(x));
      chain(af::relu(x));
      chain(af::exp(x));
      chain(af::log(x));
      chain(af::sqrt(x));
      chain(af::rsqrt(x));
      chain(af::sigmoid(x));
      chain(af::tanh(x));
      chain(af::softplus(x));
    }
    // SquaredDifference has no DSL call of its own.
    auto sq = g.add_node({"SquaredDifference", "sqdiff", {na, nb}, {}, {}});
    REQUIRE(sq.ok());
    chain(sq->output(0));
    af::FeedDict feeds{{a, awkward(n, rng)}, {b, awkward(n, rng)}, {s, af::Tensor::scalar(-1.75f)}};
    std::vector<af::Fetch> fetches(outs.begin(), outs.end());
    // Every op was fused with the Neg after it.
    auto p = plan_of(g, fetches, feeds);
    for (const af::Output& o : outs) CHECK(p->node(o.node_id()).op == "_FusedElementwise");
    auto on = run(g, fusing(true), fetches, feeds);
    auto off = run(g, fusing(false), fetches, feeds);
    for (size_t i = 0; i < outs.size(); ++i) {
      CAPTURE(i);
      CHECK(same_bits(on[i], off[i]));
    }
  }
}

TEST_CASE("fetched, targeted, awaited or otherwise read intermediates are not fused away") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {3}, "x");
  auto a = af::exp(x, "a");
  auto b = af::tanh(a, "b");
  auto c = af::sigmoid(b, "c");
  auto d = af::relu(c, "d");
  af::FeedDict feeds{{x, af::Tensor::from({0.5f, -1.f, 2.f})}};
  auto ref = run(g, fusing(false), {a, b, c, d}, feeds);

  // Only d fetched: one node.
  {
    auto p = plan_of(g, {d}, feeds);
    CHECK(count_op(*p, "_FusedElementwise") == 1);
    CHECK(runnable(*p) == 1);
    CHECK(same_bits(run(g, fusing(true), {d}, feeds)[0], ref[3]));
  }
  // b fetched too: a+b and c+d.
  {
    auto p = plan_of(g, {b, d}, feeds);
    CHECK(p->stats().fused_elementwise == 2);
    CHECK(runnable(*p) == 2);
    auto r = run(g, fusing(true), {b, d}, feeds);
    CHECK(same_bits(r[0], ref[1]));
    CHECK(same_bits(r[1], ref[3]));
  }
  // c also read by a node outside the chain (a reduction): c+... stays apart from d.
  {
    auto total = af::reduce_sum(c, {}, false, "total");
    auto p = plan_of(g, {d, total}, feeds);
    CHECK(p->stats().fused_elementwise == 1);  // a, b, c
    CHECK(p->node(c.node_id()).op == "_FusedElementwise");
    CHECK(p->node(d.node_id()).op == "Relu");
    auto r = run(g, fusing(true), {d, total}, feeds);
    CHECK(same_bits(r[0], ref[3]));
  }
  // b run as a target: it must run as itself.
  {
    auto p = plan_of(g, {d}, feeds, {af::Operation(b)});
    CHECK(p->node(b.node_id()).op == "_FusedElementwise");  // a + b
    CHECK(p->node(d.node_id()).op == "_FusedElementwise");  // c + d
  }
  // a fed: the chain starts at b.
  {
    auto p = plan_of(g, {d}, {{a, af::Tensor::from({1.f, 2.f, 3.f})}});
    CHECK(p->stats().elementwise_nodes_replaced == 3);
  }
  // One session, plans that fuse different groups under the same root (d): each runs
  // its own program, whichever the session prepared first.
  {
    auto sess = af::Session::create(g, fusing(true)).value();
    for (int round = 0; round < 2; ++round) {
      auto r1 = sess.run({d}, feeds);
      auto r2 = sess.run({b, d}, feeds);
      auto r3 = sess.run({c, d}, feeds);
      REQUIRE(r1.ok());
      REQUIRE(r2.ok());
      REQUIRE(r3.ok());
      CHECK(same_bits((*r1)[0], ref[3]));
      CHECK(same_bits((*r2)[0], ref[1]));
      CHECK(same_bits((*r2)[1], ref[3]));
      CHECK(same_bits((*r3)[0], ref[2]));
      CHECK(same_bits((*r3)[1], ref[3]));
    }
  }
  // Switched off: nothing fuses, and the same values come back.
  {
    auto p = plan_of(g, {d}, feeds, {}, false);
    CHECK(p->stats().fused_elementwise == 0);
    CHECK(runnable(*p) == 4);
    CHECK(same_bits(run(g, fusing(false), {d}, feeds)[0], ref[3]));
  }
}

TEST_CASE("control edges: the fused node waits for its members' control inputs; an awaited node stays") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {2}, "x");
  auto counter = af::variable(g, af::Tensor::scalar(0.0f), "counter", false);
  auto bump = af::assign_add(counter, af::constant(g, 1.0f));
  af::Output a;
  {
    af::ControlDependencies deps(g, {af::Operation(bump)});
    a = af::exp(x, "a");
  }
  auto b = af::tanh(a, "b");
  auto c = af::relu(b, "c");
  af::FeedDict feeds{{x, af::Tensor::from({0.5f, -1.f})}};
  {
    auto p = plan_of(g, {c}, feeds);
    CHECK(p->stats().elementwise_nodes_replaced == 3);
    const af::Node& f = p->node(c.node_id());
    REQUIRE(f.control_inputs.size() == 1);
    CHECK(f.control_inputs[0] == bump.node_id());
  }
  auto sess = af::Session::create(g, fusing(true)).value();
  REQUIRE(sess.run_init().ok());
  REQUIRE(sess.run({c}, feeds).ok());
  REQUIRE(sess.run({c}, feeds).ok());
  auto n = sess.run({af::read_variable(counter)});
  REQUIRE(n.ok());
  CHECK((*n)[0].item<float>() == 2.0f);  // the AssignAdd a waited for ran each step

  // Something waits for b: b runs as itself (a+b fuse: b is their root), c alone.
  af::Output after;
  {
    af::ControlDependencies deps(g, {af::Operation(b)});
    after = af::identity(x, "after_b");
  }
  auto p = plan_of(g, {c, after}, feeds);
  CHECK(p->node(b.node_id()).op == "_FusedElementwise");
  CHECK(p->node(c.node_id()).op == "Relu");
  auto on = run(g, fusing(true), {c, after}, feeds);
  auto off = run(g, fusing(false), {c, after}, feeds);
  CHECK(same_bits(on[0], off[0]));
}

TEST_CASE("broadcasts other than a scalar stay unfused; run-time shapes the one pass cannot take go op by op") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1, 3}, "x");
  auto z = af::placeholder(g, af::f32, {-1, 3}, "z");
  auto bias = af::constant(g, af::Tensor::from({1.f, 2.f, 3.f}), "bias");
  // Add of a [3] bias to [?,3]: not admitted; the Relu and Mul after it fuse.
  auto y = af::relu(x + bias) * 0.5f;
  {
    auto p = plan_of(g, {y}, {{x, af::Tensor::from({{1.f, -2.f, 3.f}})}});
    CHECK(p->stats().elementwise_nodes_replaced == 2);
    CHECK(p->node(y.node_id()).op == "_FusedElementwise");
  }
  // [?,3] with [?,3]: fused, but a step may bring [1,3] and [2,3] (numpy broadcast).
  auto w = af::exp(x - z) * 2.0f;
  REQUIRE(plan_of(g, {w}, {{x, af::Tensor::from({{1.f, 2.f, 3.f}})}, {z, af::Tensor::from({{1.f, 2.f, 3.f}})}})
              ->stats()
              .elementwise_nodes_replaced == 3);
  for (auto [rx, rz] : {std::pair{1, 2}, std::pair{2, 1}, std::pair{2, 2}, std::pair{0, 1}}) {
    CAPTURE(rx);
    CAPTURE(rz);
    std::vector<float> vx(static_cast<size_t>(rx * 3)), vz(static_cast<size_t>(rz * 3));
    for (size_t i = 0; i < vx.size(); ++i) vx[i] = 0.25f * static_cast<float>(i);
    for (size_t i = 0; i < vz.size(); ++i) vz[i] = -0.5f * static_cast<float>(i);
    af::FeedDict feeds{{x, af::Tensor::from_vector(vx, {rx, 3})}, {z, af::Tensor::from_vector(vz, {rz, 3})}};
    CHECK(runnable(*plan_of(g, {w}, feeds)) == 1);
    auto on = run(g, fusing(true), {w}, feeds);
    auto off = run(g, fusing(false), {w}, feeds);
    CHECK(same_bits(on[0], off[0]));
  }
  // Shapes that do not broadcast: the unfused Sub's error.
  af::FeedDict bad{{x, af::Tensor::from_vector(std::vector<float>(6), {2, 3})},
                   {z, af::Tensor::from_vector(std::vector<float>(9), {3, 3})}};
  auto on = af::Session::create(g, fusing(true)).value().run({w}, bad);
  auto off = af::Session::create(g, fusing(false)).value().run({w}, bad);
  REQUIRE_FALSE(on.ok());
  REQUIRE_FALSE(off.ok());
  CHECK(on.status().message().find("cannot be broadcast") != std::string::npos);
  CHECK(on.status().code() == off.status().code());
}

TEST_CASE("a long scalar chain becomes a few fused nodes of at most 64 ops") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {}, "x");
  auto one = af::constant(g, 1.0f, "one");
  af::Output y = x;
  for (int i = 0; i < 150; ++i) y = y + one;
  auto p = plan_of(g, {y}, {{x, af::Tensor::scalar(0.0f)}});
  CHECK(p->stats().fused_elementwise == 3);
  CHECK(p->stats().elementwise_nodes_replaced == 150);
  CHECK(runnable(*p) == 3);
  CHECK(run(g, fusing(true), {y}, {{x, af::Tensor::scalar(0.5f)}})[0].item<float>() == 150.5f);
}

TEST_CASE("a training step: same losses and weights, bit for bit, with the pass on and off") {
  auto train = [](bool fuse, int* fused, int* nodes) {
    af::Graph g;
    g.set_seed(42);
    auto x = af::placeholder(g, af::f32, {-1, 12}, "x");
    auto target = af::placeholder(g, af::f32, {-1, 4}, "target");
    auto h = af::layers::dense(x, 16, af::layers::Act::tanh, "h1");
    auto out = af::layers::dense(h, 4, {}, "out");
    // A loss with an elementwise chain whose inner results the gradients read.
    auto diff = af::sigmoid(out) - target;
    auto loss = af::reduce_mean(af::square(diff) * 0.5f + af::softplus(out) * 0.01f);
    af::optim::GradientDescent opt(0.5);
    af::Operation step = opt.minimize(loss);
    auto sess = af::Session::create(g, fusing(fuse)).value();
    REQUIRE(sess.run_init().ok());
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> vx(8 * 12), vt(8 * 4);
    for (auto& v : vx) v = u(rng);
    for (auto& v : vt) v = u(rng) > 0 ? 1.f : 0.f;
    af::FeedDict feeds{{x, af::Tensor::from_vector(vx, {8, 12})}, {target, af::Tensor::from_vector(vt, {8, 4})}};
    auto p = plan_of(g, {loss}, feeds, {step}, fuse);
    *fused = p->stats().elementwise_nodes_replaced;
    *nodes = runnable(*p);
    std::vector<float> losses;
    for (int s = 0; s < 10; ++s) {
      auto r = sess.run({loss}, feeds, {step});
      REQUIRE_MESSAGE(r.ok(), r.status().to_string());
      losses.push_back((*r)[0].item<float>());
    }
    std::vector<af::Tensor> weights;
    for (const char* v : {"h1/kernel", "h1/bias", "out/kernel", "out/bias"}) {
      auto r = sess.run({*g.find_output(v)});
      REQUIRE_MESSAGE(r.ok(), r.status().to_string());
      weights.push_back((*r)[0]);
    }
    return std::make_pair(losses, weights);
  };
  int fused_on = 0, fused_off = 0, nodes_on = 0, nodes_off = 0;
  auto on = train(true, &fused_on, &nodes_on);
  auto off = train(false, &fused_off, &nodes_off);
  MESSAGE("elementwise nodes fused: " << fused_on << "; nodes run " << nodes_on << " against " << nodes_off);
  CHECK(fused_on > 0);
  CHECK(fused_off == 0);
  CHECK(nodes_on < nodes_off);
  CHECK(on.first == off.first);
  CHECK(on.first.back() < on.first.front());
  for (size_t i = 0; i < on.second.size(); ++i) {
    CAPTURE(i);
    CHECK(same_bits(on.second[i], off.second[i]));
  }
}

TEST_CASE("a hand-built _FusedElementwise node: shape inference, and a program it refuses") {
  af::Graph g;
  auto a = af::placeholder(g, af::f32, {-1, 2}, "a");
  auto s = af::constant(g, 3.0f, "s");
  // (a * s) then relu: slots 0 = a, 1 = s, 2 = the Mul's result.
  auto ok = g.add_node({"_FusedElementwise", "fused", {a, s},
                        {},
                        {{"ops", af::AttrValue(af::AttrValue::Strings{"Mul", "Relu"})},
                         {"args", af::AttrValue(af::AttrValue::Ints{0, 1, 2, -1})}}});
  REQUIRE_MESSAGE(ok.ok(), ok.status().to_string());
  CHECK(ok->output(0).shape() == af::Shape({-1, 2}));
  auto r = af::Session::create(g).value().run({ok->output(0)}, {{a, af::Tensor::from({{1.f, -2.f}})}});
  REQUIRE(r.ok());
  CHECK((*r)[0].to_vector<float>() == std::vector<float>{3.f, 0.f});
  // A slot that names a later result.
  auto bad = g.add_node({"_FusedElementwise", "bad", {a},
                         {},
                         {{"ops", af::AttrValue(af::AttrValue::Strings{"Exp", "Relu"})},
                          {"args", af::AttrValue(af::AttrValue::Ints{2, -1, 1, -1})}}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("earlier result") != std::string::npos);
  auto unknown = g.add_node({"_FusedElementwise", "unknown", {a},
                             {},
                             {{"ops", af::AttrValue(af::AttrValue::Strings{"Softmax"})},
                              {"args", af::AttrValue(af::AttrValue::Ints{0, -1})}}});
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().message().find("cannot be fused") != std::string::npos);
}

// Run by the case below in a child process with AF_FUSE_ELEMENTWISE=0 (the switch is read
// once per process); in any other process it checks the pass is on.
TEST_CASE("env switch child: nothing fuses under AF_FUSE_ELEMENTWISE=0") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {4}, "x");
  auto y = af::relu(af::exp(x) * 2.0f);
  const char* e = std::getenv("AF_FUSE_ELEMENTWISE");
  const bool off = e && std::string(e) == "0";
  auto p = plan_of(g, {y}, {{x, af::Tensor::from({1.f, -1.f, 0.f, 2.f})}});
  CHECK(p->stats().fused_elementwise == (off ? 0 : 1));
}

TEST_CASE("AF_FUSE_ELEMENTWISE=0 turns the pass off for the process") {
  char self[4096] = {};
  REQUIRE(::readlink("/proc/self/exe", self, sizeof self - 1) > 0);
  const std::string cmd = std::string("AF_FUSE_ELEMENTWISE=0 '") + self +
                          "' --source-file='*/test_elementwise_fusion.cpp' --test-case='env switch child*' --no-intro "
                          "--no-version >/dev/null 2>&1";
  CHECK(std::system(cmd.c_str()) == 0);
}
