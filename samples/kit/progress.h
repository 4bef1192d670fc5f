// A one-line progress bar per epoch: examples/s, ETA and running loss; and the
// examples/s of a run after its warm-up.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace kit {

class ProgressBar {
 public:
  ProgressBar(int epoch, int epochs, int64_t total_examples);
  // After each step: examples in the step and its loss.
  void update(int64_t examples, double loss);
  // Ends the line with a summary ("... loss 0.42, 51234 ex/s, 1.2 s").
  void finish(const std::string& extra = "");
  double seconds() const;

 private:
  void draw(bool final);
  int epoch_, epochs_;
  int64_t total_, done_ = 0;
  double loss_sum_ = 0;
  int64_t loss_count_ = 0;
  std::chrono::steady_clock::time_point start_, last_draw_;
  bool tty_;
};

// Examples per second from the end of a warm-up to the end of a run. The first steps of a
// run build kernels and caches, and in a cluster dial the daemons, register partitions and
// wait for the other workers; a benchmark's peers leave theirs out (bench/python's
// TensorFlow scripts time from the 51st step of each worker), so the steady figure is the
// one to compare.
constexpr int64_t kWarmupStepsPerWorker = 50;

class SteadyRate {
 public:
  explicit SteadyRate(int64_t warmup_steps) : warmup_(warmup_steps) {}
  // After each step, with the run's steps and examples so far (a cluster's: global steps).
  void update(int64_t steps, int64_t examples);
  // 0 when the run ended within its warm-up.
  double per_second(int64_t steps, int64_t examples) const;

 private:
  int64_t warmup_;
  bool started_ = false;
  int64_t steps0_ = 0, examples0_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace kit
