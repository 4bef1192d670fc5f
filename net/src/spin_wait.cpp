#include "spin_wait.h"
#include "actorflow/environment.h"

#include <sched.h>
#include <sys/resource.h>

#include <cstdlib>

namespace actorflow::net {

std::chrono::microseconds default_spin_budget() {
  static const std::chrono::microseconds budget = [] {
    const char* v = environment_switch(EnvironmentSwitch::net_spin_us);
    if (v == nullptr || *v == '\0') return std::chrono::microseconds(50);
    long us = std::strtol(v, nullptr, 10);
    return std::chrono::microseconds(us < 0 ? 0 : us);
  }();
  return budget;
}

namespace {

// getrusage costs a syscall: look every this many polls.
constexpr unsigned kSwitchCheckEvery = 8;

long involuntary_switches() {
  rusage u{};
  ::getrusage(RUSAGE_THREAD, &u);
  return u.ru_nivcsw;
}

}  // namespace

bool SpinWait::again() {
  if (budget_.count() <= 0) return false;
  auto now = std::chrono::steady_clock::now();
  if (!started_) {
    started_ = true;
    start_ = now;
    switches_ = involuntary_switches();
  } else if (now - start_ >= budget_) {
    return false;
  } else if (++polls_ % kSwitchCheckEvery == 0 && involuntary_switches() != switches_) {
    budget_ = std::chrono::microseconds(0);
    return false;
  }
  ::sched_yield();
  return true;
}

void run_io_spinning(asio::io_context& io, std::chrono::microseconds spin, const std::function<bool()>& armed) {
  if (spin.count() <= 0) {
    io.run();
    return;
  }
  bool ran = false;
  for (;;) {
    if (ran && (!armed || armed())) {
      SpinWait wait(spin);
      size_t n = 0;
      while ((n = io.poll()) == 0 && !io.stopped() && wait.again()) {
      }
      if (io.stopped()) return;
      if (n > 0) continue;  // a fresh budget after each handler
    }
    ran = io.run_one() > 0;
    if (!ran && io.stopped()) return;
  }
}

}  // namespace actorflow::net
