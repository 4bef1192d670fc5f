// Examples per second from the end of a warm-up to the end of a run. The first steps of a
// run build kernels and caches, and in a cluster dial the daemons, register partitions and
// wait for the other workers; a benchmark's peers leave theirs out (bench/python's
// TensorFlow scripts time from the 51st step of each worker), so the steady figure is the
// one to compare. The training loops (training_loop.h) report it as
// TrainResult::steady_examples_per_second.
#pragma once
#include "actorflow/api.h"
#include <chrono>
#include <cstdint>

AF_PUBLIC_BEGIN

namespace actorflow::net {

// The warm-up the training loops leave out: this many steps of each worker.
constexpr int64_t kWarmupStepsPerWorker = 50;

class SteadyRate {
 public:
  explicit SteadyRate(int64_t warmup_steps) : warmup_(warmup_steps) {}
  // After each step, with the run's steps and examples so far (a cluster's: global steps).
  void update(int64_t steps, int64_t examples);
  // Examples per second since the warm-up ended; 0 when the run ended within it.
  double per_second(int64_t steps, int64_t examples) const;

 private:
  int64_t warmup_;
  bool started_ = false;
  int64_t steps0_ = 0, examples0_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace actorflow::net

AF_PUBLIC_END
