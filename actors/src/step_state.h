// The client's side of one step: where fetched tensors land and how the caller waits.
// Node actors that produce a fetch (or run a target) report here; the last report
// completes the step.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "actorflow/tensor.h"

namespace actorflow::runtime {

// A hint to the core that this thread is spinning (x86's pause; a no-op elsewhere).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

class StepState {
 public:
  StepState(int64_t step_id, int num_results, int pending)
      : step_id_(step_id), results_(static_cast<size_t>(num_results)), remaining_(pending) {}

  int64_t step_id() const { return step_id_; }
  void set_result(int i, Tensor t) { results_[static_cast<size_t>(i)] = std::move(t); }
  // The first error wins: it is the root cause; later ones are its echoes.
  void fail(const Status& s) {
    std::function<void(const Status&)> hook;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_.ok()) return;
      error_ = s;
      hook = std::move(on_first_error_);
    }
    if (hook) hook(s);
  }
  // Called once with the step's first error, on the thread that reports it (at once
  // when the step has failed already). It must not block or take the reporter's locks.
  void on_first_error(std::function<void(const Status&)> hook) {
    Status failed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (error_.ok()) {
        on_first_error_ = std::move(hook);
        return;
      }
      failed = error_;
    }
    hook(failed);
  }
  // One fetch or target reported.
  void finish_one() {
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) complete();
  }
  // Ends the step now (session closing): waiters get `s`.
  void cancel(const Status& s) {
    fail(s);
    complete();
  }
  bool done() const { return done_.load(std::memory_order_acquire); }

  // Waiting costs: waking a sleeping thread takes ~100 us on our VMs while a short step
  // finishes in a few microseconds, but spinning steals a core from a long step's
  // kernels. So: spin for `spin` (short steps), then yield the core to runnable workers
  // while polling for up to `yield_for`, then sleep. Returns false if `deadline` passed
  // first (the step goes on; the caller stops waiting for it).
  bool wait(std::chrono::microseconds spin, std::chrono::steady_clock::time_point deadline = kNoDeadline,
            std::chrono::microseconds yield_for = std::chrono::microseconds(3000)) {
    if (done()) return true;
    auto start = std::chrono::steady_clock::now();
    while (!done() && std::chrono::steady_clock::now() - start < spin)
      for (int i = 0; i < 64; ++i) cpu_relax();
    while (!done() && std::chrono::steady_clock::now() - start < spin + yield_for) std::this_thread::yield();
    if (done()) return true;
    std::unique_lock<std::mutex> lock(mu_);
    if (deadline == kNoDeadline) {
      cv_.wait(lock, [&] { return done(); });
      return true;
    }
    return cv_.wait_until(lock, deadline, [&] { return done(); });
  }
  static constexpr std::chrono::steady_clock::time_point kNoDeadline = std::chrono::steady_clock::time_point::max();

  Status status() const {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

  // The async kernels of this step still running, other than _Send/_Recv (whose waits the
  // partition's rendezvous describes): what a deadline's message names, as
  // "AccumulatorTakeGradient 'sync_replicas/take'".
  void async_started(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    running_async_.push_back(what);
  }
  void async_done(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find(running_async_.begin(), running_async_.end(), what);
    if (it != running_async_.end()) running_async_.erase(it);
  }
  // "" when none runs.
  std::string describe_running() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out;
    for (const std::string& k : running_async_) out += (out.empty() ? "" : ", ") + k;
    return out;
  }
  std::vector<Tensor>& results() { return results_; }

 private:
  void complete() {
    bool expected = false;
    if (!done_.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) return;
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }

  int64_t step_id_;
  std::vector<Tensor> results_;
  std::atomic<int> remaining_;
  std::atomic<bool> done_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Status error_;
  std::function<void(const Status&)> on_first_error_;
  std::vector<std::string> running_async_;
};

}  // namespace actorflow::runtime
