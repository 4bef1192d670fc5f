#include "actorflow/runtime/run_path.h"

#include <atomic>
#include <cstring>

#include "actorflow/environment.h"

namespace actorflow::runtime {
namespace {

// "0" or "1" in the environment overrides the default.
bool env_flag(EnvironmentSwitch s, bool fallback) {
  const char* v = environment_switch(s);
  if (!v) return fallback;
  if (std::strcmp(v, "0") == 0) return false;
  if (std::strcmp(v, "1") == 0) return true;
  return fallback;
}

constexpr bool kOnByDefault = true;

// Flags rather than a mutex-guarded struct: read once per prepared plan, from any thread.
struct Flags {
  std::atomic<bool> caller{env_flag(EnvironmentSwitch::caller_runs_cheap_steps, kOnByDefault)};
  std::atomic<bool> serial{env_flag(EnvironmentSwitch::caller_runs_serial_steps, kOnByDefault)};
  std::atomic<bool> training{env_flag(EnvironmentSwitch::caller_runs_training_steps, kOnByDefault)};
  std::atomic<bool> colocate{env_flag(EnvironmentSwitch::colocate_cheap_ops, kOnByDefault)};
};

// Built on first use: a program's own static initializer (a test's ScopedRunPath) may set
// the run path before this file's statics would have been initialized.
Flags& flags() {
  static Flags f;
  return f;
}

}  // namespace

RunPath run_path() {
  Flags& f = flags();
  RunPath p;
  p.caller_runs_cheap_steps = f.caller.load(std::memory_order_relaxed);
  p.caller_runs_serial_steps = f.serial.load(std::memory_order_relaxed);
  p.caller_runs_training_steps = f.training.load(std::memory_order_relaxed);
  p.colocate_cheap_ops = f.colocate.load(std::memory_order_relaxed);
  return p;
}

void set_run_path(const RunPath& p) {
  Flags& f = flags();
  f.caller.store(p.caller_runs_cheap_steps, std::memory_order_relaxed);
  f.serial.store(p.caller_runs_serial_steps, std::memory_order_relaxed);
  f.training.store(p.caller_runs_training_steps, std::memory_order_relaxed);
  f.colocate.store(p.colocate_cheap_ops, std::memory_order_relaxed);
}

}  // namespace actorflow::runtime
