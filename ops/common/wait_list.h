// Async kernels that wait for other processes (a sync round, the slowest worker's clock)
// park a waiter here instead of blocking a scheduler thread: the resource re-checks its
// waiters after every change, and one process-wide timer thread expires those whose
// deadline passes first. Waiters complete under the resource's lock; a waiter's
// callbacks must not block.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

namespace actorflow::coordination {

using Clock = std::chrono::steady_clock;

class WaitList : public std::enable_shared_from_this<WaitList> {
 public:
  // The owning resource's lock: add, notify and expiry all hold it. It lives here so
  // that an expiry racing the resource's end never touches a freed mutex.
  std::mutex mu;

  // With mu held: calls `ready` now and after every notify() until it returns true (it
  // completes the waiter itself then); if `deadline` comes first, `expire` runs instead.
  // Exactly one of them finishes the waiter.
  void add(std::function<bool()> ready, std::function<void()> expire, Clock::time_point deadline);
  // With mu held: re-checks every waiter.
  void notify();
  size_t size() const { return waiters_.size(); }

 private:
  struct Waiter {
    std::function<bool()> ready;
    std::function<void()> expire;
  };
  void expire(uint64_t id);

  std::map<uint64_t, Waiter> waiters_;
  uint64_t next_id_ = 1;
};

}  // namespace actorflow::coordination
