// The actor runtime: node actors, pipelining, errors, tracing, encoded edges.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/allocator.h>
#include <actorflow/op_registry.h>
#include <actorflow/runtime/actor_count.h>
#include <actorflow/runtime/run_path.h>
#include <actorflow/tensor_codec.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "random_dag.h"
#include "test_util.h"

namespace af = actorflow;

// Registered here only, with no kernel anywhere: a session must refuse a graph using it.
AF_REGISTER_OP("TestOpWithoutKernel").inputs(1).shape_fn(aft::same_shape);

namespace {

af::Tensor vec(std::vector<float> v) { return af::Tensor::from_vector(v); }

af::SessionOptions sequential() {
  af::SessionOptions o;
  o.executor = "sequential";
  return o;
}

}  // namespace

TEST_CASE("diamond graph") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1}, "x");
  auto b = x * 2.0;
  auto c = x + 3.0;
  auto d = b * c;
  auto sess = af::Session::create(g).value();
  auto out = sess.run({d, b}, {{x, vec({1, 2})}});
  REQUIRE(out.ok());
  CHECK((*out)[0].to_vector<float>() == std::vector<float>{8, 20});
  CHECK((*out)[1].to_vector<float>() == std::vector<float>{2, 4});
}

TEST_CASE("wide graph: 200 branches joined by add_n") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {2}, "x");
  std::vector<af::Output> branches;
  for (int i = 0; i < 200; ++i) branches.push_back(x * static_cast<double>(i));
  auto total = af::add_n(branches);
  auto sess = af::Session::create(g).value();
  auto out = sess.run({total}, {{x, vec({1, 2})}});
  REQUIRE(out.ok());
  float s = 199 * 200 / 2;
  CHECK((*out)[0].to_vector<float>() == std::vector<float>{s, 2 * s});
}

TEST_CASE("a 1,000-node chain, run for several steps") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {}, "x");
  auto one = af::constant(g, 1.0f, "one");
  af::Output y = x;
  for (int i = 0; i < 1000; ++i) y = y + one;
  auto sess = af::Session::create(g).value();
  for (int step = 0; step < 5; ++step) {
    auto out = sess.run({y}, {{x, af::Tensor::scalar(static_cast<float>(step))}});
    REQUIRE(out.ok());
    CHECK((*out)[0].item<float>() == doctest::Approx(1000.0 + step));
  }
}

TEST_CASE("8 concurrent steps from 8 threads, with edge capacity 1") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {}, "x");
  af::Output y = x;
  for (int i = 0; i < 50; ++i) y = (y + x) * 0.5;  // converges towards x
  af::SessionOptions opts;
  opts.edge_capacity = 1;
  auto sess = af::Session::create(g, opts).value();
  auto ref = af::Session::create(g, sequential()).value();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 50; ++k) {
        float v = static_cast<float>(t * 100 + k);
        auto out = sess.run({y}, {{x, af::Tensor::scalar(v)}});
        if (!out.ok() || std::fabs((*out)[0].item<float>() - v) > 1e-3f * (1 + v)) failures++;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures.load() == 0);
}

TEST_CASE("variables keep their values across runs; init through run_init") {
  af::Graph g;
  auto v = af::variable(g, af::zeros(g, {2}), "v");
  auto inc = af::assign_add(v, af::constant(g, std::vector<float>{1, 2}, af::Shape{2}));
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  for (int i = 0; i < 10; ++i) REQUIRE(sess.run({}, {}, {af::Operation(inc)}).ok());
  auto out = sess.run({v});
  REQUIRE(out.ok());
  CHECK((*out)[0].to_vector<float>() == std::vector<float>{10, 20});
}

TEST_CASE("errors fail the step, name the node, and leave the session usable") {
  af::Graph g;
  auto x = af::placeholder(g, af::i32, {-1}, "x");
  auto d = af::placeholder(g, af::i32, {-1}, "d");
  auto q = af::div(x, d, "quotient");
  auto r = q + x;  // downstream of the failing node
  auto other = x * x;  // a branch that does not fail
  auto sess = af::Session::create(g).value();
  auto ok = af::Tensor::from_vector<int32_t>({6, 8});
  auto two = af::Tensor::from_vector<int32_t>({2, 2});
  auto zero = af::Tensor::from_vector<int32_t>({2, 0});

  SUBCASE("missing feed names the placeholder") {
    auto out = sess.run({r}, {{x, ok}});
    REQUIRE_FALSE(out.ok());
    CHECK(out.status().message().find("'d'") != std::string::npos);
  }
  SUBCASE("wrong dtype and wrong shape name the fed tensor") {
    auto bad_dtype = sess.run({r}, {{x, ok}, {d, af::Tensor::from_vector<float>({1, 2})}});
    REQUIRE_FALSE(bad_dtype.ok());
    CHECK(bad_dtype.status().message().find("d:0") != std::string::npos);
    auto bad_shape = sess.run({r}, {{x, ok}, {d, af::Tensor::from_vector<int32_t>({1, 2}, {1, 2})}});
    REQUIRE_FALSE(bad_shape.ok());
    CHECK(bad_shape.status().message().find("[1,2]") != std::string::npos);
  }
  SUBCASE("a kernel error names the node; the next steps work") {
    for (int i = 0; i < 3; ++i) {
      auto bad = sess.run({r, other}, {{x, ok}, {d, zero}});
      REQUIRE_FALSE(bad.ok());
      CHECK(bad.status().message().find("quotient") != std::string::npos);
      CHECK(bad.status().message().find("division by zero") != std::string::npos);
      auto good = sess.run({r, other}, {{x, ok}, {d, two}});
      REQUIRE(good.ok());
      CHECK((*good)[0].to_vector<int32_t>() == std::vector<int32_t>{9, 12});
      CHECK((*good)[1].to_vector<int32_t>() == std::vector<int32_t>{36, 64});
    }
  }
}

TEST_CASE("unknown op or missing kernel fails at session creation") {
  af::Graph g;
  af::Node n;
  n.name = "mystery";
  n.op = "NoSuchOp";
  auto added = g.add_node_raw(n);
  CHECK_FALSE(added.ok());  // unknown ops cannot even enter a graph

  // A registered op with no CPU kernel enters the graph but no session.
  auto x = af::constant(g, 1.0f, "x");
  af::NodeSpec spec;
  spec.op = "TestOpWithoutKernel";
  spec.name = "kernelless";
  spec.inputs = {x};
  auto op = g.add_node(spec);
  REQUIRE_MESSAGE(op.ok(), op.status().to_string());
  auto s = af::Session::create(g);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().code() == af::Code::not_found);
  CHECK(s.status().message() == "node 'kernelless': no CPU kernel for op 'TestOpWithoutKernel'");
}

TEST_CASE("encoded edges give identical results, and every edge between actors goes through the codec") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1, 3}, "x");
  auto w = af::constant(g, std::vector<float>{1, -2, 3}, af::Shape{3});
  auto y = af::maximum(x * w, x + w) - x;
  auto z = af::add_n({y, x, y});
  af::Tensor in = af::Tensor::from_vector<float>({1, 2, 3, -4, 5, -6}, {2, 3});
  // Elementwise fusion off: the edges counted below are those between unfused nodes.
  af::SessionOptions unfused;
  unfused.optimizer.fuse_elementwise = false;
  af::SessionOptions enc = unfused;
  enc.encode_all_edges = true;
  auto plain = af::Session::create(g, unfused).value();
  auto encoded = af::Session::create(g, enc).value();

  // Feeds go straight from the executor to their consumers and the constant w is bound
  // into its consumers, so the edges between actors are Mul->Maximum, Add->Maximum,
  // Maximum->Sub and Sub->AddN twice: 5 messages a step.
  const int64_t kEdges = 5, kSteps = 3;
  af::CodecCounts before = af::codec_counts();
  for (int i = 0; i < kSteps; ++i) REQUIRE(plain.run({z, y}, {{x, in}}).ok());
  af::CodecCounts mid = af::codec_counts();
  CHECK(mid.encodes == before.encodes);
  CHECK(mid.decodes == before.decodes);
  for (int i = 0; i < kSteps; ++i) {
    auto a = plain.run({z, y}, {{x, in}});
    auto b = encoded.run({z, y}, {{x, in}});
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK((*a)[0].equals((*b)[0]));
    CHECK((*a)[1].equals((*b)[1]));
  }
  af::CodecCounts after = af::codec_counts();
  CHECK(after.encodes - mid.encodes == kEdges * kSteps);
  CHECK(after.decodes - mid.decodes == kEdges * kSteps);

  // Only the edges touching a named node: Maximum->Sub and Sub->AddN twice.
  af::SessionOptions some = unfused;
  some.encode_edges_of = {y.node().name};
  auto partly = af::Session::create(g, some).value();
  before = af::codec_counts();
  auto c = partly.run({z}, {{x, in}});
  REQUIRE(c.ok());
  after = af::codec_counts();
  CHECK(after.encodes - before.encodes == 3);
  CHECK(after.decodes - before.decodes == 3);

  // An error crosses an encoded edge too.
  af::Graph g2;
  auto p = af::placeholder(g2, af::i32, {}, "p");
  auto q = af::div(p, p, "q") + p;
  auto enc2 = af::Session::create(g2, enc).value();
  before = af::codec_counts();
  auto bad = enc2.run({q}, {{p, af::Tensor::scalar(int32_t{0})}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("'q'") != std::string::npos);
  after = af::codec_counts();
  CHECK(after.encodes - before.encodes == 1);
  CHECK(after.decodes - before.decodes == 1);
}

TEST_CASE("one actor per node that is not bound as a constant") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1, 3}, "x");
  auto w = af::constant(g, std::vector<float>{1, -2, 3}, af::Shape{3}, "w");
  auto b = af::constant(g, 0.5f, "b");
  auto y = af::relu(x * w + b);           // Mul, Add, Relu; w and b are bound
  auto total = af::reduce_sum(y);          // Sum (its axes constant is bound too)
  auto v = af::variable(g, af::zeros(g, {3}), "v");
  auto read = af::identity(v + y, "read");  // VariableV2, Add, Identity
  af::Tensor in = af::Tensor::from_vector<float>({1, 2, 3, -4, 5, -6}, {2, 3});

  // Counts the plan's nodes the way the runtime must: all but constants that only feed
  // other nodes (a fetched constant is a source and gets an actor).
  auto expected = [&](const std::vector<af::Output>& fetches) {
    std::vector<int> targets;
    for (auto& f : fetches) targets.push_back(f.node_id());
    int n = 0;
    auto consumers = g.consumers();
    for (int id : g.prune(targets)) {
      if (id == x.node_id()) continue;  // fed: cut from the plan
      bool fetched = std::find(targets.begin(), targets.end(), id) != targets.end();
      if (g.node(id).op == "Const" && !fetched) continue;
      ++n;
    }
    return n;
  };

  // Elementwise fusion would run Add and Relu as one node, and the run path would run
  // the Identity in its producer's actor.
  af::runtime::ScopedRunPath one_actor_per_node(af::runtime::RunPath{false, false});
  af::SessionOptions opts;
  opts.optimizer.fuse_elementwise = false;
  auto sess = af::Session::create(g, opts).value();
  REQUIRE(sess.run_init().ok());
  int64_t before = af::runtime::node_actors_spawned();
  REQUIRE(sess.run({total}, {{x, in}}).ok());
  int64_t after = af::runtime::node_actors_spawned();
  CHECK(expected({total}) == 4);
  CHECK(after - before == 4);
  // The same plan again spawns nothing.
  REQUIRE(sess.run({total}, {{x, in}}).ok());
  CHECK(af::runtime::node_actors_spawned() == after);
  // A plan fetching a constant gives it an actor.
  before = af::runtime::node_actors_spawned();
  REQUIRE(sess.run({read, w}, {{x, in}}).ok());
  after = af::runtime::node_actors_spawned();
  CHECK(after - before == expected({read, w}));
  CHECK(expected({read, w}) == 7);
}

TEST_CASE("independent heavy branches overlap in time (trace)") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {1 << 20}, "x");
  // The branches differ in a constant: identical ones would be merged by the plan's
  // common-subexpression pass and run once.
  auto branch = [&](const std::string& name, double scale) {
    af::NameScope s(g, name);
    af::Output y = x;
    for (int i = 0; i < 6; ++i) y = af::maximum(y * scale, y - (scale - 0.5));
    return y;
  };
  auto a = branch("left", 1.0001);
  auto b = branch("right", 1.0002);
  std::string path = (std::filesystem::temp_directory_path() / "af_trace_overlap.json").string();
  af::SessionOptions opts;
  opts.trace = true;
  opts.trace_path = path;
  opts.intra_op_threads = 1;
  opts.optimizer.fuse_elementwise = false;  // one kernel event per node below
  {
    auto sess = af::Session::create(g, opts).value();
    af::Tensor in = af::Tensor::filled(af::f32, {1 << 20}, 1.0);
    for (int i = 0; i < 5; ++i) REQUIRE(sess.run({a, b}, {{x, in}}).ok());
    REQUIRE(sess.close().ok());
  }
  std::ifstream f(path);
  REQUIRE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  std::string json = ss.str();
  CHECK(json.find("\"traceEvents\"") != std::string::npos);
  CHECK(json.find("left/") != std::string::npos);
  CHECK(json.find("\"ph\":\"X\"") != std::string::npos);
  // Parse (name, ts, dur, tid) and look for a left and a right kernel overlapping.
  struct Ev { bool left; double ts, end; long tid; };
  std::vector<Ev> evs;
  size_t pos = 0;
  while ((pos = json.find("{\"name\":\"", pos)) != std::string::npos) {
    size_t name_end = json.find('"', pos + 9);
    std::string name = json.substr(pos + 9, name_end - pos - 9);
    size_t ts = json.find("\"ts\":", pos), dur = json.find("\"dur\":", pos), tid = json.find("\"tid\":", pos);
    size_t next = json.find("{\"name\":\"", pos + 1);
    if (ts < next && (name.rfind("left/", 0) == 0 || name.rfind("right/", 0) == 0)) {
      double t0 = std::stod(json.substr(ts + 5));
      double d = std::stod(json.substr(dur + 6));
      evs.push_back({name.rfind("left/", 0) == 0, t0, t0 + d, std::stol(json.substr(tid + 6))});
    }
    pos = name_end;
  }
  CHECK(evs.size() >= 2 * 6 * 3 * 5);
  bool overlap = false;
  for (auto& l : evs)
    for (auto& r : evs)
      if (l.left && !r.left && l.ts < r.end && r.ts < l.end && l.tid != r.tid) overlap = true;
  CHECK(overlap);
}

TEST_CASE("close: later runs fail, destructor does not hang") {
  af::Graph g;
  auto x = af::constant(g, 2.0f) * af::constant(g, 3.0f);
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run({x}).ok());
  REQUIRE(sess.close().ok());
  CHECK_FALSE(sess.run({x}).ok());
}

// ---- property test: random DAGs under concurrency vs the sequential evaluator ----

namespace {

using RandomGraph = aftpart::PlacedDag;

void build_random_dag(RandomGraph& rg, std::mt19937& rng) { aftpart::build_placed_dag(rg, rng, {""}, 0); }

}  // namespace

TEST_CASE("property: 200 random DAGs with concurrent steps equal the sequential evaluator") {
  std::mt19937 rng(1234);
  int checked = 0;
  for (int gi = 0; gi < 200; ++gi) {
    RandomGraph rg;
    build_random_dag(rg, rng);
    af::SessionOptions opts;
    opts.edge_capacity = 1 + static_cast<int>(rng() % 3);
    auto sess = af::Session::create(rg.g, opts).value();
    auto ref = af::Session::create(rg.g, sequential()).value();
    std::vector<af::Fetch> fetches(rg.fetches.begin(), rg.fetches.end());
    constexpr int kThreads = 4, kSteps = 6;
    std::vector<std::vector<af::Tensor>> inputs(kThreads * kSteps);
    for (auto& in : inputs) {
      std::vector<float> v(8);
      for (auto& e : v) e = static_cast<float>(static_cast<int>(rng() % 21) - 10) / 4.0f;
      in.push_back(af::Tensor::from_vector(v, {2, 4}));
    }
    std::vector<std::vector<af::Tensor>> got(inputs.size());
    std::vector<std::thread> threads;
    std::atomic<int> errors{0};
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        for (int s = 0; s < kSteps; ++s) {
          size_t i = static_cast<size_t>(t * kSteps + s);
          auto out = sess.run(fetches, {{rg.x, inputs[i][0]}});
          if (!out.ok()) errors++;
          else got[i] = *out;
        }
      });
    for (auto& th : threads) th.join();
    REQUIRE(errors.load() == 0);
    for (size_t i = 0; i < inputs.size(); ++i) {
      auto want = ref.run(fetches, {{rg.x, inputs[i][0]}});
      REQUIRE(want.ok());
      for (size_t f = 0; f < fetches.size(); ++f) {
        INFO("graph " << gi << " input " << i << " fetch " << f);
        CHECK(got[i][f].equals((*want)[f]));
      }
      ++checked;
    }
  }
  CHECK(checked == 200 * 24);
}

TEST_CASE("a random op continues its stream whatever else is fetched") {
  af::Graph g;
  auto u = af::random_uniform(g, {4}, 0, 1, 5);
  auto v = u * 2.0;
  auto sess = af::Session::create(g).value();
  auto a = sess.run({u, v});
  auto b = sess.run({u});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK_FALSE((*a)[0].equals((*b)[0]));
  auto fresh = af::Session::create(g).value();
  auto c = fresh.run({u});
  auto d = fresh.run({u, v});
  REQUIRE(c.ok());
  REQUIRE(d.ok());
  CHECK((*c)[0].equals((*a)[0]));  // same seeds, same sequence
  CHECK((*d)[0].equals((*b)[0]));
}
