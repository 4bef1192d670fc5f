// Input pipelines: a Dataset describes stages (source -> map -> shuffle -> batch ->
// repeat -> prefetch); an Iterator runs them as a chain of actors, each passing chunks of
// rows downstream only against credits from its consumer, so reading, parsing, shuffling,
// batching and training overlap with bounded memory.
#pragma once
#include "actorflow/api.h"
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actorflow/data/readers.h"
#include "actorflow/tensor.h"

AF_PUBLIC_BEGIN

namespace actorflow::data {

// A group of rows: every component shares its leading dimension.
using Components = std::vector<Tensor>;
// Turns a chunk of rows into another (parsing records, scaling pixels, ...). Runs on
// `threads` threads over disjoint row ranges when the function is marked splittable.
using MapFn = std::function<Result<Components>(const Components& chunk)>;

class Iterator;

class Dataset {
 public:
  // Slices of in-memory tensors along dim 0 (they must agree on it).
  static Dataset from_tensors(Components components);
  // The records of the files, in order: one string component.
  static Dataset from_records(std::vector<std::string> files, RecordReaderOptions options = {});

  // `threads` > 1 splits each chunk into row ranges mapped in parallel (fn must then
  // return exactly as many rows as it was given).
  Dataset map(MapFn fn, int threads = 1) const;
  Dataset shuffle(int64_t buffer_size, uint64_t seed) const;
  Dataset batch(int64_t batch_size, bool drop_remainder = false) const;
  // epochs < 0: forever. Stages before the repeat restart cleanly every epoch (a shuffle
  // there never mixes epochs, a batch there emits each epoch's last partial batch).
  Dataset repeat(int64_t epochs = -1) const;
  // How many finished chunks may wait for the consumer.
  Dataset prefetch(int64_t chunks) const;

  std::unique_ptr<Iterator> make_iterator() const;

  struct Stage;

 private:
  // This dataset with `stage` appended.
  Dataset then(Stage stage) const;
  std::vector<std::shared_ptr<Stage>> stages_;
};

class Iterator {
 public:
  virtual ~Iterator() = default;
  // The next chunk (a batch, after batch()); false at the end of the data; an error names
  // the file and offset of a bad record, or the stage whose map function or batching
  // failed.
  Result<bool> next(Components* out) { return next(out, 0); }
  // The same, failing with deadline_exceeded when no chunk comes within timeout_ms
  // (0: wait as long as it takes).
  virtual Result<bool> next(Components* out, int64_t timeout_ms) = 0;
};

}  // namespace actorflow::data

AF_PUBLIC_END
