#include "actorflow/net/steady_rate.h"

namespace actorflow::net {

void SteadyRate::update(int64_t steps, int64_t examples) {
  if (steps < warmup_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!started_) {
    started_ = true;
    steps0_ = steps;
    examples0_ = examples;
    t0_ = now;
  }
  steps1_ = steps;
  examples1_ = examples;
  t1_ = now;
}

double SteadyRate::per_second() const {
  if (!started_ || steps1_ <= steps0_) return 0;
  const double s = std::chrono::duration<double>(t1_ - t0_).count();
  return s > 0 ? static_cast<double>(examples1_ - examples0_) / s : 0;
}

}  // namespace actorflow::net
