// TensorBoard event files: TFRecord framing and CRCs read back by hand, the Event /
// Summary / HistogramProto / GraphDef encodings decoded field by field, TF's histogram
// buckets, writer errors, and interop with TensorBoard's own loaders.
#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "../../engine/src/io/event_proto.h"
#include "actorflow/crc32c.h"
#include "interop/interop.h"
#include "interop/skip.h"
#include "test_util.h"

namespace af = actorflow;
namespace pb = actorflow::pb;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct TempDir {
  fs::path path;
  TempDir() {
    static std::atomic<int> counter{0};
    path = fs::temp_directory_path() / ("af_summary_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string str() const { return path.string(); }
};

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

uint32_t le32(const std::string& s, size_t at) {
  uint32_t v;
  std::memcpy(&v, s.data() + at, 4);
  return v;
}

// The framing, decoded independently of split_records: length, masked CRC of the
// length, payload, masked CRC of the payload.
std::vector<std::string> records_by_hand(const std::string& file) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < file.size()) {
    REQUIRE(file.size() - pos >= 16);
    uint64_t n;
    std::memcpy(&n, file.data() + pos, 8);
    CHECK(le32(file, pos + 8) == af::crc32c_mask(af::crc32c(file.data() + pos, 8)));
    REQUIRE(pos + 12 + n + 4 <= file.size());
    std::string data = file.substr(pos + 12, n);
    CHECK(le32(file, pos + 12 + n) == af::crc32c_mask(af::crc32c(data)));
    out.push_back(data);
    pos += 16 + n;
  }
  return out;
}

std::vector<pb::Field> fields(std::string_view msg) {
  std::vector<pb::Field> f;
  REQUIRE(pb::parse_fields(msg, &f));
  return f;
}

const pb::Field* field(const std::vector<pb::Field>& fs, int number) {
  for (const auto& f : fs)
    if (f.number == number) return &f;
  return nullptr;
}

std::vector<std::string> strings(const std::vector<pb::Field>& fs, int number) {
  std::vector<std::string> out;
  for (const auto& f : fs)
    if (f.number == number) out.emplace_back(f.bytes);
  return out;
}

std::vector<double> packed_doubles(const pb::Field* f) {
  std::vector<double> v(f ? f->bytes.size() / 8 : 0);
  if (f) std::memcpy(v.data(), f->bytes.data(), v.size() * 8);
  return v;
}

// Event -> Summary -> first Value, as fields.
std::vector<pb::Field> summary_value(const std::vector<pb::Field>& event) {
  const pb::Field* summary = field(event, 5);
  REQUIRE(summary);
  auto sf = fields(summary->bytes);
  const pb::Field* value = field(sf, 1);
  REQUIRE(value);
  return fields(value->bytes);
}

}  // namespace

TEST_CASE("SummaryWriter writes TFRecord-framed Event protos with valid CRCs") {
  TempDir dir;
  std::string path;
  {
    auto w = af::SummaryWriter::create(dir.str()).value();
    path = w.path();
    REQUIRE(w.add_scalar("loss", 0.25f, 10).ok());
    REQUIRE(w.add_scalar("loss", -3.5f, 20).ok());
    REQUIRE(w.add_histogram("weights", af::Tensor::from_vector<float>({1, 2, 2, -4}), 20).ok());
    REQUIRE(w.close().ok());
  }
  // events.out.tfevents.<10-digit unix time>.<hostname>
  std::string name = fs::path(path).filename().string();
  const std::string prefix = "events.out.tfevents.";
  REQUIRE(name.rfind(prefix, 0) == 0);
  std::string stamp = name.substr(prefix.size(), 10);
  CHECK(std::all_of(stamp.begin(), stamp.end(), ::isdigit));
  CHECK(std::abs(std::stoll(stamp) - static_cast<long long>(::time(nullptr))) < 600);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  CHECK(name.substr(prefix.size() + 11) == host);

  auto recs = records_by_hand(read_file(path));
  REQUIRE(recs.size() == 4);
  auto via_reader = af::read_tfrecords(path);
  REQUIRE(via_reader.ok());
  CHECK(*via_reader == recs);

  // Event{wall_time = 1, file_version = 3}
  auto first = fields(recs[0]);
  REQUIRE(field(first, 1));
  CHECK(field(first, 1)->wire == pb::kFixed64);
  CHECK(std::abs(field(first, 1)->as_double() - static_cast<double>(::time(nullptr))) < 600);
  REQUIRE(field(first, 3));
  CHECK(field(first, 3)->bytes == "brain.Event:2");

  // Event{step = 2, summary = 5{value = 1{tag = 1, simple_value = 2}}}
  auto second = fields(recs[1]);
  REQUIRE(field(second, 2));
  CHECK(field(second, 2)->value == 10);
  auto value = summary_value(second);
  CHECK(field(value, 1)->bytes == "loss");
  REQUIRE(field(value, 2));
  CHECK(field(value, 2)->wire == pb::kFixed32);
  CHECK(field(value, 2)->as_float() == 0.25f);
  CHECK(summary_value(fields(recs[2]))[1].as_float() == -3.5f);

  // histo = 5: HistogramProto{min 1, max 2, num 3, sum 4, sum_squares 5, limits 6, counts 7}
  auto hv = summary_value(fields(recs[3]));
  CHECK(field(hv, 1)->bytes == "weights");
  REQUIRE(field(hv, 5));
  auto h = fields(field(hv, 5)->bytes);
  CHECK(field(h, 1)->as_double() == -4);
  CHECK(field(h, 2)->as_double() == 2);
  CHECK(field(h, 3)->as_double() == 4);
  CHECK(field(h, 4)->as_double() == 1);
  CHECK(field(h, 5)->as_double() == 25);
  auto limits = packed_doubles(field(h, 6)), counts = packed_doubles(field(h, 7));
  REQUIRE(limits.size() == counts.size());
  double total = 0;
  for (double c : counts) total += c;
  CHECK(total == 4);
}

TEST_CASE("histograms use TensorFlow's exponential buckets") {
  const auto& limits = pb::default_bucket_limits();
  REQUIRE(limits.size() % 2 == 1);
  const size_t mid = limits.size() / 2;
  CHECK(limits.front() == -DBL_MAX);
  CHECK(limits.back() == DBL_MAX);
  CHECK(limits[mid] == 0);
  CHECK(limits[mid + 1] == 1e-12);
  CHECK(limits[mid + 2] == doctest::Approx(1.1e-12));
  CHECK(limits[mid - 1] == -1e-12);
  CHECK(std::is_sorted(limits.begin(), limits.end()));
  CHECK(limits[limits.size() - 2] >= 1e20 / 1.1);
  CHECK(limits[limits.size() - 2] < 1e20);

  auto values = af::Tensor::from_vector<double>({0.0, 1.0, 1.0001, -2.5, 1e-13, 1e30});
  auto h = pb::make_histogram("h", values);
  REQUIRE(h.ok());
  CHECK(h->num == 6);
  CHECK(h->min == -2.5);
  CHECK(h->max == 1e30);
  CHECK(h->sum == doctest::Approx(1e30));
  CHECK(h->sum_squares == doctest::Approx(1e60));
  REQUIRE(h->bucket.size() == h->bucket_limit.size());
  // Each value falls in the bucket whose right edge is the first limit above it.
  double total = 0;
  for (double c : h->bucket) total += c;
  CHECK(total == 6);
  auto count_for = [&](double v) {
    auto it = std::upper_bound(h->bucket_limit.begin(), h->bucket_limit.end(), v);
    REQUIRE(it != h->bucket_limit.end());
    return h->bucket[static_cast<size_t>(it - h->bucket_limit.begin())];
  };
  CHECK(count_for(1.0) == 2);   // 1.0 and 1.0001 share [0.9178..., 1.0096...)
  CHECK(count_for(0.0) == 2);   // 0 and 1e-13 share [0, 1e-12)
  CHECK(count_for(-2.5) == 1);
  CHECK(count_for(1e30) == 1);  // the last finite edge is below 1e20: [~1e20, DBL_MAX)
  for (size_t i = 0; i + 1 < h->bucket.size(); ++i)
    CHECK_FALSE((h->bucket[i] == 0 && h->bucket[i + 1] == 0));  // runs of empties merged

  auto empty = pb::make_histogram("e", af::Tensor(af::f32, {0}));
  REQUIRE(empty.ok());
  CHECK(empty->num == 0);
  CHECK(empty->min == 0);
  CHECK(empty->bucket == std::vector<double>{0});
  CHECK(empty->bucket_limit == std::vector<double>{DBL_MAX});

  auto ints = pb::make_histogram("i", af::Tensor::from_vector<int32_t>({3, 3, 3}));
  REQUIRE(ints.ok());
  CHECK(ints->sum == 9);
  CHECK(ints->bucket == std::vector<double>{0, 3, 0});

  auto nan = pb::make_histogram("weights", af::Tensor::from_vector<float>({1, NAN}));
  CHECK(nan.status().code() == af::Code::invalid_argument);
  CHECK(contains(nan.status().message(), "'weights'"));
  CHECK(contains(nan.status().message(), "element 1"));
  CHECK_FALSE(pb::make_histogram("s", af::Tensor::scalar("text")).ok());
}

TEST_CASE("add_graph writes a GraphDef with names, ops, inputs, devices and shapes") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1, 4}, "x");
  af::Output w;
  {
    af::DeviceScope d(g, "/job:ps/task:0/cpu:0");
    w = af::variable(g, af::zeros(g, {4, 2}), "dense/kernel");
  }
  auto y = af::matmul(x, w, false, false, "dense/MatMul");
  auto parts = af::split(y, 2, 1, "halves");
  af::Operation done;
  {
    af::ControlDependencies c(g, {af::Operation(y)});
    done = af::no_op(g, "done");
  }
  auto second = af::identity(parts[1], "second");

  auto gd = pb::encode_graph_def(g);
  auto gfields = fields(gd);
  std::map<std::string, std::vector<pb::Field>> nodes;
  for (const auto& f : gfields)
    if (f.number == 1) {
      auto nf = fields(f.bytes);
      nodes[std::string(field(nf, 1)->bytes)] = nf;
    }
  CHECK(static_cast<int>(nodes.size()) == g.num_nodes());
  REQUIRE(nodes.count("dense/MatMul"));
  auto& mm = nodes["dense/MatMul"];
  CHECK(field(mm, 2)->bytes == "MatMul");
  CHECK(strings(mm, 3) == std::vector<std::string>{"x", "dense/kernel"});
  CHECK(field(nodes["dense/kernel"], 4)->bytes == "/job:ps/task:0/cpu:0");
  CHECK(field(mm, 4) == nullptr);
  CHECK(strings(nodes["second"], 3) == std::vector<std::string>{"halves:1"});
  CHECK(strings(nodes["done"], 3) == std::vector<std::string>{"^dense/MatMul"});

  // attr = 5: map entries {key, AttrValue}; "_output_shapes" is list{shape: [?, 2]}.
  std::map<std::string, std::string> attrs;
  for (const auto& f : mm)
    if (f.number == 5) {
      auto e = fields(f.bytes);
      attrs[std::string(field(e, 1)->bytes)] = std::string(field(e, 2)->bytes);
    }
  REQUIRE(attrs.count("_output_shapes"));
  auto list = fields(field(fields(attrs["_output_shapes"]), 1)->bytes);
  auto dims = fields(field(list, 7)->bytes);
  REQUIRE(dims.size() == 2);
  CHECK(static_cast<int64_t>(field(fields(dims[0].bytes), 1)->value) == -1);
  CHECK(field(fields(dims[1].bytes), 1)->value == 2);
  // A dtype attribute becomes AttrValue.type = 6 with TensorFlow's enum (DT_FLOAT = 1).
  std::map<std::string, std::string> var_attrs;
  for (const auto& f : nodes["dense/kernel"])
    if (f.number == 5) {
      auto e = fields(f.bytes);
      var_attrs[std::string(field(e, 1)->bytes)] = std::string(field(e, 2)->bytes);
    }
  REQUIRE(var_attrs.count("dtype"));
  CHECK(field(fields(var_attrs["dtype"]), 6)->value == 1);

  // The graph event: Event.graph_def = 4 holds exactly these bytes.
  TempDir dir;
  auto writer = af::SummaryWriter::create(dir.str()).value();
  REQUIRE(writer.add_graph(g).ok());
  REQUIRE(writer.close().ok());
  auto recs = af::read_tfrecords(writer.path());
  REQUIRE(recs.ok());
  REQUIRE(recs->size() == 2);
  CHECK(field(fields((*recs)[1]), 4)->bytes == gd);
  (void)second;
  (void)done;
}

TEST_CASE("SummaryWriter buffering, errors and damaged files") {
  TempDir dir;
  auto w = af::SummaryWriter::create(dir.str(), /*flush_secs=*/3600).value();
  REQUIRE(w.add_scalar("a", 1, 1).ok());
  CHECK(af::read_tfrecords(w.path())->size() == 1);  // only the file_version event is out
  REQUIRE(w.flush().ok());
  CHECK(af::read_tfrecords(w.path())->size() == 2);

  CHECK(w.add_scalar("", 1, 1).code() == af::Code::invalid_argument);
  auto bad = w.add_histogram("h", af::Tensor::from_vector<double>({INFINITY}), 3);
  CHECK(bad.code() == af::Code::invalid_argument);
  CHECK(contains(bad.message(), "'h'"));

  // A second writer in the same second gets its own file.
  auto w2 = af::SummaryWriter::create(dir.str()).value();
  CHECK(w2.path() != w.path());
  REQUIRE(w2.close().ok());

  REQUIRE(w.close().ok());
  REQUIRE(w.close().ok());  // closing twice is harmless
  auto late = w.add_scalar("a", 1, 2);
  CHECK(late.code() == af::Code::failed_precondition);
  CHECK(contains(late.message(), w.path()));

  const std::string good = read_file(w.path());
  auto rewrite = [&](const std::string& bytes) {
    std::ofstream f(w.path(), std::ios::binary | std::ios::trunc);
    f << bytes;
  };
  std::string flipped = good;
  flipped[good.size() - 6] ^= 1;  // inside the second record's payload
  rewrite(flipped);
  auto r = af::read_tfrecords(w.path());
  CHECK(r.status().code() == af::Code::data_loss);
  CHECK(contains(r.status().message(), "record 1"));
  CHECK(contains(r.status().message(), "data fails its CRC-32C"));
  std::string bad_len = good;
  bad_len[0] ^= 1;
  rewrite(bad_len);
  CHECK(contains(af::read_tfrecords(w.path()).status().message(), "length fails its CRC-32C"));
  rewrite(good.substr(0, good.size() - 3));
  CHECK(contains(af::read_tfrecords(w.path()).status().message(), "truncated"));

  auto unwritable = af::SummaryWriter::create("/proc/no/such/dir");
  REQUIRE_FALSE(unwritable.ok());
  CHECK(contains(unwritable.status().message(), "/proc/no/such/dir"));
}

// tests/data/events.tfevents was written by tf.summary (tests/data/make_golden.py): the
// reader and field decoder this file checks our writer with read TensorFlow's own file,
// TF2's tensor summaries and the legacy simple_value / HistogramProto our writer emits.
TEST_CASE("golden event file written by tf.summary: scalars, a histogram, legacy values") {
  auto records = af::read_tfrecords(std::string(AF_TEST_DATA_DIR) + "/events.tfevents");
  REQUIRE_MESSAGE(records.ok(), records.status().to_string());
  REQUIRE(records->size() == 6);
  auto int_of = [](const std::vector<pb::Field>& fs, int number) -> int64_t {
    const pb::Field* f = field(fs, number);
    return f ? static_cast<int64_t>(f->value) : 0;  // proto3: an absent field is zero
  };

  auto first = fields((*records)[0]);
  REQUIRE(field(first, 3));
  CHECK(field(first, 3)->bytes == "brain.Event:2");
  REQUIRE(field(first, 1));
  CHECK(field(first, 1)->as_double() > 1.5e9);  // wall_time, seconds since 1970

  // Event.summary.value[0]: tag 1, tensor 8 (TensorProto), metadata 9 (plugin_data 1,
  // plugin_name 1). TensorProto: dtype 1, tensor_shape 2 (dim 2, size 1), content 4.
  struct GoldenTensor {
    int64_t dtype;
    std::vector<int64_t> dims;
    std::string content;
  };
  auto tensor_of = [&](const std::vector<pb::Field>& value) {
    const pb::Field* t = field(value, 8);
    REQUIRE(t);
    auto tf = fields(t->bytes);
    GoldenTensor out{int_of(tf, 1), {}, {}};
    const pb::Field* shape = field(tf, 2);
    REQUIRE(shape);
    for (const auto& d : fields(shape->bytes))
      if (d.number == 2) out.dims.push_back(int_of(fields(d.bytes), 1));
    const pb::Field* content = field(tf, 4);
    REQUIRE(content);
    out.content = std::string(content->bytes);
    return out;
  };
  auto plugin_of = [&](const std::vector<pb::Field>& value) {
    const pb::Field* meta = field(value, 9);
    REQUIRE(meta);
    // field() points into the vector it searches: keep that vector alive.
    const std::vector<pb::Field> meta_fields = fields(meta->bytes);
    const pb::Field* plugin = field(meta_fields, 1);
    REQUIRE(plugin);
    auto name = strings(fields(plugin->bytes), 1);
    REQUIRE(name.size() == 1);
    return name[0];
  };

  const float losses[] = {0.5f, 0.25f, 0.125f};
  for (int step = 0; step < 3; ++step) {
    CAPTURE(step);
    auto event = fields((*records)[static_cast<size_t>(step) + 1]);
    CHECK(int_of(event, 2) == step);
    auto value = summary_value(event);
    CHECK(strings(value, 1) == std::vector<std::string>{"loss"});
    CHECK(plugin_of(value) == "scalars");
    GoldenTensor t = tensor_of(value);
    CHECK(t.dtype == 1);  // DT_FLOAT
    CHECK(t.dims.empty());
    REQUIRE(t.content.size() == 4);
    float v;
    std::memcpy(&v, t.content.data(), 4);
    CHECK(v == losses[step]);
  }

  // tf.summary.histogram of {1, 2, 2, 3, 3, 3} in 3 buckets: a [3, 3] DT_DOUBLE tensor of
  // (left edge, right edge, count).
  auto hist_event = fields((*records)[4]);
  CHECK(int_of(hist_event, 2) == 7);
  auto hist = summary_value(hist_event);
  CHECK(strings(hist, 1) == std::vector<std::string>{"weights"});
  CHECK(plugin_of(hist) == "histograms");
  GoldenTensor h = tensor_of(hist);
  CHECK(h.dtype == 2);  // DT_DOUBLE
  CHECK(h.dims == std::vector<int64_t>{3, 3});
  REQUIRE(h.content.size() == 9 * 8);
  std::vector<double> cells(9);
  std::memcpy(cells.data(), h.content.data(), h.content.size());
  CHECK(cells == std::vector<double>{1.0, 1.6666666666666665, 1.0,                 //
                                     1.6666666666666665, 2.333333333333333, 2.0,  //
                                     2.333333333333333, 3.0, 3.0});

  // A Summary with two legacy values: simple_value (2, float) and histo (5).
  auto legacy = fields((*records)[5]);
  CHECK(int_of(legacy, 2) == 9);
  const pb::Field* summary = field(legacy, 5);
  REQUIRE(summary);
  std::vector<std::vector<pb::Field>> values;
  for (const auto& f : fields(summary->bytes))
    if (f.number == 1) values.push_back(fields(f.bytes));
  REQUIRE(values.size() == 2);
  CHECK(strings(values[0], 1) == std::vector<std::string>{"legacy/accuracy"});
  REQUIRE(field(values[0], 2));
  CHECK(field(values[0], 2)->as_float() == 0.875f);
  CHECK(strings(values[1], 1) == std::vector<std::string>{"legacy/histo"});
  const pb::Field* histo = field(values[1], 5);
  REQUIRE(histo);
  auto hf = fields(histo->bytes);
  // HistogramProto: min 1, max 2, num 3, sum 4, sum_squares 5, bucket_limit 6, bucket 7.
  const double scalars[] = {-1.0, 4.0, 5.0, 7.5, 31.25};
  for (int n = 1; n <= 5; ++n) {
    CAPTURE(n);
    REQUIRE(field(hf, n));
    CHECK(field(hf, n)->as_double() == scalars[n - 1]);
  }
  CHECK(packed_doubles(field(hf, 6)) == std::vector<double>{0.0, 2.0, DBL_MAX});
  CHECK(packed_doubles(field(hf, 7)) == std::vector<double>{1.0, 2.0, 2.0});
}

TEST_CASE("needs tensorboard: TensorBoard's loaders read our event files") {
  std::string why;
  std::string python = interop::python_with({"numpy", "tensorboard"}, &why);
  if (python.empty()) aft::skip("TensorBoard interop skipped: " + why);
  TempDir dir;
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1, 3}, "input");
  af::Output w;
  {
    af::DeviceScope d(g, "/cpu:0");
    w = af::variable(g, af::ones(g, {3, 2}), "layer/weights");
  }
  af::matmul(x, w, false, false, "layer/MatMul");

  std::vector<float> hist_values;
  for (int i = 0; i < 1000; ++i) hist_values.push_back(static_cast<float>(std::sin(i * 0.37) * 3 + 0.5));
  double hmin = 1e9, hmax = -1e9, hsum = 0;
  for (float v : hist_values) {
    hmin = std::min<double>(hmin, v);
    hmax = std::max<double>(hmax, v);
    hsum += v;
  }
  {
    auto writer = af::SummaryWriter::create(dir.str()).value();
    REQUIRE(writer.add_graph(g).ok());
    for (int step = 0; step < 5; ++step) REQUIRE(writer.add_scalar("train/loss", 1.0f / (step + 1), step * 100).ok());
    REQUIRE(writer.add_histogram("layer/weights", af::Tensor::from_vector<float>(hist_values), 7).ok());
    REQUIRE(writer.add_histogram("layer/weights", af::Tensor::from_vector<float>({1, 2}), 8).ok());
  }
  char buf[128];
  std::string scalars = "[";
  for (int step = 0; step < 5; ++step) {
    std::snprintf(buf, sizeof buf, "%s[%d, %.9g]", step ? "," : "", step * 100, 1.0 / (step + 1));
    scalars += buf;
  }
  scalars += "]";
  std::snprintf(buf, sizeof buf, "%.17g, \"max\": %.17g, \"sum\": %.17g", hmin, hmax, hsum);
  std::string expected = "{\"scalars\": {\"train/loss\": " + scalars + "},"
                         "\"histograms\": {\"layer/weights\": [{\"step\": 7, \"num\": 1000, \"min\": " + buf + "},"
                         "{\"step\": 8, \"num\": 2, \"min\": 1, \"max\": 2, \"sum\": 3}]},"
                         "\"graph\": {\"layer/MatMul\": {\"op\": \"MatMul\", \"input\": [\"input\", \"layer/weights\"], \"shape\": [-1, 2]},"
                         "\"layer/weights\": {\"op\": \"VariableV2\", \"input\": [], \"device\": \"/cpu:0\", \"shape\": [3, 2]}}}";
  const std::string expected_path = (dir.path / "expected.json").string();
  {
    std::ofstream f(expected_path);
    f << expected;
  }
  std::string out;
  int rc = interop::run_script(python, "check_events.py", {dir.str(), expected_path}, &out);
  INFO(out);
  CHECK(rc == 0);
  CHECK(contains(out, "OK: 9 events"));  // file_version, graph, 5 scalars, 2 histograms
}
