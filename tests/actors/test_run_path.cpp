// The low-latency run path: cheap nodes run in their
// producer's actor (fewer actors, fewer messages), and a plan of only cheap nodes runs
// on the caller's thread. Both must give what one actor per node gives: the same
// values, concurrent steps, back-pressure, errors mid-chain, traces.
//
// The chains are i32 so that the elementwise fusion pass (f32 only) leaves their nodes
// alone: the counts below are the run path's, not that pass's.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/kernel.h>
#include <actorflow/op_registry.h>
#include <actorflow/runtime/actor_count.h>
#include <actorflow/runtime/run_path.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "test_util.h"

namespace af = actorflow;
using af::runtime::RunPath;
using af::runtime::ScopedRunPath;

namespace {

// Passes its input through and records the thread it ran on: where a step ran.
std::atomic<std::thread::id> g_ran_on;
class ThreadRecordingKernel : public af::OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(af::OpKernelContext& ctx) override {
    g_ran_on.store(std::this_thread::get_id());
    ctx.set_output(0, ctx.input(0));
  }
};

}  // namespace

AF_REGISTER_OP("TestThreadRecording").inputs(1).shape_fn(aft::same_shape);
AF_REGISTER_KERNEL("TestThreadRecording", af::DeviceType::CPU, ThreadRecordingKernel);

namespace {

constexpr RunPath kOneActorPerNode{false, false, false};
constexpr RunPath kColocateOnly{false, true, false};
constexpr RunPath kAll{true, true, true};

// sum(x) -> 10 x (y * 2 - 1) -> max(y, sum): the Sum is not cheap (it gets an actor and
// takes the feed); the 20 scalar ops and the Maximum after it are.
struct Chain {
  af::Graph g;
  af::Output x, s, mid, y, z;
  Chain() {
    x = af::placeholder(g, af::i32, {4}, "x");
    s = af::reduce_sum(x);
    y = s;
    for (int i = 0; i < 10; ++i) {
      y = y * 2.0 - 1.0;
      if (i == 4) mid = y;
    }
    z = af::maximum(y, s, "z");
  }
  static int32_t expect_y(int32_t s, int steps = 10) {
    for (int i = 0; i < steps; ++i) s = s * 2 - 1;
    return s;
  }
};

af::Tensor feed_of(int32_t v) { return af::Tensor::from_vector<int32_t>({v, 1, 2, 3}, {4}); }

struct Counted {
  std::vector<af::Tensor> out;
  int64_t actors = 0;
};

Counted run_counted(af::Session& sess, const std::vector<af::Fetch>& fetches, const af::FeedDict& feeds) {
  int64_t before = af::runtime::node_actors_spawned();
  auto r = sess.run(fetches, feeds);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  return {*r, af::runtime::node_actors_spawned() - before};
}

}  // namespace

TEST_CASE("a chain of cheap nodes runs in its producer's actor, with the same values") {
  Chain c;
  af::FeedDict feeds{{c.x, feed_of(5)}};
  Counted apart, together;
  {
    ScopedRunPath p(kOneActorPerNode);
    auto sess = af::Session::create(c.g).value();
    apart = run_counted(sess, {c.z, c.mid, c.y}, feeds);
  }
  {
    ScopedRunPath p(kColocateOnly);
    auto sess = af::Session::create(c.g).value();
    together = run_counted(sess, {c.z, c.mid, c.y}, feeds);
    // The same plan again spawns nothing.
    CHECK(run_counted(sess, {c.z, c.mid, c.y}, feeds).actors == 0);
  }
  CHECK(apart.actors == 22);   // Sum, 20 scalar ops, Maximum
  CHECK(together.actors == 1);  // the Sum, running the other 21 after itself
  REQUIRE(apart.out.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(apart.out[i].equals(together.out[i]));
  CHECK(together.out[0].item<int32_t>() == Chain::expect_y(11));
  CHECK(together.out[1].item<int32_t>() == Chain::expect_y(11, 5));

  // With the caller's thread allowed too, the Sum keeps this plan on the actors.
  ScopedRunPath p(kAll);
  auto sess = af::Session::create(c.g).value();
  Counted all = run_counted(sess, {c.z}, feeds);
  CHECK(all.actors == 1);
  CHECK(all.out[0].equals(apart.out[0]));
}

TEST_CASE("a colocated chain under concurrent steps and one credit per edge gives each step its own values") {
  // A Sum after the chain is not cheap: the chain's last node sends to it across
  // actors, so its credits (one per edge here) hold the colocated chain back.
  for (RunPath path : {kOneActorPerNode, kColocateOnly}) {
    ScopedRunPath p(path);
    Chain c;
    auto prod = af::reduce_sum(af::reshape(c.y, af::Shape{1})) * 3.0;
    af::SessionOptions opts;
    opts.edge_capacity = 1;
    auto sess = af::Session::create(c.g, opts).value();
    auto call = sess.make_callable({prod, c.z}, {c.x}).value();
    std::atomic<int> bad{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < 40; ++i) {
          int32_t v = t * 100 + i;
          auto r = call({feed_of(v)});
          int32_t y = Chain::expect_y(v + 6);
          if (!r.ok() || (*r)[0].item<int32_t>() != 3 * y ||
              (*r)[1].item<int32_t>() != std::max(y, v + 6))
            ++bad;
        }
      });
    for (auto& th : threads) th.join();
    CHECK_MESSAGE(bad.load() == 0, "colocate=" << path.colocate_cheap_ops);
  }
}

TEST_CASE("an error in the middle of a colocated chain fails its step only, naming the node") {
  for (RunPath path : {kOneActorPerNode, kColocateOnly, kAll}) {
    ScopedRunPath p(path);
    af::Graph g;
    auto x = af::placeholder(g, af::i32, {3}, "x");
    auto s = af::reduce_sum(x);
    auto a = s + 1.0;
    auto q = af::div(a, s, "q");  // integer division by zero fails
    auto r = q * 2.0 + a;
    auto sess = af::Session::create(g).value();
    auto call = sess.make_callable({r, a}, {x}).value();
    auto zero = af::Tensor::from_vector<int32_t>({0, 0, 0}, {3});
    auto six = af::Tensor::from_vector<int32_t>({1, 2, 3}, {3});
    auto bad = call({zero});
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().message().find("'q'") != std::string::npos);
    auto good = call({six});
    REQUIRE(good.ok());
    CHECK((*good)[0].item<int32_t>() == 2 * (7 / 6) + 7);
    // Failing and succeeding steps interleaved from several threads.
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < 30; ++i) {
          bool fail = (i + t) % 3 == 0;
          auto out = call({fail ? zero : six});
          if (fail ? out.ok() : !(out.ok() && (*out)[1].item<int32_t>() == 7)) ++wrong;
        }
      });
    for (auto& th : threads) th.join();
    CHECK_MESSAGE(wrong.load() == 0, "caller=" << path.caller_runs_cheap_steps << " colocate=" << path.colocate_cheap_ops);
  }
}

TEST_CASE("a plan of only cheap nodes runs on the caller's thread: no actors, same values, concurrent callers") {
  af::Graph g;
  auto x = af::placeholder(g, af::i32, {4}, "x");
  af::Output y = x;
  for (int i = 0; i < 8; ++i) y = y * 2.0 - 1.0;
  auto id = af::identity(y, "out");
  af::FeedDict feeds{{x, feed_of(9)}};
  Counted actors, here;
  {
    ScopedRunPath p(kOneActorPerNode);
    auto sess = af::Session::create(g).value();
    actors = run_counted(sess, {id, y}, feeds);
  }
  ScopedRunPath p(kAll);
  auto sess = af::Session::create(g).value();
  here = run_counted(sess, {id, y}, feeds);
  CHECK(actors.actors == 17);
  CHECK(here.actors == 0);
  CHECK(here.out[0].equals(actors.out[0]));
  CHECK(here.out[1].equals(actors.out[1]));
  CHECK(here.out[0].to_vector<int32_t>()[0] == Chain::expect_y(9, 8));

  auto call = sess.make_callable({id}, {x}).value();
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        int32_t v = t * 1000 + i;
        auto r = call({feed_of(v)});
        if (!r.ok() || (*r)[0].to_vector<int32_t>()[0] != Chain::expect_y(v, 8)) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(wrong.load() == 0);
  REQUIRE(sess.close().ok());
  CHECK_FALSE(call({feed_of(1)}).ok());
}

TEST_CASE("steps on the caller's thread and in colocated actors are traced node by node") {
  std::string path = (std::filesystem::temp_directory_path() / "af_run_path_trace.json").string();
  for (RunPath rp : {kAll, kColocateOnly}) {
    ScopedRunPath p(rp);
    Chain c;
    af::Output fetch = c.z;
    if (rp.caller_runs_cheap_steps) fetch = af::identity(c.x * 3.0, "tripled");
    af::SessionOptions opts;
    opts.trace_path = path;
    {
      auto sess = af::Session::create(c.g, opts).value();
      for (int i = 0; i < 3; ++i) REQUIRE(sess.run({fetch}, {{c.x, feed_of(i)}}).ok());
      REQUIRE(sess.close().ok());
    }
    std::ifstream f(path);
    REQUIRE(f.good());
    std::stringstream ss;
    ss << f.rdbuf();
    std::string json = ss.str();
    std::string name = rp.caller_runs_cheap_steps ? "{\"name\":\"tripled\"" : "{\"name\":\"z\"";
    int seen = 0;
    for (size_t pos = json.find(name); pos != std::string::npos; pos = json.find(name, pos + 1)) ++seen;
    CHECK_MESSAGE(seen == 3, json.substr(0, 400));
  }
}

namespace {

// Random DAGs of known, small shapes, so that many nodes are cheap: chains and diamonds
// of them colocate behind the non-cheap ones (Sum, MatMul, Softmax), and some graphs are
// cheap all through and run on the caller's thread. A few control edges join random
// earlier and later nodes.
struct RandomGraph {
  af::Graph g;
  af::Output x;
  std::vector<af::Output> fetches;
};

void build(RandomGraph& rg, std::mt19937& rng) {
  auto& g = rg.g;
  rg.x = af::placeholder(g, af::f32, {2, 4}, "x");
  auto w = af::constant(g, af::Tensor::from({{0.5f, -1.f, 0.f, 2.f}, {1.f, 0.25f, -0.5f, 0.f},
                                             {0.f, 1.f, 1.f, -1.f}, {2.f, 0.f, 0.5f, 0.5f}}));
  std::vector<af::Output> pool{rg.x};
  int n = 4 + static_cast<int>(rng() % 28);
  for (int i = 0; i < n; ++i) {
    auto pick = [&] { return pool[rng() % pool.size()]; };
    af::Output a = pick(), b = pick(), y;
    switch (rng() % 13) {
      case 0: y = a + b; break;
      case 1: y = a - b; break;
      case 2: y = a * b; break;
      case 3: y = af::maximum(a, b); break;
      case 4: y = af::tanh(a); break;
      case 5: y = af::identity(a); break;
      case 6: y = a * 0.5; break;
      case 7: y = af::reduce_sum(a, {-1}, true) + b; break;  // Sum: not cheap
      case 8: y = af::matmul(a, w); break;                     // MatMul: not cheap
      case 9: y = af::softmax(a); break;
      case 10: y = af::transpose(af::transpose(a) * 2.0); break;
      case 11: y = af::slice(af::concat({a, b}, 1), {0, 2}, {2, 4}); break;
      default: y = af::relu(a - 0.25); break;
    }
    pool.push_back(y);
  }
  for (int i = 0; i < 3; ++i) {
    int later = static_cast<int>(rng() % static_cast<unsigned>(g.num_nodes()));
    if (later == 0) continue;
    int earlier = static_cast<int>(rng() % static_cast<unsigned>(later));
    (void)g.add_control_input(later, earlier);
  }
  int k = 1 + static_cast<int>(rng() % 3);
  for (int i = 0; i < k; ++i) rg.fetches.push_back(pool[pool.size() - 1 - rng() % std::min<size_t>(pool.size() - 1, 6)]);
}

}  // namespace

TEST_CASE("property: 200 random graphs give the same bits on one actor per node, colocated, and on the caller's thread") {
  std::mt19937 rng(1313);
  int colocated = 0, on_caller = 0;
  for (int gi = 0; gi < 200; ++gi) {
    RandomGraph rg;
    build(rg, rng);
    std::vector<af::Fetch> fetches(rg.fetches.begin(), rg.fetches.end());
    std::vector<std::unique_ptr<af::Session>> sessions;
    std::vector<int64_t> actors;
    for (RunPath path : {kOneActorPerNode, kColocateOnly, kAll}) {
      ScopedRunPath p(path);
      sessions.push_back(std::make_unique<af::Session>(af::Session::create(rg.g).value()));
      // Prepared now, under this run path.
      int64_t before = af::runtime::node_actors_spawned();
      std::vector<float> v(8, 1.0f);
      REQUIRE(sessions.back()->run(fetches, {{rg.x, af::Tensor::from_vector(v, {2, 4})}}).ok());
      actors.push_back(af::runtime::node_actors_spawned() - before);
    }
    CHECK(actors[1] <= actors[0]);
    CHECK(actors[2] <= actors[1]);
    colocated += actors[1] < actors[0] ? 1 : 0;
    on_caller += actors[2] == 0 && actors[0] > 0 ? 1 : 0;
    for (int s = 0; s < 3; ++s) {
      std::vector<float> v(8);
      for (auto& e : v) e = static_cast<float>(static_cast<int>(rng() % 21) - 10) / 4.0f;
      af::FeedDict feed{{rg.x, af::Tensor::from_vector(v, {2, 4})}};
      auto ref = sessions[0]->run(fetches, feed);
      REQUIRE_MESSAGE(ref.ok(), ref.status().to_string());
      for (size_t k = 1; k < sessions.size(); ++k) {
        auto got = sessions[k]->run(fetches, feed);
        REQUIRE_MESSAGE(got.ok(), got.status().to_string());
        for (size_t f = 0; f < ref->size(); ++f) CHECK_MESSAGE((*ref)[f].equals((*got)[f]), "graph " << gi << " path " << k);
      }
    }
  }
  // The generator exercises both mechanisms, not just one of them.
  CHECK(colocated > 50);
  CHECK(on_caller > 20);
  MESSAGE("colocated in " << colocated << " graphs, on the caller's thread in " << on_caller);
}

namespace {

af::Output recording(af::Graph& g, af::Output in, const std::string& name) {
  return aft::unary(g, "TestThreadRecording", in, name);
}

}  // namespace

TEST_CASE("a serial plan runs on the caller's thread unless its step has a deadline; branches stay on the actors") {
  ScopedRunPath p(kAll);
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {2, 4}, "x");
  auto w = af::constant(g, af::Tensor::filled(af::f32, {4, 4}, 0.5));
  // MatMul -> Relu -> MatMul -> recorder: the costly kernels lie on one path.
  auto y = recording(g, af::matmul(af::relu(af::matmul(x, w)), w), "rec");
  // Two MatMuls side by side: the actors may overlap them.
  auto branches = recording(g, af::matmul(x, w) + af::matmul(x * 2.0, w), "rec2");
  af::Tensor in = af::Tensor::filled(af::f32, {2, 4}, 1.0);

  std::vector<af::Tensor> want;
  int64_t want_actors = 0;
  {
    ScopedRunPath off(kOneActorPerNode);
    auto sess = af::Session::create(g).value();
    int64_t before = af::runtime::node_actors_spawned();
    want = sess.run({y, branches}, {{x, in}}).value();
    want_actors = af::runtime::node_actors_spawned() - before;
  }
  auto sess = af::Session::create(g).value();
  int64_t before = af::runtime::node_actors_spawned();
  int64_t steps = af::runtime::steps_on_actors();
  auto r = sess.run({y}, {{x, in}});
  REQUIRE(r.ok());
  // Its actors exist all the same (for steps with a deadline): the MatMuls and the
  // recorder; the Relu runs in its MatMul's actor.
  CHECK(af::runtime::node_actors_spawned() - before == 3);
  CHECK((*r)[0].equals(want[0]));
  CHECK(g_ran_on.load() == std::this_thread::get_id());
  CHECK(af::runtime::steps_on_actors() == steps);

  // With a deadline the caller must be free to stop waiting: the workers run the actors.
  af::RunOptions ro;
  ro.timeout_ms = 10000;
  r = sess.run(ro, {y}, {{x, in}}, {});
  REQUIRE(r.ok());
  CHECK((*r)[0].equals(want[0]));
  CHECK(g_ran_on.load() != std::this_thread::get_id());
  CHECK(af::runtime::steps_on_actors() == steps + 1);

  r = sess.run({branches}, {{x, in}});
  REQUIRE(r.ok());
  CHECK((*r)[0].equals(want[1]));
  CHECK(af::runtime::steps_on_actors() == steps + 2);
  CHECK(want_actors > 0);

  // Concurrent callers each run their own steps.
  auto call = sess.make_callable({y}, {x}).value();
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        auto out = call({in});
        if (!out.ok() || !(*out)[0].equals(want[0])) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(wrong.load() == 0);
}

TEST_CASE("close() while callers run steps on their own threads: each step answers or fails cleanly") {
  ScopedRunPath p(kAll);
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {2, 4}, "x");
  auto w = af::constant(g, af::Tensor::filled(af::f32, {4, 4}, 0.25));
  auto cheap = af::relu(x * 2.0 - 1.0);
  auto serial = af::matmul(af::matmul(x, w), w);
  af::Tensor in = af::Tensor::filled(af::f32, {2, 4}, 1.0);
  for (af::Output fetch : {cheap, serial}) {
    auto sess = af::Session::create(g).value();
    auto call = sess.make_callable({fetch}, {x}).value();
    auto want = call({in}).value();
    std::atomic<bool> closed{false};
    std::atomic<int> wrong{0}, failed_after{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&] {
        // Runs until a call after close() fails; every answer before that is right.
        for (int i = 0; i < 1000000; ++i) {
          bool after = closed.load();
          auto out = call({in});
          if (out.ok() && !(*out)[0].equals(want[0])) ++wrong;
          if (!out.ok() && after) {
            ++failed_after;
            return;
          }
        }
      });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    REQUIRE(sess.close().ok());
    closed.store(true);
    for (auto& th : threads) th.join();
    CHECK(wrong.load() == 0);
    CHECK(failed_after.load() == 4);
  }
}

TEST_CASE("the session options turn colocation and the caller's thread off for one session; the process switches still apply") {
  ScopedRunPath p(kAll);
  Chain c;
  af::FeedDict feeds{{c.x, feed_of(5)}};
  af::SessionOptions apart_opts;
  apart_opts.optimizer.colocate_cheap_ops = false;
  apart_opts.optimizer.caller_runs_small_steps = false;
  // Both sessions live in one process at once: the options are per session, not a
  // switch that the last one to be created flips for all.
  auto apart = af::Session::create(c.g, apart_opts).value();
  auto together = af::Session::create(c.g).value();
  Counted a = run_counted(apart, {c.z, c.mid, c.y}, feeds);
  Counted t = run_counted(together, {c.z, c.mid, c.y}, feeds);
  CHECK(a.actors == 22);  // Sum, 20 scalar ops, Maximum: one actor each
  CHECK(t.actors == 1);   // the Sum, running the other 21 after itself
  for (size_t i = 0; i < 3; ++i) CHECK(a.out[i].equals(t.out[i]));

  // An all-cheap plan: on the caller's thread by default (no actor at all), on actors
  // with the option off.
  af::Graph g;
  auto x = af::placeholder(g, af::i32, {4}, "x");
  auto y = af::identity(x * 2.0 - 1.0, "out");
  auto off = af::Session::create(g, apart_opts).value();
  auto on = af::Session::create(g).value();
  Counted off_run = run_counted(off, {y}, {{x, feed_of(3)}});
  Counted on_run = run_counted(on, {y}, {{x, feed_of(3)}});
  CHECK(off_run.actors == 3);
  CHECK(on_run.actors == 0);
  CHECK(on_run.out[0].equals(off_run.out[0]));

  // A serial plan (MatMul -> Relu -> MatMul -> recorder) stays on the actors too.
  af::Graph sg;
  auto sx = af::placeholder(sg, af::f32, {2, 4}, "x");
  auto w = af::constant(sg, af::Tensor::filled(af::f32, {4, 4}, 0.5));
  auto sy = recording(sg, af::matmul(af::relu(af::matmul(sx, w)), w), "rec_serial");
  af::Tensor in = af::Tensor::filled(af::f32, {2, 4}, 1.0);
  auto serial_off = af::Session::create(sg, apart_opts).value();
  auto serial_on = af::Session::create(sg).value();
  int64_t steps = af::runtime::steps_on_actors();
  auto r_off = serial_off.run({sy}, {{sx, in}});
  REQUIRE(r_off.ok());
  CHECK(af::runtime::steps_on_actors() == steps + 1);
  auto r_on = serial_on.run({sy}, {{sx, in}});
  REQUIRE(r_on.ok());
  CHECK(g_ran_on.load() == std::this_thread::get_id());
  CHECK(af::runtime::steps_on_actors() == steps + 1);
  CHECK((*r_on)[0].equals((*r_off)[0]));

  // The process-wide switch off wins over a session's default (both must allow).
  ScopedRunPath none(kOneActorPerNode);
  auto process_off = af::Session::create(c.g).value();
  CHECK(run_counted(process_off, {c.z, c.mid, c.y}, feeds).actors == 22);
}
