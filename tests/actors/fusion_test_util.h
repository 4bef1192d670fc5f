// What the fusion passes' tests share: a fixture that gives every node its own actor (so
// that counting actors shows what a pass fused), random operands, one counted step, a
// counted training run and the values of a model's variables after it.
#pragma once
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/runtime/actor_count.h>
#include <actorflow/runtime/run_path.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

namespace aft {

namespace af = actorflow;

// Cheap nodes must not move into their producers' actors (or onto the caller's thread)
// while a case counts actors. Set per case, not per file: the other files of a test
// binary run with the default run path.
struct OneActorPerNode {
  af::runtime::ScopedRunPath one_actor_per_node_{af::runtime::RunPath{false, false}};
};

// Uniform in [-1, 1), f32 or f64.
inline af::Tensor random_tensor(af::DType t, const af::Shape& shape, std::mt19937& rng) {
  af::Tensor x(t, shape);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    if (t == af::f32) x.data<float>()[i] = static_cast<float>(u(rng));
    else x.data<double>()[i] = u(rng);
  }
  return x;
}

// A step's fetched values and the node actors spawned to prepare and run it.
struct Counted {
  std::vector<af::Tensor> out;
  int64_t actors = 0;
};

inline Counted run_counted(af::Graph& g, const af::SessionOptions& o, const std::vector<af::Fetch>& fetches,
                           const af::FeedDict& feeds = {}, const std::vector<af::Operation>& targets = {}) {
  auto sess = af::Session::create(g, o).value();
  REQUIRE(sess.run_init().ok());
  const int64_t before = af::runtime::node_actors_spawned();
  auto r = sess.run(fetches, feeds, targets);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  return {*r, af::runtime::node_actors_spawned() - before};
}

// A training run: each step's loss, the node actors its first step spawned, and the
// named variables' values at the end.
struct Trained {
  std::vector<float> losses;
  int64_t first_step_actors = 0;
  std::vector<af::Tensor> variables;
};

// `steps` steps of `train` in a new session of g with options `o`, fetching `loss`, on the
// feeds that `feeds(step)` gives.
inline Trained train_counted(af::Graph& g, const af::SessionOptions& o, const af::Output& loss,
                             const af::Operation& train, int steps, const std::function<af::FeedDict(int)>& feeds,
                             const std::vector<std::string>& variables) {
  auto sess = af::Session::create(g, o).value();
  REQUIRE(sess.run_init().ok());
  Trained t;
  for (int s = 0; s < steps; ++s) {
    const af::FeedDict f = feeds(s);
    const int64_t before = af::runtime::node_actors_spawned();
    auto r = sess.run({loss}, f, {train});
    if (s == 0) t.first_step_actors = af::runtime::node_actors_spawned() - before;
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    t.losses.push_back((*r)[0].item<float>());
  }
  for (const std::string& v : variables) {
    auto var = g.find_output(v);
    REQUIRE_MESSAGE(var.ok(), var.status().to_string());
    auto r = sess.run({*var});
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    t.variables.push_back((*r)[0]);
  }
  return t;
}

}  // namespace aft
