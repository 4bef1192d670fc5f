// The TensorFlow messages of an event file, encoded with the shared protobuf writer.
#include "io/event_proto.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace actorflow::pb {

// ---------------------------------------------------------------- histograms

const std::vector<double>& default_bucket_limits() {
  static const std::vector<double> limits = [] {
    std::vector<double> pos;
    for (double v = 1.0e-12; v < 1.0e20; v *= 1.1) pos.push_back(v);
    pos.push_back(DBL_MAX);
    std::vector<double> all;
    for (auto it = pos.rbegin(); it != pos.rend(); ++it) all.push_back(-*it);
    all.push_back(0.0);
    all.insert(all.end(), pos.begin(), pos.end());
    return all;
  }();
  return limits;
}

Result<Histogram> make_histogram(const std::string& tag, const Tensor& values) {
  if (!values.valid() || !(is_numeric(values.dtype()) || values.dtype() == DType::boolean))
    return invalid_argument("histogram '" + tag + "': values must be a numeric tensor");
  if (values.num_elements() > 0 && !(values.device() == DeviceId{}))
    return invalid_argument("histogram '" + tag + "': values must be in host memory, not on " + values.device().to_string());
  const std::vector<double>& limits = default_bucket_limits();
  std::vector<double> counts(limits.size(), 0.0);
  Histogram h;
  h.min = DBL_MAX;
  h.max = -DBL_MAX;
  const int64_t n = values.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    double v = values.element_as_double(i);
    if (!std::isfinite(v))
      return invalid_argument("histogram '" + tag + "': element " + std::to_string(i) + " is " + std::to_string(v) +
                              " (histograms take finite values only)");
    // Bucket i holds [limit[i-1], limit[i]).
    size_t b = static_cast<size_t>(std::upper_bound(limits.begin(), limits.end(), v) - limits.begin());
    counts[std::min(b, limits.size() - 1)] += 1;
    h.min = std::min(h.min, v);
    h.max = std::max(h.max, v);
    h.sum += v;
    h.sum_squares += v * v;
  }
  h.num = static_cast<double>(n);
  if (n == 0) h.min = h.max = 0;
  for (size_t i = 0; i < counts.size();) {
    double end = limits[i], count = counts[i];
    ++i;
    if (count <= 0) {
      while (i < counts.size() && counts[i] <= 0) end = limits[i++];
    }
    h.bucket_limit.push_back(end);
    h.bucket.push_back(count);
  }
  return h;
}

// ---------------------------------------------------------------- events

namespace {

// Event: wall_time = 1 (double), step = 2 (int64), file_version = 3 (string),
// graph_def = 4 (bytes), summary = 5 (Summary).
std::string event(double wall_time, int64_t step, int what_field, std::string_view what) {
  Writer w;
  w.double_field(1, wall_time);
  if (step != 0) w.int_field(2, step);
  w.bytes_field(what_field, what);
  return w.take();
}

// Summary: value = 1 (repeated Value); Value: tag = 1, simple_value = 2 (float),
// histo = 5 (HistogramProto).
std::string summary_value(std::string_view tag, int value_field, const std::string* msg, float simple) {
  Writer value;
  value.bytes_field(1, tag);
  if (msg) value.bytes_field(value_field, *msg);
  else value.float_field(value_field, simple);
  Writer summary;
  summary.bytes_field(1, value.bytes());
  return summary.take();
}

}  // namespace

std::string encode_file_version_event(double wall_time, std::string_view version) {
  return event(wall_time, 0, 3, version);
}

std::string encode_summary_event(double wall_time, int64_t step, std::string_view summary) {
  return event(wall_time, step, 5, summary);
}

std::string encode_scalar_summary(std::string_view tag, float value) { return summary_value(tag, 2, nullptr, value); }

std::string encode_histogram_summary(std::string_view tag, const Histogram& h) {
  // HistogramProto: min = 1, max = 2, num = 3, sum = 4, sum_squares = 5 (doubles),
  // bucket_limit = 6, bucket = 7 (packed repeated double).
  Writer w;
  w.double_field(1, h.min);
  w.double_field(2, h.max);
  w.double_field(3, h.num);
  w.double_field(4, h.sum);
  w.double_field(5, h.sum_squares);
  w.packed_doubles(6, h.bucket_limit);
  w.packed_doubles(7, h.bucket);
  std::string histo = w.take();
  return summary_value(tag, 5, &histo, 0);
}

std::string encode_graph_event(double wall_time, const std::string& graph_def) { return event(wall_time, 0, 4, graph_def); }

int tf_datatype(DType t) {
  switch (t) {
    case DType::f32: return 1;      // DT_FLOAT
    case DType::f64: return 2;      // DT_DOUBLE
    case DType::i32: return 3;      // DT_INT32
    case DType::u8: return 4;       // DT_UINT8
    case DType::string: return 7;   // DT_STRING
    case DType::i64: return 9;      // DT_INT64
    case DType::boolean: return 10; // DT_BOOL
    default: return 0;
  }
}

namespace {

// TensorShapeProto: dim = 2 (Dim: size = 1), unknown_rank = 3.
std::string shape_proto(const Shape& s) {
  Writer w;
  if (!s.has_rank()) {
    w.int_field(3, 1);
    return w.take();
  }
  for (int64_t d : s.dims()) {
    Writer dim;
    dim.int_field(1, d);
    w.bytes_field(2, dim.bytes());
  }
  return w.take();
}

// TensorProto: dtype = 1, tensor_shape = 2, tensor_content = 4. Contents only for small
// numeric tensors: the graph view shows them, large ones would bloat the event file.
std::string tensor_proto(const Tensor& t) {
  Writer w;
  w.int_field(1, tf_datatype(t.dtype()));
  w.bytes_field(2, shape_proto(t.shape()));
  if (t.dtype() != DType::string && t.bytes() > 0 && t.bytes() <= 1024 && t.device() == DeviceId{})
    w.bytes_field(4, std::string_view(static_cast<const char*>(t.raw_data()), t.bytes()));
  return w.take();
}

// AttrValue: list = 1 (ListValue: s = 2, i = 3, f = 4, shape = 7), s = 2, i = 3, f = 4,
// b = 5, type = 6, shape = 7, tensor = 8. Returns false for values TF has no form for.
bool attr_proto(const AttrValue& a, std::string* out) {
  Writer w;
  const auto& v = a.variant();
  if (auto* i = std::get_if<int64_t>(&v)) w.int_field(3, *i);
  else if (auto* f = std::get_if<double>(&v)) w.float_field(4, static_cast<float>(*f));
  else if (auto* b = std::get_if<bool>(&v)) w.int_field(5, *b ? 1 : 0);
  else if (auto* s = std::get_if<std::string>(&v)) w.bytes_field(2, *s);
  else if (auto* t = std::get_if<DType>(&v)) w.int_field(6, tf_datatype(*t));
  else if (auto* sh = std::get_if<Shape>(&v)) w.bytes_field(7, shape_proto(*sh));
  else if (auto* ts = std::get_if<Tensor>(&v)) {
    if (!ts->valid()) return false;
    w.bytes_field(8, tensor_proto(*ts));
  } else if (auto* is = std::get_if<AttrValue::Ints>(&v)) {
    Writer list;
    list.packed_ints(3, *is);
    w.bytes_field(1, list.bytes());
  } else if (auto* fs = std::get_if<AttrValue::Floats>(&v)) {
    Writer list;
    list.packed_floats(4, *fs);
    w.bytes_field(1, list.bytes());
  } else if (auto* ss = std::get_if<AttrValue::Strings>(&v)) {
    Writer list;
    for (const std::string& s : *ss) list.bytes_field(2, s);
    w.bytes_field(1, list.bytes());
  } else {
    return false;
  }
  *out = w.take();
  return true;
}

void attr_entry(Writer& node, const std::string& key, const std::string& value) {
  // map<string, AttrValue> attr = 5 is a repeated entry {key = 1, value = 2}.
  Writer entry;
  entry.bytes_field(1, key);
  entry.bytes_field(2, value);
  node.bytes_field(5, entry.bytes());
}

}  // namespace

std::string encode_graph_def(const Graph& g) {
  // GraphDef: node = 1 (NodeDef: name = 1, op = 2, input = 3, device = 4, attr = 5),
  // versions = 4 (VersionDef: producer = 1).
  Writer graph;
  for (int id = 0; id < g.num_nodes(); ++id) {
    const Node& n = g.node(id);
    Writer node;
    node.bytes_field(1, n.name);
    node.bytes_field(2, n.op);
    for (const Endpoint& e : n.inputs) {
      const std::string& src = g.node(e.node).name;
      node.bytes_field(3, e.index == 0 ? src : src + ":" + std::to_string(e.index));
    }
    for (int c : n.control_inputs) node.bytes_field(3, "^" + g.node(c).name);
    if (!n.device.empty()) node.bytes_field(4, n.device);
    for (const auto& [key, value] : n.attrs) {
      std::string a;
      if (attr_proto(value, &a)) attr_entry(node, key, a);
    }
    if (!n.output_shapes.empty()) {
      Writer list;
      for (const Shape& s : n.output_shapes) list.bytes_field(7, shape_proto(s));
      Writer a;
      a.bytes_field(1, list.bytes());
      attr_entry(node, "_output_shapes", a.bytes());
    }
    graph.bytes_field(1, node.bytes());
  }
  Writer versions;
  versions.int_field(1, 27);
  graph.bytes_field(4, versions.bytes());
  return graph.take();
}

}  // namespace actorflow::pb
