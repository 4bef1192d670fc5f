// Runs predictions off the HTTP threads. With batching on, requests for the same loaded
// version that arrive within batch_timeout of the first one waiting are merged (up to
// max_batch_size rows) into one session step, and the step's rows are split back;
// without it, each request is its own step. Either way `threads` workers run steps.
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <actorflow/actorflow.h>

#include "metrics.h"
#include "model_manager.h"

namespace serve {

struct BatchOptions {
  bool enabled = false;
  int64_t max_batch_size = 32;       // rows
  int64_t batch_timeout_micros = 1000;
  int threads = 4;
};

class Batcher {
 public:
  using Done = std::function<void(actorflow::Result<actorflow::Tensor>)>;
  Batcher(BatchOptions options, Metrics& metrics);
  ~Batcher();  // answers what is queued, then stops the workers
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // `done` is called once, on a worker thread, with x's predictions (or the step's error).
  void submit(std::shared_ptr<const LoadedModel> model, actorflow::Tensor x, Done done);

 private:
  struct Task {
    std::shared_ptr<const LoadedModel> model;
    actorflow::Tensor x;
    Done done;
    std::chrono::steady_clock::time_point arrived;
  };
  void work();
  // Takes the oldest task and, batching, the queued tasks that may join it; waits up to
  // the first one's deadline for more while the batch has room. Called with mu_ held.
  std::vector<Task> take_batch(std::unique_lock<std::mutex>& lock);
  void run(std::vector<Task> batch);

  BatchOptions options_;
  Metrics& metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace serve
