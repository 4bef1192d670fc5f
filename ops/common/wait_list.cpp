#include "common/wait_list.h"

#include "actorflow/library_threads.h"

#include <condition_variable>
#include <thread>
#include <vector>

namespace actorflow::coordination {
namespace {

// One thread for the process: it sleeps until the earliest deadline and runs the
// callbacks that are due. Never destroyed: waiters may still expire during exit.
class DeadlineTimer {
 public:
  static DeadlineTimer& get() {
    static DeadlineTimer* t = new DeadlineTimer();
    return *t;
  }
  void schedule(Clock::time_point at, std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    due_.emplace(at, std::move(fn));
    cv_.notify_one();
  }

 private:
  DeadlineTimer() : thread_([this] { run(); }) { thread_.detach(); }
  void run() {
    enter_library_thread("af-deadlines");
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      if (due_.empty()) {
        cv_.wait(lock);
        continue;
      }
      auto first = due_.begin();
      if (Clock::now() < first->first) {
        cv_.wait_until(lock, first->first);
        continue;
      }
      std::vector<std::function<void()>> run_now;
      auto now = Clock::now();
      while (!due_.empty() && due_.begin()->first <= now) {
        run_now.push_back(std::move(due_.begin()->second));
        due_.erase(due_.begin());
      }
      lock.unlock();
      for (auto& fn : run_now) fn();
      lock.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<Clock::time_point, std::function<void()>> due_;
  std::thread thread_;
};

}  // namespace

void WaitList::add(std::function<bool()> ready, std::function<void()> expire, Clock::time_point deadline) {
  if (ready()) return;
  uint64_t id = next_id_++;
  waiters_[id] = Waiter{std::move(ready), std::move(expire)};
  std::weak_ptr<WaitList> self = weak_from_this();
  DeadlineTimer::get().schedule(deadline, [self, id] {
    if (auto me = self.lock()) me->expire(id);
  });
}

void WaitList::notify() {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->second.ready()) it = waiters_.erase(it);
    else ++it;
  }
}

void WaitList::expire(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return;
  Waiter w = std::move(it->second);
  waiters_.erase(it);
  w.expire();
}

}  // namespace actorflow::coordination
