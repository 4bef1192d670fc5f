#include "actor_system.h"

#include <cstdlib>

#include "actorflow/ops/cpu_device.h"

namespace actorflow::runtime {

caf::actor_system& actor_system() {
  // Built once and never destroyed: node actors of sessions still closing at exit may
  // hold references into it, and CAF joins its workers on destruction.
  static caf::actor_system* sys = [] {
    auto* cfg = new caf::actor_system_config();
    // Sized with the intra-op pool from one budget (cpu_thread_budget). At least two: a
    // node waiting on a stateful kernel's lock must not starve the other actors.
    size_t threads = static_cast<size_t>(cpu_thread_budget());
    if (threads < 2) threads = 2;
    cfg->set("scheduler.max-threads", threads);
    // Poll hard for a while before backing off: a step's next message usually comes
    // within microseconds, and a sleeping worker takes ~100 us to wake on our VMs.
    size_t aggressive = 2000;
    if (const char* v = std::getenv("AF_CAF_AGGRESSIVE_POLLS")) aggressive = std::strtoull(v, nullptr, 10);
    cfg->set("work-stealing.aggressive-poll-attempts", aggressive);
    cfg->set("work-stealing.moderate-poll-attempts", size_t{200});
    cfg->set("work-stealing.moderate-sleep-duration", caf::timespan{std::chrono::microseconds(20)});
    cfg->set("work-stealing.relaxed-sleep-duration", caf::timespan{std::chrono::milliseconds(5)});
    cfg->set("logger.verbosity", caf::atom("quiet"));
    return new caf::actor_system(*cfg);
  }();
  return *sys;
}

}  // namespace actorflow::runtime
