// The daemon's threads for work that must not run on its io thread: registrations, the
// freeing of partitions, and the waits for partition steps that did not end where they
// started.
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace actorflow::net {

// Threads running queued jobs; drain() waits for the queue to empty. With `max_threads`
// above `threads`, a job posted while no thread is idle gets a new thread, up to that many
// (threads that only wait for something else to happen need no cap of their own).
class WorkerPool {
 public:
  explicit WorkerPool(int threads, int max_threads = 0);
  ~WorkerPool();
  void post(std::function<void()> job);
  // Waits until no job is queued or running, or the deadline passes; true when idle.
  bool drain(std::chrono::steady_clock::time_point deadline);
  // Stops the threads after the jobs already queued.
  void stop();
  int busy() const;

 private:
  void loop();
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<std::function<void()>> jobs_;
  int running_ = 0;
  int idle_ = 0;
  size_t max_threads_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace actorflow::net
