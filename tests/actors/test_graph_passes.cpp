// Plan-time graph passes: constant folding, common-subexpression elimination and pruning.
// Each is seen working through the actors it saves, can be switched off, and 200 random
// graphs full of constants, duplicates and elementwise chains give bit-for-bit the same
// results with every pass on, every pass off, and on the sequential reference evaluator.
// (The fusion passes have their own tests: test_fusion.cpp, test_elementwise_fusion.cpp.)
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/runtime/actor_count.h>
#include <actorflow/runtime/run_path.h>

#include <random>

#include "../../actors/src/graph_passes.h"

namespace af = actorflow;

namespace {

// The fusion passes follow `fuse`: off by default, as the actor counts below are of
// unfused nodes.
af::SessionOptions passes(bool fold, bool cse, bool prune, bool fuse = false) {
  af::SessionOptions o;
  o.optimizer.constant_folding = fold;
  o.optimizer.common_subexpressions = cse;
  o.optimizer.prune = prune;
  o.optimizer.fuse_matmul_bias_relu = fuse;
  o.optimizer.fuse_elementwise = fuse;
  return o;
}

// Node actors spawned to prepare and run `fetches` once; checks the value too. The
// counts are of one actor per node: cheap nodes stay out of their producers' actors
// and off the caller's thread here.
int64_t actors_for(af::Graph& g, const af::SessionOptions& opts, const std::vector<af::Fetch>& fetches,
                   const af::FeedDict& feeds, const std::vector<float>& want) {
  af::runtime::ScopedRunPath one_actor_per_node(af::runtime::RunPath{false, false});
  auto sess = af::Session::create(g, opts).value();
  int64_t before = af::runtime::node_actors_spawned();
  auto out = sess.run(fetches, feeds);
  REQUIRE(out.ok());
  CHECK((*out)[0].to_vector<float>() == want);
  return af::runtime::node_actors_spawned() - before;
}

}  // namespace

TEST_CASE("constant folding computes constant-only nodes once, at plan time") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {2}, "x");
  auto c = af::constant(g, af::Tensor::from({1.f, 2.f})) * 3.0f + 1.0f;  // Mul, Add: constant
  auto y = x + c;
  af::FeedDict feed{{x, af::Tensor::from({10.f, 20.f})}};
  std::vector<float> want{14.f, 27.f};
  // Folded: only the final Add runs as an actor; unfolded: Mul, Add and Add.
  CHECK(actors_for(g, passes(true, true, true), {y}, feed, want) == 1);
  CHECK(actors_for(g, passes(false, true, true), {y}, feed, want) == 3);
  // A fetched folded node still answers (a Const actor).
  auto sess = af::Session::create(g).value();
  auto folded = sess.run({c});
  REQUIRE(folded.ok());
  CHECK((*folded)[0].to_vector<float>() == std::vector<float>{4.f, 7.f});
}

TEST_CASE("common subexpressions run once; pruning drops what they made unneeded") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {2}, "x");
  auto a1 = (x + 1.0f) * 2.0f;
  auto a2 = (x + 1.0f) * 2.0f;  // the same computation, built twice
  auto y = a1 + a2;
  af::FeedDict feed{{x, af::Tensor::from({1.f, 2.f})}};
  std::vector<float> want{8.f, 12.f};
  CHECK(actors_for(g, passes(true, true, true), {y}, feed, want) == 3);   // Add, Mul, final Add
  CHECK(actors_for(g, passes(true, false, true), {y}, feed, want) == 5);  // both chains
  // Without pruning the merged duplicates are kept (and run, for nothing).
  CHECK(actors_for(g, passes(true, true, false), {y}, feed, want) == 5);
}

TEST_CASE("stateful nodes are never folded or merged") {
  af::Graph g;
  auto r1 = af::random_normal(g, af::Shape({3}), 0.0, 1.0, 7);
  auto r2 = af::random_normal(g, af::Shape({3}), 0.0, 1.0, 7);
  auto sess = af::Session::create(g).value();
  auto a = sess.run({r1, r2});
  auto b = sess.run({r1, r2});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  // Each random op keeps its own stream: a second run draws new numbers.
  CHECK_FALSE((*a)[0].equals((*b)[0]));
  CHECK_FALSE((*a)[1].equals((*b)[1]));
}

namespace {

struct RandomGraph {
  af::Graph g;
  af::Output x, z;
  std::vector<af::Output> fetches;
};

// Graphs rich in what the passes act on: constant subtrees, repeated computations and
// chains of elementwise ops. x and z are both [?,3] and fed 1 or 2 rows each, so a fused
// chain also meets shapes that broadcast only at run time.
void build(RandomGraph& rg, std::mt19937& rng) {
  auto& g = rg.g;
  rg.x = af::placeholder(g, af::f32, {-1, 3}, "x");
  rg.z = af::placeholder(g, af::f32, {-1, 3}, "z");
  std::vector<af::Output> pool{rg.x, rg.z, af::constant(g, af::Tensor::from({0.5f, -1.f, 2.f})),
                               af::constant(g, af::Tensor::from({{1.f, 0.f, -2.f}}))};
  int n = 5 + static_cast<int>(rng() % 30);
  for (int i = 0; i < n; ++i) {
    auto pick = [&] { return pool[rng() % pool.size()]; };
    af::Output a = pick(), b = pick(), y;
    switch (rng() % 12) {
      case 0: y = a + b; break;
      case 1: y = a - b; break;
      case 2: y = a * b; break;
      case 3: y = af::maximum(a, b); break;
      case 4: y = af::tanh(a); break;
      case 5: y = a * 0.5f; break;
      case 6: y = af::reduce_sum(a, {-1}, true) + b; break;
      // Elementwise chains (a scalar constant is the only broadcast fusion admits).
      case 8: y = af::sigmoid(a) * 2.0f - af::tanh(b); break;
      // (Bounded, and never NaN: equals() would not match NaN with itself.)
      case 9: y = af::relu(af::tanh(a) - b) + af::square(af::tanh(b)) * 0.25f; break;
      case 10: y = af::exp(af::neg(af::abs(a))) / (af::abs(b) + 1.0f); break;
      case 11: y = af::sqrt(af::abs(af::maximum(a, b)) + 3.0f) * af::minimum(af::tanh(a), af::tanh(b)); break;
      default: {
        // A duplicate of an earlier node's computation, built again.
        af::Output base = pick();
        y = (base + 1.0f) * (base + 1.0f);
        break;
      }
    }
    pool.push_back(y);
  }
  int k = 1 + static_cast<int>(rng() % 3);
  for (int i = 0; i < k; ++i) rg.fetches.push_back(pool[pool.size() - 1 - rng() % std::min<size_t>(pool.size() - 4, 6)]);
}

}  // namespace

TEST_CASE("property: 200 random graphs give identical results with every pass on and off") {
  std::mt19937 rng(2026);
  int fused_nodes = 0;
  for (int gi = 0; gi < 200; ++gi) {
    RandomGraph rg;
    build(rg, rng);
    af::SessionOptions ref_opts;
    ref_opts.executor = "sequential";
    auto on = af::Session::create(rg.g, passes(true, true, true, true)).value();
    auto off = af::Session::create(rg.g, passes(false, false, false, false)).value();
    auto ref = af::Session::create(rg.g, ref_opts).value();
    std::vector<af::Fetch> fetches(rg.fetches.begin(), rg.fetches.end());
    for (int s = 0; s < 3; ++s) {
      auto rows = [&](int r) {
        std::vector<float> v(static_cast<size_t>(r * 3));
        for (auto& e : v) e = static_cast<float>(static_cast<int>(rng() % 21) - 10) / 4.0f;
        return af::Tensor::from_vector(v, {r, 3});
      };
      // Mostly equal rows (the one-pass path); now and then 1 against 2 (a broadcast).
      const int rx = 2, rz = rng() % 4 == 0 ? 1 : 2;
      af::FeedDict feed{{rg.x, rows(rx)}, {rg.z, rows(rz)}};
      if (s == 0) {
        af::RunRequest req;
        req.fetches = fetches;
        req.feeds = feed;
        auto plan = af::make_step_plan(rg.g, req);
        REQUIRE(plan.ok());
        fused_nodes += (*af::runtime::optimize_plan(rg.g, std::move(*plan), passes(true, true, true, true).optimizer))
                           ->stats()
                           .elementwise_nodes_replaced;
      }
      auto a = on.run(fetches, feed);
      auto b = off.run(fetches, feed);
      auto c = ref.run(fetches, feed);
      REQUIRE(a.ok());
      REQUIRE(b.ok());
      REQUIRE(c.ok());
      for (size_t f = 0; f < fetches.size(); ++f) {
        INFO("graph " << gi << " step " << s << " fetch " << f);
        CHECK((*a)[f].equals((*c)[f]));
        CHECK((*b)[f].equals((*c)[f]));
        // Each fetch alone is another plan of the same session, whose passes (fusion
        // above all) may rewrite the same nodes differently.
        if (fetches.size() > 1) {
          auto one = on.run({fetches[f]}, feed);
          REQUIRE(one.ok());
          CHECK((*one)[0].equals((*c)[f]));
        }
      }
    }
  }
  // The graphs do exercise the elementwise fusion.
  MESSAGE("elementwise nodes fused over the 200 graphs: " << fused_nodes);
  CHECK(fused_nodes > 200);
}
