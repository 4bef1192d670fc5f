// How many node actors the runtime has spawned in this process. A plan must get exactly
// one actor per node that is not bound into its consumers as a constant; tests check that
// through this count, without reaching into a session's executors.
#pragma once
#include <cstdint>

namespace actorflow::runtime {

// Node actors spawned since the process started (never decreases).
int64_t node_actors_spawned();

}  // namespace actorflow::runtime
