#include "batcher.h"

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
  for (int i = 0; i < std::max(1, options_.threads); ++i) workers_.emplace_back([this] { work(); });
}

Batcher::~Batcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void Batcher::submit(std::shared_ptr<const LoadedModel> model, af::Tensor x, Done done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Task{std::move(model), std::move(x), std::move(done), std::chrono::steady_clock::now()});
  }
  cv_.notify_all();
}

void Batcher::work() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    // An idle worker wakes now and then even without a notification (a bounded wait).
    if (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_ || !queue_.empty(); })) continue;
    if (queue_.empty()) return;  // stopping, and nothing is left to answer
    auto batch = take_batch(lock);
    lock.unlock();
    run(std::move(batch));
    lock.lock();
  }
}

std::vector<Batcher::Task> Batcher::take_batch(std::unique_lock<std::mutex>& lock) {
  std::vector<Task> batch;
  batch.push_back(std::move(queue_.front()));
  queue_.pop_front();
  if (!options_.enabled) return batch;
  int64_t rows = batch[0].x.dim(0);
  auto deadline = batch[0].arrived + std::chrono::microseconds(options_.batch_timeout_micros);
  // Tasks that fit join: same version, same row shape, room left. A task for another
  // version, or one too big, stays for another worker.
  auto gather = [&] {
    for (auto it = queue_.begin(); it != queue_.end() && rows < options_.max_batch_size;) {
      bool fits = it->model == batch[0].model && rows + it->x.dim(0) <= options_.max_batch_size &&
                  same_row_shape(it->x, batch[0].x);
      if (fits) {
        rows += it->x.dim(0);
        batch.push_back(std::move(*it));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
  };
  // The wait is bounded by the first task's deadline.
  while (true) {
    gather();
    if (rows >= options_.max_batch_size || stopping_) return batch;
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
      gather();  // what arrived with the timeout
      return batch;
    }
  }
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
