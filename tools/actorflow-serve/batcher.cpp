#include "batcher.h"

#include "actorflow/library_threads.h"

#include <cstring>

namespace serve {

namespace af = actorflow;

namespace {
bool same_row_shape(const af::Tensor& a, const af::Tensor& b) {
  if (a.rank() != b.rank() || a.dtype() != b.dtype()) return false;
  for (int i = 1; i < a.rank(); ++i)
    if (a.dim(i) != b.dim(i)) return false;
  return true;
}
}  // namespace

Batcher::Batcher(BatchOptions options, Metrics& metrics) : options_(options), metrics_(metrics) {
  if (!options_.enabled) return;
  for (int i = 0; i < std::max(1, options_.threads); ++i) workers_.emplace_back([this] { work(); });
  // A worker names itself and takes its policy first thing, but on a busy machine a new
  // thread may first run well after the server has said it is listening; whoever reads
  // the server's threads from then on sees them as they will stay.
  std::unique_lock<std::mutex> lock(mu_);
  entered_cv_.wait_for(lock, std::chrono::seconds(10), [this] { return entered_ == workers_.size(); });
}

Batcher::~Batcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  full_cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void Batcher::submit(std::shared_ptr<const LoadedModel> model, af::Tensor x, Done done) {
  if (!options_.enabled) {
    std::vector<Task> one;
    one.push_back(Task{std::move(model), std::move(x), std::move(done), {}});
    return run(std::move(one));
  }
  bool wake_idle, wake_collector;
  {
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t room = options_.max_enqueued_batches * options_.max_batch_size;
    if (!queue_.empty() && queued_rows_ + x.dim(0) > room) {
      lock.unlock();
      metrics_.record_queue_full();
      return done(af::resource_exhausted("the batch queue is full (" + std::to_string(options_.max_enqueued_batches) + " batches of " +
                                         std::to_string(options_.max_batch_size) + " rows, --max_enqueued_batches); try again later"));
    }
    queued_rows_ += x.dim(0);
    metrics_.record_queue_rows(queued_rows_);
    queue_.push_back(Task{std::move(model), std::move(x), std::move(done), std::chrono::steady_clock::now()});
    // Wake only whom the task concerns: the collector once its batch is full (not per
    // arrival: each wake costs a context switch), an idle worker when none collects.
    wake_idle = !collecting_;
    wake_collector = collecting_ && queued_rows_ >= options_.max_batch_size;
  }
  if (wake_idle) work_cv_.notify_one();
  if (wake_collector) full_cv_.notify_one();
}

void Batcher::work() {
  // Under SCHED_BATCH a worker woken by a request does not preempt the HTTP thread that
  // queued it, which goes on to read the requests ready on its other connections: they
  // join the batch rather than wait for the next. On 2 cores at saturation: 29 rows a
  // step against 23, and 4% more requests/s. A worker is still run at once on an idle core.
  af::enter_library_thread("serve-batch");
  std::unique_lock<std::mutex> lock(mu_);
  ++entered_;
  entered_cv_.notify_all();
  while (true) {
    work_cv_.wait(lock, [this] { return stopping_ || (!collecting_ && !queue_.empty()); });
    if (queue_.empty()) return;  // stopping, and nothing is left to answer
    collecting_ = true;
    auto batch = take_batch(lock);
    collecting_ = false;
    // The next batch opens now, on another worker if one is idle.
    if (!queue_.empty()) work_cv_.notify_one();
    lock.unlock();
    run(std::move(batch));
    lock.lock();
  }
}

std::vector<Batcher::Task> Batcher::take_batch(std::unique_lock<std::mutex>& lock) {
  auto deadline = queue_.front().arrived + std::chrono::microseconds(options_.batch_timeout_micros);
  // Requests keep arriving while this waits (the HTTP threads parse them meanwhile).
  full_cv_.wait_until(lock, deadline, [this] { return stopping_ || queued_rows_ >= options_.max_batch_size; });
  std::vector<Task> batch;
  batch.push_back(std::move(queue_.front()));
  queue_.pop_front();
  int64_t rows = batch[0].x.dim(0);
  // Tasks that fit join: same version, same row shape, room left. A task for another
  // version, or one too big, stays for the next batch.
  for (auto it = queue_.begin(); it != queue_.end() && rows < options_.max_batch_size;) {
    bool fits = it->model == batch[0].model && rows + it->x.dim(0) <= options_.max_batch_size && same_row_shape(it->x, batch[0].x);
    if (fits) {
      rows += it->x.dim(0);
      batch.push_back(std::move(*it));
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  queued_rows_ -= rows;
  return batch;
}

void Batcher::run(std::vector<Task> batch) {
  af::Tensor x = batch[0].x;
  int64_t rows = x.dim(0);
  if (batch.size() > 1) {
    // Rows of every request, one after another: their inner shapes were checked against
    // the same model's input spec, so they agree.
    std::vector<int64_t> dims = x.shape().dims();
    rows = 0;
    for (auto& t : batch) rows += t.x.dim(0);
    dims[0] = rows;
    x = af::Tensor(batch[0].x.dtype(), af::Shape(dims));
    size_t off = 0;
    for (auto& t : batch) {
      std::memcpy(static_cast<char*>(x.raw_data()) + off, t.x.raw_data(), t.x.bytes());
      off += t.x.bytes();
    }
  }
  auto y = batch[0].model->model.predict(x);
  metrics_.record_step(rows, static_cast<int64_t>(batch.size()));
  if (y.ok() && (y->rank() < 1 || y->dim(0) != rows))
    y = af::internal_error("the model answered " + y->shape().to_string() + " for " + std::to_string(rows) + " rows");
  if (!y.ok() || batch.size() == 1) {
    for (auto& t : batch) t.done(y);
    return;
  }
  int64_t at = 0;
  for (auto& t : batch) {
    int64_t n = t.x.dim(0);
    // A copy, so that one answer does not keep the whole batch's buffer alive.
    t.done(y->slice_rows(at, at + n).clone());
    at += n;
  }
}

}  // namespace serve
