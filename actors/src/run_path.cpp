#include "actorflow/runtime/run_path.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace actorflow::runtime {
namespace {

// "0" or "1" in the environment overrides the default.
bool env_flag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (!v) return fallback;
  if (std::strcmp(v, "0") == 0) return false;
  if (std::strcmp(v, "1") == 0) return true;
  return fallback;
}

constexpr bool kOnByDefault = true;

// Flags rather than a mutex-guarded struct: read once per prepared plan, from any thread.
std::atomic<bool> g_caller{env_flag("AF_CALLER_RUNS_CHEAP_STEPS", kOnByDefault)};
std::atomic<bool> g_serial{env_flag("AF_CALLER_RUNS_SERIAL_STEPS", kOnByDefault)};
std::atomic<bool> g_training{env_flag("AF_CALLER_RUNS_TRAINING_STEPS", kOnByDefault)};
std::atomic<bool> g_colocate{env_flag("AF_COLOCATE_CHEAP_OPS", kOnByDefault)};

}  // namespace

RunPath run_path() {
  RunPath p;
  p.caller_runs_cheap_steps = g_caller.load(std::memory_order_relaxed);
  p.caller_runs_serial_steps = g_serial.load(std::memory_order_relaxed);
  p.caller_runs_training_steps = g_training.load(std::memory_order_relaxed);
  p.colocate_cheap_ops = g_colocate.load(std::memory_order_relaxed);
  return p;
}

void set_run_path(const RunPath& p) {
  g_caller.store(p.caller_runs_cheap_steps, std::memory_order_relaxed);
  g_serial.store(p.caller_runs_serial_steps, std::memory_order_relaxed);
  g_training.store(p.caller_runs_training_steps, std::memory_order_relaxed);
  g_colocate.store(p.colocate_cheap_ops, std::memory_order_relaxed);
}

}  // namespace actorflow::runtime
