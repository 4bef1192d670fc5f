#include "spin_wait.h"

#include <sched.h>

#include <cstdlib>

namespace actorflow::net {

std::chrono::microseconds default_spin_budget() {
  static const std::chrono::microseconds budget = [] {
    const char* v = std::getenv("AF_NET_SPIN_US");
    if (v == nullptr || *v == '\0') return std::chrono::microseconds(50);
    long us = std::strtol(v, nullptr, 10);
    return std::chrono::microseconds(us < 0 ? 0 : us);
  }();
  return budget;
}

bool SpinWait::again() {
  if (budget_.count() <= 0) return false;
  auto now = std::chrono::steady_clock::now();
  if (!started_) {
    started_ = true;
    start_ = now;
  } else if (now - start_ >= budget_) {
    return false;
  }
  ::sched_yield();
  return true;
}

void run_io_spinning(asio::io_context& io, std::chrono::microseconds spin) {
  if (spin.count() <= 0) {
    io.run();
    return;
  }
  for (;;) {
    SpinWait wait(spin);
    size_t ran = 0;
    while ((ran = io.poll()) == 0 && !io.stopped() && wait.again()) {
    }
    if (io.stopped()) return;
    if (ran > 0) continue;  // a fresh budget after each handler
    if (io.run_one() == 0 && io.stopped()) return;
  }
}

}  // namespace actorflow::net
