// The daemon's worker threads (worker_pool.h).
#include "worker_pool.h"

#include "actorflow/library_threads.h"

#include <algorithm>

namespace actorflow::net {

WorkerPool::WorkerPool(int threads, int max_threads) {
  threads = std::max(1, threads);
  max_threads_ = static_cast<size_t>(std::max(threads, max_threads));
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { loop(); });
}

WorkerPool::~WorkerPool() { stop(); }

void WorkerPool::post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(job));
    if (!stopping_ && static_cast<size_t>(idle_) < jobs_.size() && threads_.size() < max_threads_)
      threads_.emplace_back([this] { loop(); });
  }
  cv_.notify_one();
}

bool WorkerPool::drain(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_until(lock, deadline, [this] { return jobs_.empty() && running_ == 0; });
}

void WorkerPool::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  // No thread is added once stopping_ is set: the vector holds still.
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  std::lock_guard<std::mutex> lock(mu_);
  threads_.clear();
}

int WorkerPool::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_ + static_cast<int>(jobs_.size());
}

void WorkerPool::loop() {
  enter_library_thread("af-daemon-work");
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    --idle_;
    if (jobs_.empty()) return;  // stopping, and nothing left
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    ++running_;
    lock.unlock();
    job();
    lock.lock();
    --running_;
    if (jobs_.empty() && running_ == 0) idle_cv_.notify_all();
  }
}

}  // namespace actorflow::net
