// The few TensorFlow messages an event file holds (tensorflow/core/util/event.proto,
// framework/summary.proto, graph.proto, node_def.proto, attr_value.proto,
// tensor_shape.proto, tensor.proto), encoded with the shared protobuf writer
// (actorflow/protobuf_wire.h, which also reads fields back for checks). Field numbers are
// TensorFlow's; see each encoder.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "actorflow/graph.h"
#include "actorflow/protobuf_wire.h"
#include "actorflow/tfrecord.h"
#include "actorflow/tensor.h"

namespace actorflow::pb {

// ---- tensorflow.HistogramProto ----
struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit;  // right edges; runs of empty buckets merged, as TF does
  std::vector<double> bucket;
};
// TensorFlow's default edges: 0, +-1e-12 * 1.1^k up to 1e20, and +-DBL_MAX.
const std::vector<double>& default_bucket_limits();
// Non-finite values are an error (as TF's HistogramSummary); names `tag`.
Result<Histogram> make_histogram(const std::string& tag, const Tensor& values);

// ---- tensorflow.Event ----
std::string encode_file_version_event(double wall_time, std::string_view version);
// An Event carrying a serialized tf.Summary.
std::string encode_summary_event(double wall_time, int64_t step, std::string_view summary);

// ---- tensorflow.Summary with one Value ----
std::string encode_scalar_summary(std::string_view tag, float value);
std::string encode_histogram_summary(std::string_view tag, const Histogram& h);
std::string encode_graph_event(double wall_time, const std::string& graph_def);
// tensorflow.GraphDef: NodeDef name/op/input/device, attributes, and "_output_shapes".
std::string encode_graph_def(const Graph& graph);
// tensorflow.DataType enum value of a dtype (DT_INVALID = 0 for none).
int tf_datatype(DType t);

// TFRecord framing lives in actorflow/tfrecord.h; the event writer and its tests name it here.
using tfrecord::frame_record;
using tfrecord::split_records;

}  // namespace actorflow::pb
