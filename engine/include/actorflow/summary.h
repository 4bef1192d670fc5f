// TensorBoard summaries: SummaryWriter appends Event protos to
// <logdir>/events.out.tfevents.<unix time>.<hostname> in TFRecord framing, the format
// TensorBoard (and tf.summary) read. The training loop passes values it fetched:
//   auto w = af::SummaryWriter::create("runs/exp1");
//   if (!w.ok()) { ...w.status()... }
//   w->add_graph(g);
//   w->add_scalar("loss", loss.item<float>(), step);
//   w->add_histogram("dense/kernel", kernel_value, step);
// Every call returns a Status: a full disk must not end a training run, so the loop
// decides what a failed summary means.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actorflow/graph.h"
#include "actorflow/tensor.h"

namespace actorflow {

class SummaryWriter {
 public:
  // Creates `logdir` (with parents) and a new event file in it, starting with the
  // file_version event "brain.Event:2". Buffered events are written out by flush(), when
  // `flush_secs` have passed since the last write-out, and by close(). Fails when the
  // directory or the file cannot be created.
  static Result<SummaryWriter> create(const std::string& logdir, double flush_secs = 10);
  ~SummaryWriter();
  // Moves, does not copy; a moved-from writer is closed.
  SummaryWriter(SummaryWriter&&) noexcept;
  SummaryWriter& operator=(SummaryWriter&&) noexcept;
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  // The event file's path ("" for a moved-from writer).
  const std::string& path() const;

  Status add_scalar(const std::string& tag, float value, int64_t step);
  // A histogram of every element of `values` (numeric or bool, host memory) with
  // TensorFlow's default exponential buckets; NaN or infinite values are an error.
  Status add_histogram(const std::string& tag, const Tensor& values, int64_t step);
  // The graph as a tf.GraphDef, for TensorBoard's graph tab.
  Status add_graph(const Graph& graph);
  // Writes buffered events to the file and fsyncs it.
  Status flush();
  // Flushes and closes; later add_* calls fail. Called by the destructor.
  Status close();

  // Safe to call from several threads.
 private:
  struct File;  // the open event file, its buffer and its lock
  explicit SummaryWriter(std::unique_ptr<File> file);
  Status append(const std::string& event);

  std::unique_ptr<File> file_;
};

// The payloads of a TFRecord file such as an event file, every length and CRC checked;
// errors (data_loss) name the file, the record and its byte offset.
Result<std::vector<std::string>> read_tfrecords(const std::string& path);

}  // namespace actorflow
