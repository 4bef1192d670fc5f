// Examples per second from the end of a warm-up to the last step of a run. The first steps of a
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
  // Examples per second from the end of the warm-up to the last update(), whenever it is
  // asked: what a run does after its last step (a test-set evaluation, the last
  // checkpoint) is not training. 0 when the run ended within the warm-up.
  double per_second() const;

 private:
  int64_t warmup_;
  bool started_ = false;
  int64_t steps0_ = 0, examples0_ = 0;
  int64_t steps1_ = 0, examples1_ = 0;
  std::chrono::steady_clock::time_point t0_, t1_;
};

}  // namespace actorflow::net

AF_PUBLIC_END
