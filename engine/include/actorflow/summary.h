// TensorBoard summaries: SummaryWriter appends Event protos to
// <logdir>/events.out.tfevents.<unix time>.<hostname> in TFRecord framing, the format
// TensorBoard (and tf.summary) read. Summaries come two ways.
//
// From host values the training loop fetched:
//   auto w = af::SummaryWriter::create("runs/exp1");
//   if (!w.ok()) { ...w.status()... }
//   w->add_graph(g);
//   w->add_scalar("loss", loss.item<float>(), step);
//   w->add_histogram("dense/kernel", kernel_value, step);
//
// From summary ops in the graph, as TF1's tf.summary.scalar / merge_all (the older
// tf.scalar_summary / merge_all_summaries): each op yields a serialized tf.Summary as a
// string scalar, evaluated in the step like any other fetch:
//   af::summary::scalar("loss", loss);
//   af::summary::histogram("w", w);
//   af::Output merged = af::summary::merge_all(g);
//   auto out = sess->run({merged}, feeds, {train_op});
//   w->add_summary((*out)[0], step);
//
// Every writer call returns a Status: a full disk must not end a training run, so the
// loop decides what a failed summary means.
#pragma once
#include "actorflow/api.h"
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "actorflow/graph.h"
#include "actorflow/tensor.h"

AF_PUBLIC_BEGIN

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
  // An Event{wall_time, step, summary} holding a serialized tf.Summary, such as the
  // value of a summary op (summary::scalar, summary::merge_all). A string that is not a
  // well-formed Summary is an error and nothing is written.
  Status add_summary(const std::string& serialized_summary, int64_t step);
  // The same with the fetched tensor: a string tensor of one element.
  Status add_summary(const Tensor& summary, int64_t step);
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

// Serialized tf.Summary protos: the one encoder behind SummaryWriter::add_scalar /
// add_histogram and the ScalarSummary / HistogramSummary / MergeSummary kernels. A
// Summary is a list of Values, so the concatenation of serialized Summaries is their
// merge.
//
// A Summary with one Value{tag, simple_value}.
std::string encode_scalar_summary(const std::string& tag, float value);
// A Summary with one Value{tag, histo}: every element of `values` (numeric or bool, host
// memory) in TensorFlow's default exponential buckets. NaN or infinite values are an
// error naming the tag.
Result<std::string> encode_histogram_summary(const std::string& tag, const Tensor& values);
// The tags of a serialized Summary's values in order ("" for a Value without one). An
// error (invalid_argument) when `serialized` is not a well-formed Summary: a field other
// than `value`, a Value that does not parse, or a tag, simple_value or histo of the wrong
// wire type. Unknown Value fields (images, audio, tensors) are kept as they are.
Result<std::vector<std::string>> summary_tags(std::string_view serialized);
// One Summary holding every Value of `summaries`, in order. As TF's MergeSummary, two
// values with the same non-empty tag are an error naming the tag, and so is a malformed
// input (naming its index).
Result<std::string> merge_summaries(const std::vector<std::string_view>& summaries);

// In-graph summary ops, as TF1's tf.summary. Each adds its node to the graph collection
// "summaries" (merge and merge_all do not) and yields a string scalar: a serialized
// Summary. Misuse throws af::Error, as graph building does elsewhere.
namespace summary {

// The name of the collection the summary ops join (TF's GraphKeys.SUMMARIES).
inline constexpr const char* kCollection = "summaries";

// A ScalarSummary of `value` (a numeric scalar). The tag is `name` under the current
// name scope ("train/loss"), as written: not made unique, so the histogram of a
// variable "w" is tagged "w", as the seeds' tf.histogram_summary("w", W) (TF1's
// tf.summary would say "w_1"), and two summaries of one tag are an error when merged.
// The node is named by the scope `name` opens, made unique ("train/loss", then
// "train/loss_1"); its tag constant is "<node>/tags".
Output scalar(const std::string& name, const Output& value);
// A HistogramSummary of every element of `values` (numeric or bool), tagged and named as
// scalar() (the constant is "<node>/tag"). A NaN or infinite value fails the step with an
// error naming the node and tag.
Output histogram(const std::string& name, const Output& values);
// A MergeSummary of `summaries` (string tensors of serialized Summaries). `name` is
// "<scope>/<op name>", as TF's default "Merge/MergeSummary", with the scope made unique
// ("Merge_1/MergeSummary"), or a node name without a "/". A duplicate tag fails the step. `summaries` must not be empty.
Output merge(const std::vector<Output>& summaries, const std::string& name = "Merge/MergeSummary");
// merge() of every op in `collection` so far. With none, an invalid Output
// (default-constructed), as TF's merge_all returns None: test it with valid() before
// fetching it.
Output merge_all(Graph& g, const std::string& collection = kCollection);

}  // namespace summary

// The payloads of a TFRecord file such as an event file, every length and CRC checked;
// errors (data_loss) name the file, the record and its byte offset.
Result<std::vector<std::string>> read_tfrecords(const std::string& path);

}  // namespace actorflow

AF_PUBLIC_END
