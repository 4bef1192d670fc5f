// The counter behind node_actors_spawned(), bumped where node actors are spawned.
#pragma once
#include <atomic>
#include <cstdint>

namespace actorflow::runtime {

extern std::atomic<int64_t> g_node_actors_spawned;

}  // namespace actorflow::runtime
