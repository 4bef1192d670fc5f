#include "actorflow/runtime/actor_count.h"

#include "actor_count_internal.h"

namespace actorflow::runtime {

std::atomic<int64_t> g_node_actors_spawned{0};
std::atomic<int64_t> g_steps_on_actors{0};

int64_t node_actors_spawned() { return g_node_actors_spawned.load(std::memory_order_relaxed); }

int64_t steps_on_actors() { return g_steps_on_actors.load(std::memory_order_relaxed); }

}  // namespace actorflow::runtime
