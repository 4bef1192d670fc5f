// Runtime overhead: a 1,000-node chain of scalar adds (microseconds per node firing),
// the round trip of a one-node graph, and pipelining of two independent heavy branches.
// Ours and each peer run alternately (bench/harness/bench.h); `--quick` for fewer pairs.
#include <actorflow/actorflow.h>
#include <actorflow/runtime/run_path.h>

#include <functional>
#include <memory>
#include <string>

#include "harness/bench.h"

#ifdef AF_HAVE_TORCH
#include "peers/torch_peers.h"
#endif

namespace af = actorflow;

namespace {

std::string ours_threads(int intra) {
  return "ActorFlow local session, intra_op_threads=" + std::to_string(intra) + ", CAF scheduler threads from AF_NUM_THREADS (bench/run: BENCH_THREADS), "
         "steps through Session::make_callable";
}

// The run path's switches (runtime::RunPath) for the sessions a case prepares.
constexpr af::runtime::RunPath kOneActorPerNode{false, false, false};
constexpr af::runtime::RunPath kColocated{false, true, false};

std::string run_path_words(const af::runtime::RunPath& p) {
  if (p.caller_runs_cheap_steps) return "; the plan is all cheap nodes, so each step runs on the caller's thread (run path)";
  if (p.colocate_cheap_ops) return "; on the actors, cheap nodes colocated in their producer's actor";
  return "; on the actors, one actor per node";
}

// The graph and session of one case, kept alive by the samplers that share them.
struct Fixture {
  af::Graph g;
  std::unique_ptr<af::Session> sess;
  af::Output x, y, a, b;
  af::Tensor in;
  // The prepared step (Session::make_callable): the path an inference loop uses.
  af::Callable step;
};

// A callable of a 1,000-node chain of scalar adds, prepared under `path`; the sample is
// microseconds per node.
std::shared_ptr<Fixture> make_chain(int n, const af::runtime::RunPath& path) {
  af::runtime::ScopedRunPath scoped(path);
  auto f = std::make_shared<Fixture>();
  f->x = af::placeholder(f->g, af::f32, {}, "x");
  auto one = af::constant(f->g, 1.0f, "one");
  af::Output y = f->x;
  for (int i = 0; i < n; ++i) y = y + one;
  f->y = y;
  af::SessionOptions opts;
  opts.intra_op_threads = bench::threads();
  opts.optimizer.fuse_elementwise = false;
  f->sess = std::make_unique<af::Session>(af::Session::create(f->g, opts).value());
  f->step = bench::must(f->sess->make_callable({f->y}, {f->x}), "make_callable");
  f->in = af::Tensor::scalar(0.0f);
  return f;
}

std::function<double()> chain_sample(std::shared_ptr<Fixture> f, int n, int reps) {
  return [f, n, reps] {
    double total = 0;
    for (int r = 0; r < reps; ++r) {
      auto t0 = bench::Clock::now();
      auto out = f->step({f->in});
      total += bench::seconds_since(t0);
      bench::check(bench::must(out, "chain")[0].item<float>() == static_cast<float>(n), "chain");
    }
    return total * 1e6 / (static_cast<double>(n) * reps);
  };
}

bench::Prepared chain(const bench::Params& p) {
  const int n = static_cast<int>(p.at("n"));
  const int reps = static_cast<int>(p.at("reps"));
  auto f = std::make_shared<Fixture>();
  f->x = af::placeholder(f->g, af::f32, {}, "x");
  auto one = af::constant(f->g, 1.0f, "one");
  af::Output y = f->x;
  for (int i = 0; i < n; ++i) y = y + one;
  f->y = y;
  af::SessionOptions opts;
  opts.intra_op_threads = bench::threads();
  // The case measures one node firing per add: elementwise fusion would run the chain
  // as 16 nodes (as Grappler would fold it, which is why TensorFlow's is off here too).
  opts.optimizer.fuse_elementwise = false;
  f->sess = std::make_unique<af::Session>(af::Session::create(f->g, opts).value());
  f->step = bench::must(f->sess->make_callable({f->y}, {f->x}), "make_callable");
  f->in = af::Tensor::scalar(0.0f);
  bench::Prepared prep;
  prep.sides.push_back({"ours", ours_threads(bench::threads()) + run_path_words(af::runtime::run_path()), [f, n, reps] {
                          double total = 0;
                          for (int r = 0; r < reps; ++r) {
                            auto t0 = bench::Clock::now();
                            auto out = f->step({f->in});
                            total += bench::seconds_since(t0);
                            bench::check(bench::must(out, "chain")[0].item<float>() == static_cast<float>(n), "chain");
                          }
                          return total * 1e6 / (static_cast<double>(n) * reps);
                        }});
#ifdef AF_HAVE_TORCH
  peers::torch_set_threads(bench::threads());
  auto t = peers::torch_scalar_chain(n, reps);
  prep.sides.push_back({"libtorch", t.threads, t.sample});
#endif
  return prep;
}

bench::Prepared step(const bench::Params& p) {
  const int reps = static_cast<int>(p.at("reps"));
  auto f = std::make_shared<Fixture>();
  f->x = af::placeholder(f->g, af::f32, {}, "x");
  f->y = af::identity(f->x);
  af::SessionOptions opts;
  opts.intra_op_threads = bench::threads();
  f->sess = std::make_unique<af::Session>(af::Session::create(f->g, opts).value());
  f->step = bench::must(f->sess->make_callable({f->y}, {f->x}), "make_callable");
  f->in = af::Tensor::scalar(1.0f);
  bench::Prepared prep;
  std::string words = ours_threads(bench::threads()) + ", a make_callable step of Identity on a fed scalar" +
                      run_path_words(af::runtime::run_path());
  prep.sides.push_back({"ours", words, [f, reps] {
                          af::Result<std::vector<af::Tensor>> out = std::vector<af::Tensor>{};
                          auto t0 = bench::Clock::now();
                          for (int r = 0; r < reps; ++r) out = f->step({f->in});
                          double s = bench::seconds_since(t0);
                          bench::check(bench::must(out, "identity")[0].item<float>() == 1.0f, "identity");
                          return s * 1e6 / reps;
                        }});
#ifdef AF_HAVE_TORCH
  peers::torch_set_threads(bench::threads());
  auto t = peers::torch_one_op(reps);
  prep.sides.push_back({"libtorch", t.threads, t.sample});
#endif
  return prep;
}

// Two independent branches of single-threaded heavy work (chains of 256x256 matmuls,
// 1 intra-op thread): fetched together (the actors overlap them on the two cores)
// versus one after another in the same session. The "peer" is that sequential run, so
// the case is an internal ratio (Case::internal): the driver keeps it out of the peer table.
bench::Prepared pipelining(const bench::Params& p) {
  const int64_t n = p.at("n");
  const int depth = static_cast<int>(p.at("depth"));
  auto f = std::make_shared<Fixture>();
  f->x = af::placeholder(f->g, af::f32, {n, n}, "x");
  auto w = af::constant(f->g, af::Tensor::filled(af::f32, {n, n}, 1.0 / static_cast<double>(n)), "w");
  auto branch = [&](const char* name) {
    af::NameScope s(f->g, name);
    af::Output y = f->x;
    for (int i = 0; i < depth; ++i) y = af::matmul(y, w);
    return y;
  };
  f->a = branch("a");
  f->b = branch("b");
  af::SessionOptions opts;
  opts.intra_op_threads = 1;
  f->sess = std::make_unique<af::Session>(af::Session::create(f->g, opts).value());
  f->in = af::Tensor::filled(af::f32, {n, n}, 1.0);
  auto both = bench::must(f->sess->make_callable({f->a, f->b}, {f->x}), "make_callable");
  auto only_a = bench::must(f->sess->make_callable({f->a}, {f->x}), "make_callable");
  auto only_b = bench::must(f->sess->make_callable({f->b}, {f->x}), "make_callable");
  bench::Prepared prep;
  prep.sides.push_back({"ours", ours_threads(1) + ", both branches in one run", [f, both] {
                          auto t0 = bench::Clock::now();
                          auto out = both({f->in});
                          double s = bench::seconds_since(t0);
                          bench::must(out, "pipelining together");
                          return s * 1e3;
                        }});
  prep.sides.push_back({"self-sequential", ours_threads(1) + ", same session, one branch per run", [f, only_a, only_b] {
                          auto t0 = bench::Clock::now();
                          auto o1 = only_a({f->in});
                          auto o2 = only_b({f->in});
                          double s = bench::seconds_since(t0);
                          bench::must(o1, "pipelining a");
                          bench::must(o2, "pipelining b");
                          return s * 1e3;
                        }});
  return prep;
}

// The actors' own cost, which the run path skips for plans like the two above: the chain
// with one actor per node against the same chain colocated in one actor.
bench::Prepared actor_chain(const bench::Params& p) {
  const int n = static_cast<int>(p.at("n"));
  const int reps = static_cast<int>(p.at("reps"));
  bench::Prepared prep;
  prep.sides.push_back({"ours", ours_threads(bench::threads()) + run_path_words(kOneActorPerNode),
                        chain_sample(make_chain(n, kOneActorPerNode), n, reps)});
  prep.sides.push_back({"colocated", ours_threads(bench::threads()) + run_path_words(kColocated),
                        chain_sample(make_chain(n, kColocated), n, reps)});
  return prep;
}

// A one-node step's round trip through an actor (caller -> CAF worker -> caller) against
// the same step on the caller's thread.
bench::Prepared actor_step(const bench::Params& p) {
  const int reps = static_cast<int>(p.at("reps"));
  auto make = [](const af::runtime::RunPath& path) {
    af::runtime::ScopedRunPath scoped(path);
    auto f = std::make_shared<Fixture>();
    f->x = af::placeholder(f->g, af::f32, {}, "x");
    f->y = af::identity(f->x);
    af::SessionOptions opts;
    opts.intra_op_threads = bench::threads();
    f->sess = std::make_unique<af::Session>(af::Session::create(f->g, opts).value());
    f->step = bench::must(f->sess->make_callable({f->y}, {f->x}), "make_callable");
    f->in = af::Tensor::scalar(1.0f);
    return f;
  };
  auto sample = [reps](std::shared_ptr<Fixture> f) {
    return [f, reps] {
      af::Result<std::vector<af::Tensor>> out = std::vector<af::Tensor>{};
      auto t0 = bench::Clock::now();
      for (int r = 0; r < reps; ++r) out = f->step({f->in});
      double s = bench::seconds_since(t0);
      bench::check(bench::must(out, "identity")[0].item<float>() == 1.0f, "identity");
      return s * 1e6 / reps;
    };
  };
  bench::Prepared prep;
  prep.sides.push_back({"ours", ours_threads(bench::threads()) + run_path_words(kOneActorPerNode), sample(make(kOneActorPerNode))});
  prep.sides.push_back({"caller-thread", ours_threads(bench::threads()) + run_path_words(af::runtime::RunPath{}),
                        sample(make(af::runtime::RunPath{}))});
  return prep;
}

BENCH_CASE(bench::Case{.name = "executor_overhead",
                       .unit = "us",
                       .higher_is_better = false,
                       .work = "1,000-node chain of f32 scalar adds, time per node (one run / 1000)",
                       .params = [](bool) {
                         return bench::Params{{{"n", 1000}, {"reps", 10}}, {{"kind", "scalar_chain"}}};
                       },
                       .prepare = chain});

BENCH_CASE(bench::Case{.name = "step_latency",
                       .unit = "us",
                       .higher_is_better = false,
                       .work = "round trip of one run of a one-node graph on an f32 scalar",
                       .params = [](bool) {
                         return bench::Params{{{"reps", 200}}, {{"kind", "one_op"}}};
                       },
                       .prepare = step,
                       .note = "target: ours <= 3us"});

BENCH_CASE(bench::Case{.name = "pipelining",
                       .unit = "ms",
                       .higher_is_better = false,
                       .work = "two independent branches of 8 f32 256x256 matmuls, 1 intra-op thread",
                       .params = [](bool) {
                         return bench::Params{{{"n", 256}, {"depth", 8}}, {{"kind", "pipelining"}}};
                       },
                       .prepare = pipelining,
                       .note = "internal ratio, no external peer; target: ratio <= 0.59 (sequential / together = 1.7x)",
                       .internal = true});

BENCH_CASE(bench::Case{.name = "actor_overhead",
                       .unit = "us",
                       .higher_is_better = false,
                       .work = "the executor_overhead chain on the actors: one actor per node, against one colocated actor",
                       .params = [](bool) {
                         return bench::Params{{{"n", 1000}, {"reps", 10}}, {{"kind", "actor_chain"}}};
                       },
                       .prepare = actor_chain,
                       .note = "internal ratio: what an actor hop costs per node",
                       .internal = true});

BENCH_CASE(bench::Case{.name = "actor_step_latency",
                       .unit = "us",
                       .higher_is_better = false,
                       .work = "the step_latency step through an actor, against the caller's thread",
                       .params = [](bool) {
                         return bench::Params{{{"reps", 200}}, {{"kind", "actor_step"}}};
                       },
                       .prepare = actor_step,
                       .note = "internal ratio: the caller -> CAF worker -> caller round trip",
                       .internal = true});

}  // namespace

int main(int argc, char** argv) { return bench::main(argc, argv); }

