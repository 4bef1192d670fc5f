// Hand-written protobuf encoding of the few TensorFlow messages an event file holds
// (tensorflow/core/util/event.proto, framework/summary.proto, graph.proto, node_def.proto,
// attr_value.proto, tensor_shape.proto, tensor.proto), TFRecord framing, and a field
// reader for checking what was written. Field numbers are TensorFlow's; see each encoder.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "actorflow/graph.h"
#include "actorflow/tensor.h"

namespace actorflow::pb {

enum WireType : int { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

class Writer {
 public:
  void varint(uint64_t v);
  void tag(int field, WireType wire) { varint(static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire)); }
  // int64, bool and enums are varints; negative int64 takes ten bytes, as protobuf does.
  void int_field(int field, int64_t v) { tag(field, kVarint); varint(static_cast<uint64_t>(v)); }
  void double_field(int field, double v);
  void float_field(int field, float v);
  void bytes_field(int field, std::string_view b);
  void packed_doubles(int field, const std::vector<double>& v);
  void packed_floats(int field, const std::vector<double>& v);
  void packed_ints(int field, const std::vector<int64_t>& v);
  const std::string& bytes() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// One field of a message as read back: varints in `value`, fixed64/fixed32 as raw bits
// in `value`, length-delimited payloads in `bytes` (a view into the message).
struct Field {
  int number = 0;
  WireType wire = kVarint;
  uint64_t value = 0;
  std::string_view bytes;
  double as_double() const;
  float as_float() const;
};
// Splits a message into its fields; false when it is malformed.
bool parse_fields(std::string_view message, std::vector<Field>* out);

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
std::string encode_scalar_event(double wall_time, int64_t step, std::string_view tag, float value);
std::string encode_histogram_event(double wall_time, int64_t step, std::string_view tag, const Histogram& h);
std::string encode_graph_event(double wall_time, const std::string& graph_def);
// tensorflow.GraphDef: NodeDef name/op/input/device, attributes, and "_output_shapes".
std::string encode_graph_def(const Graph& graph);
// tensorflow.DataType enum value of a dtype (DT_INVALID = 0 for none).
int tf_datatype(DType t);

// ---- TFRecord ----
// uint64 length, masked CRC-32C of those 8 bytes, data, masked CRC-32C of the data.
std::string frame_record(std::string_view data);
// Splits a whole file into records, checking every length and CRC; the error names the
// record and its byte offset.
Result<std::vector<std::string>> split_records(std::string_view file, const std::string& what);

}  // namespace actorflow::pb
