#include "actorflow/runtime/actor_count.h"

#include "actor_count_internal.h"

namespace actorflow::runtime {

std::atomic<int64_t> g_node_actors_spawned{0};

int64_t node_actors_spawned() { return g_node_actors_spawned.load(std::memory_order_relaxed); }

}  // namespace actorflow::runtime
