// Runs predictions. Without batching, each request is its own session step, run at once
// on the thread that submits it (the HTTP thread, as TF Serving runs an unbatched
// predict in its request handler): no hand-off to another thread and back.
//
// With batching, requests queue; a batch opens with the oldest request and closes when
// it holds max_batch_size rows or batch_timeout after that request arrived, whichever
// is first (TF Serving's BasicBatchScheduler); with no timeout, as soon as a worker takes
// it. Requests for the same loaded version and
// row shape merge into one step, whose rows are split back. `threads` workers run closed
// batches; one batch collects at a time, so that while a step runs, the requests that
// arrive meanwhile gather into the next batch rather than into a second small one.
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
  // 0 (TF Serving's default): a batch closes as soon as the worker is free, with the
  // requests that arrived while the last step ran. Measured against 1000 us on the
  // serving bench: the same saturated rate, and the p99 at half load 2.8 -> 1.7 ms.
  int64_t batch_timeout_micros = 0;
  // Batch workers. One by default: a step already spreads over every core through the
  // session's intra-op threads, and steps at once split the queue into smaller batches
  // that contend for those cores (in-process, two one-row callers on 2 cores make 0.6x
  // the predicts of one).
  int threads = 1;
  // The queue holds at most this many batches' rows (max_batch_size each, the open batch
  // included); a request that does not fit is refused with resource_exhausted (HTTP
  // 429), as TF Serving's batch scheduler refuses a task when its queue is full. A
  // request is taken whatever its size while the queue is empty.
  int64_t max_enqueued_batches = 10;
};

class Batcher {
 public:
  using Done = std::function<void(actorflow::Result<actorflow::Tensor>)>;
  Batcher(BatchOptions options, Metrics& metrics);
  ~Batcher();  // answers what is queued, then stops the workers
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // `done` is called once with x's predictions (or the step's error): before submit
  // returns without batching or when the queue is full, on a batch worker otherwise.
  void submit(std::shared_ptr<const LoadedModel> model, actorflow::Tensor x, Done done);

 private:
  struct Task {
    std::shared_ptr<const LoadedModel> model;
    actorflow::Tensor x;
    Done done;
    std::chrono::steady_clock::time_point arrived;
  };
  void work();
  // Waits until the batch led by the oldest task closes (full or its deadline), then
  // takes it: the oldest task and the queued tasks that may join it. Called with mu_
  // held and collecting_ set.
  std::vector<Task> take_batch(std::unique_lock<std::mutex>& lock);
  void run(std::vector<Task> batch);

  BatchOptions options_;
  Metrics& metrics_;
  std::mutex mu_;
  std::condition_variable work_cv_;  // idle workers: a task is queued and no batch collects
  std::condition_variable full_cv_;  // the collecting worker: the queue holds a full batch
  std::condition_variable entered_cv_;  // the constructor: a worker has named itself
  size_t entered_ = 0;
  std::deque<Task> queue_;
  int64_t queued_rows_ = 0;
  bool collecting_ = false;  // a worker is waiting for the open batch to close
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace serve
