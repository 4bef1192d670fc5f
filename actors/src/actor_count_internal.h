// The counters behind actor_count.h, bumped where node actors are spawned and steps start.
#pragma once
#include <atomic>
#include <cstdint>

namespace actorflow::runtime {

extern std::atomic<int64_t> g_node_actors_spawned;
extern std::atomic<int64_t> g_steps_on_actors;

}  // namespace actorflow::runtime
