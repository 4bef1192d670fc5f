// Small pieces both distributed training loops (parameter servers, all-reduce) use.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <algorithm>
#include <vector>

#include <actorflow/actorflow.h>

namespace kit {

// Rows `order[b..e)` of t, as one tensor.
actorflow::Tensor gather_rows(const actorflow::Tensor& t, const std::vector<int64_t>& order, size_t b, size_t e);

// What a lost or restarted task looks like from a step: waiting (and restoring) cures it.
bool retryable(const actorflow::Status& s);

// The mean loss over this task's latest steps (TrainResult::last_loss: the last epoch's),
// for the progress lines too: a mean since the process started says little once a
// restarted task has trained a while.
class RecentLoss {
 public:
  explicit RecentLoss(int64_t steps) : cap_(static_cast<size_t>(std::max<int64_t>(1, steps))) {}
  void add(double loss) {
    window_.push_back(loss);
    sum_ += loss;
    if (window_.size() > cap_) {
      sum_ -= window_.front();
      window_.pop_front();
    }
  }
  double mean() const { return window_.empty() ? 0 : sum_ / static_cast<double>(window_.size()); }

 private:
  size_t cap_;
  std::deque<double> window_;
  double sum_ = 0;
};

// The trainable variables' bytes.
int64_t model_bytes(const actorflow::Graph& g);

}  // namespace kit
