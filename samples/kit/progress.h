// A one-line progress bar per epoch: examples/s, ETA and running loss. (The examples/s
// of a run after its warm-up is the library's net::SteadyRate, actorflow/net/steady_rate.h.)
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

}  // namespace kit
