#include "actor_system.h"
#include "actorflow/environment.h"
#include "actorflow/library_threads.h"

#include <cstdlib>

#include "actorflow/ops/cpu_device.h"
#include "actorflow/runtime/scheduler_polling.h"

#include <caf/thread_hook.hpp>

#include <atomic>
#include <mutex>

namespace actorflow::runtime {
namespace {

std::mutex g_polling_mu;
SchedulerPolling g_polling;
bool g_started = false;

// Each scheduler worker named and under SCHED_BATCH from its start (library_threads.h).
struct LibraryThreadHook final : caf::thread_hook {
  void init(caf::actor_system&) override {}
  void thread_started() override { enter_library_thread("af-actor"); }
  void thread_terminates() override {}
};

}  // namespace

Status set_scheduler_polling(SchedulerPolling p) {
  std::lock_guard<std::mutex> lock(g_polling_mu);
  if (g_started) return failed_precondition("the actor scheduler has already started; set its polling before the first session");
  g_polling = p;
  return Status::OK();
}

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
    // Poll hard for a while before backing off (unless the cores are shared: see
    // scheduler_polling.h): a step's next message usually comes within microseconds,
    // and a sleeping worker takes ~100 us to wake on our VMs.
    SchedulerPolling polling;
    {
      std::lock_guard<std::mutex> lock(g_polling_mu);
      g_started = true;
      polling = g_polling;
    }
    size_t aggressive = static_cast<size_t>(polling.spin_polls);
    if (const char* v = environment_switch(EnvironmentSwitch::caf_aggressive_polls)) aggressive = std::strtoull(v, nullptr, 10);
    cfg->set("work-stealing.aggressive-poll-attempts", aggressive);
    size_t moderate = static_cast<size_t>(polling.sleep_polls);
    if (const char* v = environment_switch(EnvironmentSwitch::caf_moderate_polls)) moderate = std::strtoull(v, nullptr, 10);
    cfg->set("work-stealing.moderate-poll-attempts", moderate);
    cfg->set("work-stealing.moderate-sleep-duration", caf::timespan{std::chrono::microseconds(20)});
    cfg->set("work-stealing.relaxed-sleep-duration", caf::timespan{std::chrono::milliseconds(5)});
    cfg->add_thread_hook<LibraryThreadHook>();
    cfg->set("logger.verbosity", caf::atom("quiet"));
    return new caf::actor_system(*cfg);
  }();
  return *sys;
}

}  // namespace actorflow::runtime
