// Random DAGs for the property tests: the runtime's (one location), the remote session's,
// and the partition tests' (placed at random over several locations, where a few control
// edges between random earlier and later nodes make control edges cross locations too).
#pragma once
#include <actorflow/actorflow.h>

#include <random>
#include <string>
#include <vector>

namespace aftpart {

namespace af = actorflow;

struct PlacedDag {
  af::Graph g;
  af::Output x;
  std::vector<af::Output> fetches;
};

// `devices[i]` is a device string; "" leaves the node to the default location ({""}: an
// unplaced graph).
inline void build_placed_dag(PlacedDag& d, std::mt19937& rng, const std::vector<std::string>& devices,
                             int control_edges = 3) {
  auto& g = d.g;
  auto scoped = [&](auto make) {
    af::DeviceScope s(g, devices[rng() % devices.size()]);
    return make();
  };
  d.x = scoped([&] { return af::placeholder(g, af::f32, {-1, 4}, "x"); });
  std::vector<af::Output> pool{d.x, scoped([&] {
                                 return af::constant(g, std::vector<float>{0.5f, -1, 2, 0.25f}, af::Shape{4});
                               })};
  int n = 5 + static_cast<int>(rng() % 30);
  for (int i = 0; i < n; ++i) {
    auto pick = [&] { return pool[rng() % pool.size()]; };
    af::Output a = pick(), b = pick();
    unsigned kind = rng() % 9;
    af::Output y = scoped([&] {
      switch (kind) {
        case 0: return a + b;
        case 1: return a - b;
        case 2: return a * b;
        case 3: return af::maximum(a, b);
        case 4: return af::minimum(a, b);
        case 5: return af::tanh(a) + b;
        case 6: return af::identity(a);
        case 7: return a * 0.5;
        default: return (a + b) / 3.0;
      }
    });
    pool.push_back(y);
  }
  for (int i = 0; i < control_edges; ++i) {
    int later = static_cast<int>(rng() % static_cast<unsigned>(g.num_nodes()));
    if (later == 0) continue;
    int earlier = static_cast<int>(rng() % static_cast<unsigned>(later));
    (void)g.add_control_input(later, earlier);
  }
  int k = 1 + static_cast<int>(rng() % 3);
  for (int i = 0; i < k; ++i) d.fetches.push_back(pool[pool.size() - 1 - rng() % std::min<size_t>(pool.size() - 2, 6)]);
}

}  // namespace aftpart
