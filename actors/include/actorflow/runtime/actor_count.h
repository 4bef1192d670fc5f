// How many node actors the runtime has spawned in this process, and how many steps they
// ran. A plan must get exactly one actor per node that is not bound into its consumers as
// a constant, and a step runs either on its plan's actors or, by the run path, on its
// caller's thread without them; tests check both through these counts, without reaching
// into a session's executors. (A step on the actors may still run on the caller's
// thread: that thread runs ready actors while it would otherwise wait.)
#pragma once
#include <cstdint>

namespace actorflow::runtime {

// Node actors spawned since the process started (never decreases).
int64_t node_actors_spawned();

// Steps started on node actors since the process started (never decreases).
int64_t steps_on_actors();

}  // namespace actorflow::runtime
