// The pipeline's actors. Every link carries chunks against credits: a stage sends a
// chunk only while its consumer has granted room, and grants its producer room only as
// its own output drains — so a slow trainer slows the readers instead of growing queues.
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <algorithm>
#include <random>

#include "../actor_system.h"
#include "actorflow/data/dataset.h"
#include "actorflow/ops/cpu_device.h"

namespace actorflow::data::detail {
// A group of rows on a link, or a marker: end of an epoch, end of data, an error.
struct Chunk {
  enum class Kind { data, epoch_end, end, error } kind = Kind::data;
  Components comps;
  int64_t rows = 0;
  Status status;
};
}  // namespace actorflow::data::detail

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(actorflow::data::detail::Chunk)

namespace actorflow::data {

using detail::Chunk;

struct Dataset::Stage {
  enum class Kind { tensors, records, map, shuffle, batch, repeat, prefetch } kind;
  Components tensors;
  std::vector<std::string> files;
  RecordReaderOptions record_options;
  MapFn fn;
  int threads = 1;
  int64_t n = 0;
  uint64_t seed = 0;
  bool drop_remainder = false;
};

namespace {

constexpr int64_t kSourceChunkRows = 256;
constexpr int kLinkCredits = 2;

using chunk_atom = caf::atom_constant<caf::atom("chunk")>;
using credit_atom = caf::atom_constant<caf::atom("dcredit")>;
using produce_atom = caf::atom_constant<caf::atom("produce")>;

// ---- row helpers ----

size_t row_elems(const Tensor& t) {
  size_t n = 1;
  for (int d = 1; d < t.rank(); ++d) n *= static_cast<size_t>(t.dim(d));
  return n;
}

Shape with_rows(const Tensor& like, int64_t rows) {
  std::vector<int64_t> dims = like.shape().dims();
  dims[0] = rows;
  return Shape(dims);
}

Shape row_shape(const Tensor& t) {
  std::vector<int64_t> dims = t.shape().dims();
  return Shape(std::vector<int64_t>(dims.begin() + 1, dims.end()));
}

// Copies row r of src into row q of dst. Rows of another shape or dtype than dst's are
// refused (TF's batching error): copying them would write past dst's buffer.
void copy_row(const Tensor& src, int64_t r, Tensor& dst, int64_t q) {
  if (src.dtype() != dst.dtype())
    throw Error(invalid_argument(std::string("cannot batch rows of different dtypes: ") + dtype_name(dst.dtype()) +
                                 " and " + dtype_name(src.dtype()) + " (row " + std::to_string(q) + ")"));
  if (src.rank() != dst.rank() || row_elems(src) != row_elems(dst) || row_shape(src) != row_shape(dst))
    throw Error(invalid_argument("cannot batch rows of different shapes: " + row_shape(dst).to_string() + " and " +
                                 row_shape(src).to_string() + " (row " + std::to_string(q) + ")"));
  size_t n = row_elems(src);
  if (src.dtype() == DType::string) {
    for (size_t i = 0; i < n; ++i) dst.data<std::string>()[q * static_cast<int64_t>(n) + static_cast<int64_t>(i)] = src.data<std::string>()[r * static_cast<int64_t>(n) + static_cast<int64_t>(i)];
    return;
  }
  size_t bytes = n * dtype_size(src.dtype());
  std::memcpy(static_cast<char*>(dst.raw_data()) + static_cast<size_t>(q) * bytes,
              static_cast<const char*>(src.raw_data()) + static_cast<size_t>(r) * bytes, bytes);
}

void check_components(const Components& src, size_t expected) {
  if (src.size() != expected)
    throw Error(invalid_argument("cannot batch rows with " + std::to_string(src.size()) + " components after rows with " +
                                 std::to_string(expected)));
}

// Collects rows into chunks of a fixed size.
class RowBuilder {
 public:
  explicit RowBuilder(int64_t rows) : target_(rows) {}
  void add(const Components& src, int64_t r, std::vector<Chunk>& out) {
    if (cur_.comps.empty()) {
      for (auto& t : src) cur_.comps.emplace_back(t.dtype(), with_rows(t, target_));
      cur_.rows = 0;
    }
    check_components(src, cur_.comps.size());
    for (size_t c = 0; c < src.size(); ++c) copy_row(src[c], r, cur_.comps[c], cur_.rows);
    if (++cur_.rows == target_) {
      out.push_back(std::move(cur_));
      cur_ = Chunk();
    }
  }
  void flush(std::vector<Chunk>& out, bool drop) {
    if (cur_.comps.empty() || cur_.rows == 0) return;
    if (!drop) {
      for (auto& t : cur_.comps) t = t.slice_rows(0, cur_.rows);
      out.push_back(std::move(cur_));
    }
    cur_ = Chunk();
  }

 private:
  int64_t target_;
  Chunk cur_;
};

// ---- processors: what a middle stage does to the chunks passing through ----

class Processor {
 public:
  virtual ~Processor() = default;
  virtual void push(Chunk in, std::vector<Chunk>& out) = 0;
  virtual void flush(std::vector<Chunk>& out) { (void)out; }
};

class MapProcessor : public Processor {
 public:
  MapProcessor(MapFn fn, int threads) : fn_(std::move(fn)), threads_(threads) {
    if (threads > 1) device_ = std::make_unique<CpuDevice>(threads);
  }
  void push(Chunk in, std::vector<Chunk>& out) override {
    Chunk r;
    if (threads_ <= 1 || in.rows < 2 * threads_) {
      auto m = fn_(in.comps);
      if (!m.ok()) return fail(m.status(), out);
      r.comps = std::move(m).value();
    } else {
      // Disjoint row ranges on the pool, then stitched back in order.
      int parts = threads_;
      std::vector<Result<Components>> results(static_cast<size_t>(parts), Result<Components>(Status(Code::internal, "unset")));
      device_->parallel_for(parts, 1000000, [&](int64_t b, int64_t e) {
        for (int64_t p = b; p < e; ++p) {
          int64_t lo = in.rows * p / parts, hi = in.rows * (p + 1) / parts;
          Components part;
          for (auto& t : in.comps) part.push_back(t.slice_rows(lo, hi));
          results[static_cast<size_t>(p)] = fn_(part);
        }
      });
      int64_t total = 0;
      for (auto& res : results) {
        if (!res.ok()) return fail(res.status(), out);
        check_components(*res, results[0]->size());
        if (!res->empty()) total += (*res)[0].dim(0);
      }
      if (total != in.rows)
        throw Error(invalid_argument("a map on " + std::to_string(threads_) + " threads must return as many rows as it is given: " +
                                     std::to_string(in.rows) + " in, " + std::to_string(total) + " out"));
      for (size_t c = 0; c < results[0]->size(); ++c) {
        const Tensor& first = (*results[0])[c];
        Tensor joined(first.dtype(), with_rows(first, in.rows));
        int64_t q = 0;
        for (auto& res : results) {
          const Tensor& t = (*res)[c];
          for (int64_t i = 0; i < t.dim(0); ++i) copy_row(t, i, joined, q++);
        }
        r.comps.push_back(std::move(joined));
      }
    }
    r.rows = r.comps.empty() ? 0 : r.comps[0].dim(0);
    out.push_back(std::move(r));
  }

 private:
  void fail(const Status& s, std::vector<Chunk>& out) {
    Chunk e;
    e.kind = Chunk::Kind::error;
    e.status = s;
    out.push_back(std::move(e));
  }
  MapFn fn_;
  int threads_;
  std::unique_ptr<CpuDevice> device_;
};

class ShuffleProcessor : public Processor {
 public:
  ShuffleProcessor(int64_t buffer, uint64_t seed) : capacity_(std::max<int64_t>(1, buffer)), rng_(seed), out_(kSourceChunkRows) {}
  void push(Chunk in, std::vector<Chunk>& out) override {
    if (store_.empty())
      for (auto& t : in.comps) store_.emplace_back(t.dtype(), with_rows(t, capacity_));
    check_components(in.comps, store_.size());
    for (int64_t r = 0; r < in.rows; ++r) {
      if (count_ < capacity_) {
        for (size_t c = 0; c < in.comps.size(); ++c) copy_row(in.comps[c], r, store_[c], count_);
        ++count_;
        continue;
      }
      int64_t j = static_cast<int64_t>(rng_() % static_cast<uint64_t>(capacity_));
      out_.add(store_, j, out);
      for (size_t c = 0; c < in.comps.size(); ++c) copy_row(in.comps[c], r, store_[c], j);
    }
  }
  void flush(std::vector<Chunk>& out) override {
    // Drain the buffer in random order (Fisher-Yates over the remaining slots).
    std::vector<int64_t> order(static_cast<size_t>(count_));
    for (int64_t i = 0; i < count_; ++i) order[static_cast<size_t>(i)] = i;
    for (int64_t i = count_ - 1; i > 0; --i)
      std::swap(order[static_cast<size_t>(i)], order[rng_() % static_cast<uint64_t>(i + 1)]);
    for (int64_t j : order) out_.add(store_, j, out);
    out_.flush(out, false);
    count_ = 0;
  }

 private:
  int64_t capacity_;
  std::mt19937_64 rng_;
  Components store_;
  int64_t count_ = 0;
  RowBuilder out_;
};

class BatchProcessor : public Processor {
 public:
  BatchProcessor(int64_t size, bool drop) : builder_(std::max<int64_t>(1, size)), drop_(drop) {}
  void push(Chunk in, std::vector<Chunk>& out) override {
    for (int64_t r = 0; r < in.rows; ++r) builder_.add(in.comps, r, out);
  }
  void flush(std::vector<Chunk>& out) override { builder_.flush(out, drop_); }

 private:
  RowBuilder builder_;
  bool drop_;
};

// ---- the consumer's queue ----

struct SinkQueue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Chunk> q;
};

// ---- actors ----

class LinkActor : public caf::event_based_actor {
 public:
  LinkActor(caf::actor_config& cfg, int credits) : caf::event_based_actor(cfg), credits_(credits) {}
  // Neighbours hold each other's handles: drop them at exit, or the chain keeps itself
  // alive (and its queued chunks) after the iterator is gone.
  void on_exit() override {
    upstream_ = caf::actor();
    downstream_ = caf::actor();
    outq_.clear();
  }
  void connect(caf::actor up, caf::actor down) {
    upstream_ = std::move(up);
    downstream_ = std::move(down);
  }

 protected:
  void emit(Chunk c) {
    outq_.push_back(std::move(c));
    drain();
  }
  void drain() {
    while (credits_ > 0 && !outq_.empty()) {
      --credits_;
      send(downstream_, chunk_atom::value, std::move(outq_.front()));
      outq_.pop_front();
    }
  }
  caf::actor upstream_, downstream_;
  int credits_;
  std::deque<Chunk> outq_;
};

class SourceActor : public LinkActor {
 public:
  // permute_seed >= 0: emit in-memory rows in a fresh random order each epoch (a full
  // shuffle done by gathering rows, instead of copying the data set into a buffer).
  SourceActor(caf::actor_config& cfg, std::shared_ptr<Dataset::Stage> stage, int64_t epochs, int64_t permute_seed)
      : LinkActor(cfg, kLinkCredits), stage_(std::move(stage)), epochs_(epochs), permute_(permute_seed >= 0),
        rng_(static_cast<uint64_t>(permute_seed)) {}
  caf::behavior make_behavior() override {
    return {
        [this](produce_atom) { produce(); },
        [this](credit_atom) {
          ++credits_;
          drain();
          produce();
        },
        [this](caf::actor up, caf::actor down) {
          connect(std::move(up), std::move(down));
          produce();
        },
    };
  }

 private:
  void produce() {
    while (credits_ > 0 && outq_.empty() && !finished_) {
      try {
        emit(next());
      } catch (...) {
        emit(error(status_from_current_exception().with_context("Dataset source")));
      }
    }
  }
  Chunk next() {
    Chunk c;
    if (stage_->kind == Dataset::Stage::Kind::tensors) {
      int64_t rows = stage_->tensors.empty() ? 0 : stage_->tensors[0].dim(0);
      if (permute_ && pos_ == 0 && rows > 0) {
        order_.resize(static_cast<size_t>(rows));
        for (int64_t i = 0; i < rows; ++i) order_[static_cast<size_t>(i)] = i;
        std::shuffle(order_.begin(), order_.end(), rng_);
      }
      if (pos_ < rows && permute_) {
        int64_t end = std::min(rows, pos_ + kSourceChunkRows);
        for (auto& t : stage_->tensors) {
          Tensor out(t.dtype(), with_rows(t, end - pos_));
          for (int64_t r = pos_; r < end; ++r) copy_row(t, order_[static_cast<size_t>(r)], out, r - pos_);
          c.comps.push_back(std::move(out));
        }
        c.rows = end - pos_;
        pos_ = end;
        return c;
      }
      if (pos_ < rows) {
        int64_t end = std::min(rows, pos_ + kSourceChunkRows);
        for (auto& t : stage_->tensors) c.comps.push_back(t.slice_rows(pos_, end));
        c.rows = end - pos_;
        pos_ = end;
        return c;
      }
    } else {
      std::vector<std::string> recs;
      while (static_cast<int64_t>(recs.size()) < kSourceChunkRows) {
        if (!reader_) {
          if (file_ >= stage_->files.size()) break;
          auto r = RecordReader::open(stage_->files[file_++], stage_->record_options);
          if (!r.ok()) return error(r.status());
          reader_ = std::move(r).value();
        }
        std::string rec;
        auto more = reader_->next(&rec);
        if (!more.ok()) return error(more.status());
        if (!*more) {
          reader_.reset();
          continue;
        }
        recs.push_back(std::move(rec));
      }
      if (!recs.empty()) {
        c.rows = static_cast<int64_t>(recs.size());
        c.comps.push_back(Tensor::from_vector(recs));
        return c;
      }
    }
    // End of one pass over the data.
    ++epoch_;
    pos_ = 0;
    file_ = 0;
    reader_.reset();
    if (epochs_ >= 0 && epoch_ >= epochs_) {
      finished_ = true;
      c.kind = Chunk::Kind::end;
    } else {
      c.kind = Chunk::Kind::epoch_end;
    }
    return c;
  }
  Chunk error(const Status& s) {
    finished_ = true;
    Chunk c;
    c.kind = Chunk::Kind::error;
    c.status = s;
    return c;
  }

  std::shared_ptr<Dataset::Stage> stage_;
  int64_t epochs_;
  int64_t epoch_ = 0;
  int64_t pos_ = 0;
  size_t file_ = 0;
  std::unique_ptr<RecordReader> reader_;
  bool finished_ = false;
  bool permute_;
  std::mt19937_64 rng_;
  std::vector<int64_t> order_;
};

class StageActor : public LinkActor {
 public:
  StageActor(caf::actor_config& cfg, std::unique_ptr<Processor> p, bool flush_at_epoch, int credits, std::string name)
      : LinkActor(cfg, credits), proc_(std::move(p)), flush_at_epoch_(flush_at_epoch), name_(std::move(name)) {}
  caf::behavior make_behavior() override {
    return {
        [this](chunk_atom, Chunk& c) { on_chunk(std::move(c)); },
        [this](credit_atom) {
          ++credits_;
          drain();
          repay();
        },
        [this](caf::actor up, caf::actor down) { connect(std::move(up), std::move(down)); },
    };
  }

 private:
  void on_chunk(Chunk c) {
    std::vector<Chunk> out;
    if (failed_) {
      // After an error only the end matters; the error chunk already went downstream.
    } else if (c.kind == Chunk::Kind::data) {
      process([&] { proc_->push(std::move(c), out); }, out);
    } else {
      if (c.kind == Chunk::Kind::end || (c.kind == Chunk::Kind::epoch_end && flush_at_epoch_))
        process([&] { proc_->flush(out); }, out);
      out.push_back(std::move(c));
    }
    for (auto& o : out) emit(std::move(o));
    ++owed_;
    repay();
  }
  // Grant the producer room only while our own output is short.
  void repay() {
    while (owed_ > 0 && outq_.size() < 2) {
      --owed_;
      send(upstream_, credit_atom::value);
    }
  }
  // A map function or a batch that throws (a bug, ragged rows, a failed allocation)
  // fails the iterator with this stage's name instead of killing the actor.
  template <typename F>
  void process(F&& f, std::vector<Chunk>& out) {
    try {
      f();
    } catch (...) {
      out.clear();
      Chunk e;
      e.kind = Chunk::Kind::error;
      e.status = status_from_current_exception().with_context(name_);
      out.push_back(std::move(e));
      failed_ = true;
    }
  }
  std::unique_ptr<Processor> proc_;
  bool flush_at_epoch_;
  std::string name_;
  bool failed_ = false;
  int owed_ = 0;
};

class SinkActor : public caf::event_based_actor {
 public:
  SinkActor(caf::actor_config& cfg, std::shared_ptr<SinkQueue> q) : caf::event_based_actor(cfg), q_(std::move(q)) {}
  void on_exit() override { upstream_ = caf::actor(); }
  caf::behavior make_behavior() override {
    return {
        [this](chunk_atom, Chunk& c) {
          if (c.kind == Chunk::Kind::epoch_end) {
            send(upstream_, credit_atom::value);
            return;
          }
          std::lock_guard<std::mutex> lock(q_->mu);
          q_->q.push_back(std::move(c));
          q_->cv.notify_one();
        },
        [this](credit_atom) { send(upstream_, credit_atom::value); },
        [this](caf::actor up, caf::actor) { upstream_ = std::move(up); },
    };
  }

 private:
  std::shared_ptr<SinkQueue> q_;
  caf::actor upstream_;
};

class ActorIterator final : public Iterator {
 public:
  ActorIterator(std::vector<caf::actor> actors, std::shared_ptr<SinkQueue> q)
      : actors_(std::move(actors)), q_(std::move(q)) {}
  ~ActorIterator() override {
    for (auto& a : actors_) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }
  Result<bool> next(Components* out, int64_t timeout_ms) override {
    if (done_) return false;
    Chunk c;
    {
      std::unique_lock<std::mutex> lock(q_->mu);
      auto ready = [&] { return !q_->q.empty(); };
      if (timeout_ms <= 0) {
        q_->cv.wait(lock, ready);
      } else if (!q_->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready)) {
        return deadline_exceeded("the input pipeline produced no batch within " + std::to_string(timeout_ms) + " ms");
      }
      c = std::move(q_->q.front());
      q_->q.pop_front();
    }
    if (c.kind == Chunk::Kind::end) {
      done_ = true;
      return false;
    }
    if (c.kind == Chunk::Kind::error) {
      done_ = true;
      return c.status;
    }
    caf::anon_send(actors_.back(), credit_atom::value);
    *out = std::move(c.comps);
    return true;
  }

 private:
  std::vector<caf::actor> actors_;
  std::shared_ptr<SinkQueue> q_;
  bool done_ = false;
};

}  // namespace

Dataset Dataset::then(Stage stage) const {
  Dataset d = *this;
  d.stages_.push_back(std::make_shared<Stage>(std::move(stage)));
  return d;
}

Dataset Dataset::from_tensors(Components components) {
  for (auto& t : components)
    if (!t.valid() || t.rank() < 1 || t.dim(0) != components[0].dim(0))
      throw Error(invalid_argument("Dataset::from_tensors: components must be tensors of rank >= 1 sharing dim 0"));
  Stage s{Stage::Kind::tensors};
  s.tensors = std::move(components);
  return Dataset().then(std::move(s));
}

Dataset Dataset::from_records(std::vector<std::string> files, RecordReaderOptions options) {
  Stage s{Stage::Kind::records};
  s.files = std::move(files);
  s.record_options = options;
  return Dataset().then(std::move(s));
}

Dataset Dataset::map(MapFn fn, int threads) const {
  Stage s{Stage::Kind::map};
  s.fn = std::move(fn);
  s.threads = threads;
  return then(std::move(s));
}
Dataset Dataset::shuffle(int64_t buffer_size, uint64_t seed) const {
  Stage s{Stage::Kind::shuffle};
  s.n = buffer_size;
  s.seed = seed;
  return then(std::move(s));
}
Dataset Dataset::batch(int64_t batch_size, bool drop_remainder) const {
  Stage s{Stage::Kind::batch};
  s.n = batch_size;
  s.drop_remainder = drop_remainder;
  return then(std::move(s));
}
Dataset Dataset::repeat(int64_t epochs) const {
  Stage s{Stage::Kind::repeat};
  s.n = epochs;
  return then(std::move(s));
}
Dataset Dataset::prefetch(int64_t chunks) const {
  Stage s{Stage::Kind::prefetch};
  s.n = chunks;
  return then(std::move(s));
}

std::unique_ptr<Iterator> Dataset::make_iterator() const {
  if (stages_.empty()) throw Error(invalid_argument("Dataset has no source"));
  auto& sys = runtime::actor_system();
  int64_t epochs = 1;
  size_t repeat_at = stages_.size();
  int64_t prefetch = kLinkCredits;
  for (size_t i = 1; i < stages_.size(); ++i) {
    if (stages_[i]->kind == Stage::Kind::repeat) {
      epochs = stages_[i]->n;
      repeat_at = i;
    }
    if (stages_[i]->kind == Stage::Kind::prefetch) prefetch = std::max<int64_t>(1, stages_[i]->n);
  }
  // A shuffle right after an in-memory source whose buffer holds every row is a full
  // permutation: the source does it by gathering rows.
  size_t first = 1;
  int64_t permute_seed = -1;
  if (stages_[0]->kind == Stage::Kind::tensors && stages_.size() > 1 && stages_[1]->kind == Stage::Kind::shuffle &&
      !stages_[0]->tensors.empty() && stages_[1]->n >= stages_[0]->tensors[0].dim(0)) {
    permute_seed = static_cast<int64_t>(stages_[1]->seed & 0x7fffffffffffffffULL);
    first = 2;
  }
  std::vector<caf::actor> chain;
  chain.push_back(sys.spawn<SourceActor>(stages_[0], epochs, permute_seed));
  for (size_t i = first; i < stages_.size(); ++i) {
    const Stage& s = *stages_[i];
    std::unique_ptr<Processor> p;
    const char* kind = "";
    switch (s.kind) {
      case Stage::Kind::map: p = std::make_unique<MapProcessor>(s.fn, s.threads), kind = "map"; break;
      case Stage::Kind::shuffle: p = std::make_unique<ShuffleProcessor>(s.n, s.seed), kind = "shuffle"; break;
      case Stage::Kind::batch: p = std::make_unique<BatchProcessor>(s.n, s.drop_remainder), kind = "batch"; break;
      default: continue;
    }
    std::string name = "Dataset stage " + std::to_string(i) + " (" + kind + ")";
    chain.push_back(sys.spawn<StageActor>(std::move(p), i < repeat_at, kLinkCredits, std::move(name)));
  }
  auto q = std::make_shared<SinkQueue>();
  caf::actor sink = sys.spawn<SinkActor>(q);
  // The sink's producer may run `prefetch` chunks ahead of the consumer.
  chain.push_back(sink);
  // Downstream first: when the source starts producing, every link already knows its ends.
  for (size_t i = chain.size(); i-- > 0;) {
    caf::actor up = i > 0 ? chain[i - 1] : caf::actor();
    caf::actor down = i + 1 < chain.size() ? chain[i + 1] : caf::actor();
    caf::anon_send(chain[i], up, down);
  }
  for (int64_t k = kLinkCredits; k < prefetch; ++k) caf::anon_send(chain[chain.size() - 2], credit_atom::value);
  return std::make_unique<ActorIterator>(std::move(chain), q);
}

}  // namespace actorflow::data
