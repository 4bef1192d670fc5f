#include "actorflow/net/steady_rate.h"

namespace actorflow::net {

void SteadyRate::update(int64_t steps, int64_t examples) {
  if (started_ || steps < warmup_) return;
  started_ = true;
  steps0_ = steps;
  examples0_ = examples;
  t0_ = std::chrono::steady_clock::now();
}

double SteadyRate::per_second(int64_t steps, int64_t examples) const {
  if (!started_ || steps <= steps0_) return 0;
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  return s > 0 ? static_cast<double>(examples - examples0_) / s : 0;
}

}  // namespace actorflow::net
