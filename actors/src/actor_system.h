// The process-wide CAF actor system that hosts every session's node actors.
#pragma once
#include <caf/all.hpp>

namespace actorflow::runtime {

caf::actor_system& actor_system();

}  // namespace actorflow::runtime
