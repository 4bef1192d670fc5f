// In-graph summary ops (af::summary, TF1's tf.summary / tf.scalar_summary): the seeds'
// train-and-log loop translated line by line and read back from the event file, tags
// under name scopes, the "summaries" collection, MergeSummary's duplicate tags, the
// histogram's NaN error, SummaryWriter::add_summary's checks, and TensorBoard reading it.
#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "actorflow/protobuf_wire.h"
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
    path = fs::temp_directory_path() / ("af_summary_ops_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string str() const { return path.string(); }
};

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

// One Summary.Value as the test reads it back.
struct Value {
  std::string tag;
  bool has_simple = false;
  float simple = 0;
  bool has_histo = false;
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket;
};

// Summary{value = 1{tag = 1, simple_value = 2, histo = 5{min = 1, max = 2, num = 3,
// sum = 4, sum_squares = 5, bucket = 7}}}
std::vector<Value> decode_summary(std::string_view summary) {
  std::vector<Value> out;
  for (const pb::Field& v : fields(summary)) {
    REQUIRE(v.number == 1);
    Value value;
    for (const pb::Field& f : fields(v.bytes)) {
      if (f.number == 1) value.tag = std::string(f.bytes);
      if (f.number == 2) {
        value.has_simple = true;
        value.simple = f.as_float();
      }
      if (f.number == 5) {
        value.has_histo = true;
        auto h = fields(f.bytes);
        for (int n = 1; n <= 5; ++n) REQUIRE(field(h, n));
        value.min = field(h, 1)->as_double();
        value.max = field(h, 2)->as_double();
        value.num = field(h, 3)->as_double();
        value.sum = field(h, 4)->as_double();
        value.sum_squares = field(h, 5)->as_double();
        const pb::Field* b = field(h, 7);
        REQUIRE(b);
        value.bucket.resize(b->bytes.size() / 8);
        std::memcpy(value.bucket.data(), b->bytes.data(), value.bucket.size() * 8);
      }
    }
    out.push_back(value);
  }
  return out;
}

// An event read back: Event{wall_time = 1, step = 2, file_version = 3, summary = 5}.
struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  bool has_summary = false;
  std::vector<Value> values;
};

std::vector<Event> read_events(const std::string& path) {
  auto records = af::read_tfrecords(path);
  REQUIRE_MESSAGE(records.ok(), records.status().to_string());
  std::vector<Event> out;
  for (const std::string& r : *records) {
    Event e;
    for (const pb::Field& f : fields(r)) {
      if (f.number == 1) e.wall_time = f.as_double();
      if (f.number == 2) e.step = static_cast<int64_t>(f.value);
      if (f.number == 3) e.file_version = std::string(f.bytes);
      if (f.number == 5) {
        e.has_summary = true;
        e.values = decode_summary(f.bytes);
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::string fetched_string(const af::Tensor& t) {
  REQUIRE(t.dtype() == af::DType::string);
  REQUIRE(t.num_elements() == 1);
  return t.data<std::string>()[0];
}

bool in_summaries(const af::Graph& g, const af::Output& x) {
  const auto& c = g.collection(af::summary::kCollection);
  return std::find(c.begin(), c.end(), x.node_id()) != c.end();
}

// The seeds' linear regression: y = x w + b fitted by SGD, loss and w summarized.
struct Model {
  af::Graph g;
  af::Output x, y_true, w, loss, merged;
  af::Operation train;
  Model() {
    x = af::placeholder(g, af::f32, {-1, 1}, "x");
    y_true = af::placeholder(g, af::f32, {-1, 1}, "y");
    w = af::variable(g, af::Tensor::from({{0.5f}}), "w");
    auto b = af::variable(g, af::Tensor::from({0.f}), "b");
    loss = af::reduce_mean(af::square(af::matmul(x, w) + b - y_true), {}, false, "loss_value");
    af::summary::scalar("loss", loss);      // tf.scalar_summary("loss", loss)
    af::summary::histogram("w", w);         // tf.histogram_summary("w", W)
    merged = af::summary::merge_all(g);     // tf.merge_all_summaries()
    train = af::optim::GradientDescent(0.1).minimize(loss);
  }
  af::FeedDict feeds() const {
    return {{x, af::Tensor::from({{1.f}, {2.f}, {3.f}})}, {y_true, af::Tensor::from({{2.f}, {4.f}, {6.f}})}};
  }
};

}  // namespace

TEST_CASE("the seeds' loop: merged summaries run with the train op and land in the event file") {
  TempDir dir;
  Model m;
  REQUIRE(m.merged.valid());
  auto sess = af::Session::create(m.g).value();
  REQUIRE(sess.run_init().ok());
  std::string path;
  std::vector<float> losses;
  std::vector<af::Tensor> ws;
  {
    auto writer = af::SummaryWriter::create(dir.str()).value();
    path = writer.path();
    for (int64_t step = 1; step <= 3; ++step) {
      // summary_str, loss, w, _ = sess.run([merged, loss, W, train], feed_dict)
      auto out = sess.run({m.merged, m.loss, m.w}, m.feeds(), {m.train});
      REQUIRE_MESSAGE(out.ok(), out.status().to_string());
      losses.push_back((*out)[1].item<float>());
      ws.push_back((*out)[2]);
      // writer.add_summary(summary_str, step); the string overload takes the same bytes.
      if (step == 2) REQUIRE(writer.add_summary(fetched_string((*out)[0]), step * 10).ok());
      else REQUIRE(writer.add_summary((*out)[0], step * 10).ok());
    }
    REQUIRE(writer.close().ok());
  }
  CHECK(losses[2] < losses[0]);  // it trained

  auto events = read_events(path);
  REQUIRE(events.size() == 4);
  CHECK(events[0].file_version == "brain.Event:2");
  for (size_t i = 1; i < events.size(); ++i) {
    CAPTURE(i);
    const Event& e = events[i];
    CHECK(e.step == static_cast<int64_t>(i) * 10);
    CHECK(std::abs(e.wall_time - static_cast<double>(::time(nullptr))) < 600);
    REQUIRE(e.has_summary);
    REQUIRE(e.values.size() == 2);
    // In the order the summaries were made.
    CHECK(e.values[0].tag == "loss");
    REQUIRE(e.values[0].has_simple);
    CHECK(e.values[0].simple == losses[i - 1]);
    CHECK(e.values[1].tag == "w");
    REQUIRE(e.values[1].has_histo);
    const float wv = ws[i - 1].item<float>();
    CHECK(e.values[1].num == 1);
    CHECK(e.values[1].min == wv);
    CHECK(e.values[1].max == wv);
    CHECK(e.values[1].sum == wv);
    CHECK(e.values[1].sum_squares == static_cast<double>(wv) * wv);
    double count = 0;
    for (double c : e.values[1].bucket) count += c;
    CHECK(count == 1);
  }
}

TEST_CASE("summary ops: tags follow the name scope, nodes join the \"summaries\" collection") {
  af::Graph g;
  CHECK_FALSE(af::summary::merge_all(g).valid());  // as TF's merge_all: None when there are none
  auto v = af::placeholder(g, af::f32, {}, "v");
  auto w = af::variable(g, af::Tensor::from({1.f, 2.f}), "w");  // a node and a scope "w"
  af::Output a, again, h, top, wh;
  {
    af::NameScope scope(g, "train");
    a = af::summary::scalar("loss", v);
    again = af::summary::scalar("loss", v);
    h = af::summary::histogram("inputs", v);
  }
  top = af::summary::scalar("loss", v);
  wh = af::summary::histogram("w", w);
  CHECK(a.node().name == "train/loss");
  CHECK(a.node().op == "ScalarSummary");
  CHECK(g.node(a.node().inputs[0].node).name == "train/loss/tags");
  CHECK(again.node().name == "train/loss_1");
  CHECK(g.node(again.node().inputs[0].node).name == "train/loss_1/tags");
  CHECK(h.node().name == "train/inputs");
  CHECK(h.node().op == "HistogramSummary");
  CHECK(g.node(h.node().inputs[0].node).name == "train/inputs/tag");
  CHECK(top.node().name == "loss");
  CHECK(wh.node().name == "w_1");  // the scope "w" is the variable's
  for (const auto& s : {a, again, h, top, wh}) {
    CHECK(s.dtype() == af::DType::string);
    CHECK(s.shape() == af::Shape{});
    CHECK(in_summaries(g, s));
  }
  CHECK(g.collection("summaries").size() == 5);

  af::Output all = af::summary::merge_all(g);
  REQUIRE(all.valid());
  CHECK(all.node().name == "Merge/MergeSummary");
  CHECK(all.node().inputs.size() == 5);
  CHECK_FALSE(in_summaries(g, all));
  af::Output some = af::summary::merge({a, h, top, wh});
  CHECK(some.node().name == "Merge_1/MergeSummary");
  CHECK(af::summary::merge({a}, "mine").node().name == "mine");

  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  const af::FeedDict feeds = {{v, af::Tensor::scalar(1.5f)}};
  // Both "loss" summaries of the scope "train" carry the tag "train/loss".
  auto dup = sess.run({all}, feeds);
  REQUIRE_FALSE(dup.ok());
  CHECK(contains(dup.status().to_string(), "duplicate tag 'train/loss'"));

  auto out = sess.run({some}, feeds);
  REQUIRE_MESSAGE(out.ok(), out.status().to_string());
  const std::string merged = fetched_string((*out)[0]);
  auto values = decode_summary(merged);
  std::vector<std::string> tags;
  for (const Value& x : values) tags.push_back(x.tag);
  CHECK(tags == std::vector<std::string>{"train/loss", "train/inputs", "loss", "w"});
  CHECK(values[0].simple == 1.5f);
  CHECK(values[2].simple == 1.5f);
  CHECK(values[1].num == 1);
  CHECK(values[1].sum == 1.5);
  CHECK(values[3].num == 2);
  CHECK(values[3].sum == 3);

  auto tags_read = af::summary_tags(merged);
  REQUIRE(tags_read.ok());
  CHECK(*tags_read == tags);
}

TEST_CASE("summary ops: misuse is a build error; ScalarSummary takes one tag per value") {
  af::Graph g;
  auto vec = af::placeholder(g, af::f32, {3}, "vec");
  auto text = af::constant(g, "hello", "text");
  auto build = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const af::Error& e) {
      return e.status().to_string();
    }
    return "";
  };
  CHECK(contains(build([&] { af::summary::scalar("v", vec); }), "same shape"));
  CHECK(contains(build([&] { af::summary::scalar("t", text); }), "must be numeric"));
  CHECK(contains(build([&] { af::summary::histogram("t", text); }), "numeric or bool"));
  CHECK(contains(build([&] { af::summary::scalar("", af::constant(g, 1.f)); }), "empty"));
  CHECK(contains(build([&] { af::summary::merge({}); }), "no summaries"));
  CHECK(contains(build([&] { af::summary::merge({vec}); }), "must be a string tensor"));

  // TF's op itself takes a tag per element.
  af::NodeSpec spec;
  spec.op = "ScalarSummary";
  spec.name = "many";
  spec.inputs = {af::constant(g, af::Tensor::from_vector<std::string>({"a", "b", "c"}), "tags"), vec};
  auto many = g.add_node(spec);
  REQUIRE(many.ok());
  auto out = aft::eval(g, {many->output(0)}, {{vec, af::Tensor::from({1.f, 2.f, 3.f})}});
  auto values = decode_summary(fetched_string(out[0]));
  REQUIRE(values.size() == 3);
  CHECK(values[1].tag == "b");
  CHECK(values[2].simple == 3.f);
}

TEST_CASE("MergeSummary: a duplicate tag is an error naming the tag and the node") {
  af::Graph g;
  auto v = af::placeholder(g, af::f32, {}, "v");
  auto s = af::summary::scalar("loss", v);
  auto twice = af::summary::merge({s, s}, "twice");
  auto status = aft::eval_status(g, twice, {{v, af::Tensor::scalar(1.f)}});
  REQUIRE_FALSE(status.ok());
  CHECK(contains(status.to_string(), "duplicate tag 'loss'"));
  CHECK(contains(status.to_string(), "twice"));

  // The same rule, called directly; empty tags may repeat, as in TF.
  std::string x = af::encode_scalar_summary("x", 1), y = af::encode_scalar_summary("y", 2);
  auto merged = af::merge_summaries({x, y});
  REQUIRE(merged.ok());
  CHECK(*merged == x + y);
  auto dup = af::merge_summaries({x, y, x});
  REQUIRE_FALSE(dup.ok());
  CHECK(contains(dup.status().to_string(), "summary input 2"));
  std::string untagged = af::encode_scalar_summary("", 3);
  CHECK(af::merge_summaries({untagged, untagged}).ok());
  auto bad = af::merge_summaries({x, "not a summary"});
  REQUIRE_FALSE(bad.ok());
  CHECK(contains(bad.status().to_string(), "summary input 1"));
}

TEST_CASE("HistogramSummary: NaN or Inf fails the step with an error naming the node") {
  af::Graph g;
  auto v = af::placeholder(g, af::f32, {-1}, "v");
  af::Output h;
  {
    af::NameScope scope(g, "layer");
    h = af::summary::histogram("activations", v);
  }
  auto merged = af::summary::merge_all(g);
  auto sess = af::Session::create(g).value();
  for (float bad : {NAN, INFINITY}) {
    auto r = sess.run({merged}, {{v, af::Tensor::from({1.f, bad, 2.f})}});
    REQUIRE_FALSE(r.ok());
    CHECK(contains(r.status().to_string(), "layer/activations"));
    CHECK(contains(r.status().to_string(), "element 1"));
  }
  // The session goes on working with finite values.
  auto ok = sess.run({merged}, {{v, af::Tensor::from({1.f, 3.f, 2.f})}});
  REQUIRE(ok.ok());
  auto values = decode_summary(fetched_string((*ok)[0]));
  REQUIRE(values.size() == 1);
  CHECK(values[0].num == 3);
  CHECK(values[0].min == 1);
  CHECK(values[0].max == 3);
  CHECK(values[0].sum == 6);
}

TEST_CASE("add_summary: a malformed Summary or a non-string tensor is an error; nothing is written") {
  TempDir dir;
  std::string path;
  {
    auto writer = af::SummaryWriter::create(dir.str()).value();
    path = writer.path();
    for (const std::string& bad : {std::string("not a summary"), std::string("\x0a\x05\x0a\x01", 4),
                                   std::string("\x12\x00", 2), af::encode_scalar_summary("x", 1).substr(1)}) {
      CAPTURE(bad);
      auto s = writer.add_summary(bad, 1);
      REQUIRE_FALSE(s.ok());
      CHECK(s.code() == af::Code::invalid_argument);
      CHECK(contains(s.to_string(), "add_summary"));
    }
    // A Value of the wrong wire type: simple_value as a varint.
    pb::Writer value;
    value.bytes_field(1, "t");
    value.int_field(2, 7);
    pb::Writer summary;
    summary.bytes_field(1, value.bytes());
    CHECK_FALSE(writer.add_summary(summary.bytes(), 1).ok());
    CHECK_FALSE(writer.add_summary(af::Tensor::scalar(1.f), 1).ok());
    CHECK_FALSE(writer.add_summary(af::Tensor::from_vector<std::string>({"", ""}), 1).ok());
    CHECK_FALSE(writer.add_summary(af::Tensor(), 1).ok());
    // An empty Summary is a valid one.
    REQUIRE(writer.add_summary(std::string(), 5).ok());
    REQUIRE(writer.close().ok());
    CHECK_FALSE(writer.add_summary(af::encode_scalar_summary("x", 1), 6).ok());
  }
  auto events = read_events(path);
  REQUIRE(events.size() == 2);
  CHECK(events[1].step == 5);
  CHECK(events[1].has_summary);
  CHECK(events[1].values.empty());
}

TEST_CASE("add_scalar and add_histogram write what the summary ops yield") {
  af::Tensor values = af::Tensor::from({1.f, -2.f, 0.5f, 1e6f});
  auto encoded = af::encode_histogram_summary("h", values);
  REQUIRE(encoded.ok());
  af::Graph g;
  auto hist = af::summary::histogram("h", af::constant(g, values));
  auto scal = af::summary::scalar("s", af::constant(g, 0.25f));
  auto out = aft::eval(g, {hist, scal});
  CHECK(fetched_string(out[0]) == *encoded);
  CHECK(fetched_string(out[1]) == af::encode_scalar_summary("s", 0.25f));

  TempDir dir;
  std::string path;
  {
    auto writer = af::SummaryWriter::create(dir.str()).value();
    path = writer.path();
    REQUIRE(writer.add_histogram("h", values, 3).ok());
    REQUIRE(writer.add_scalar("s", 0.25f, 3).ok());
    REQUIRE(writer.add_summary(out[0], 3).ok());
    REQUIRE(writer.add_summary(out[1], 3).ok());
  }
  auto records = af::read_tfrecords(path);
  REQUIRE(records.ok());
  REQUIRE(records->size() == 5);
  // Equal but for the wall time (field 1, the first 9 bytes).
  CHECK((*records)[1].substr(9) == (*records)[3].substr(9));
  CHECK((*records)[2].substr(9) == (*records)[4].substr(9));
}

TEST_CASE("needs tensorboard: TensorBoard's loaders read add_summary's events") {
  std::string why;
  std::string python = interop::python_with({"numpy", "tensorboard"}, &why);
  if (python.empty()) aft::skip("TensorBoard interop skipped: " + why);
  TempDir dir;
  Model m;
  auto sess = af::Session::create(m.g).value();
  REQUIRE(sess.run_init().ok());
  std::string scalars = "[", hists = "[";
  char buf[256];
  {
    auto writer = af::SummaryWriter::create(dir.str()).value();
    REQUIRE(writer.add_graph(m.g).ok());
    for (int step = 0; step < 3; ++step) {
      auto out = sess.run({m.merged, m.loss, m.w}, m.feeds(), {m.train});
      REQUIRE(out.ok());
      REQUIRE(writer.add_summary((*out)[0], step).ok());
      const double w = (*out)[2].item<float>();
      std::snprintf(buf, sizeof buf, "%s[%d, %.9g]", step ? "," : "", step, static_cast<double>((*out)[1].item<float>()));
      scalars += buf;
      std::snprintf(buf, sizeof buf, "%s{\"step\": %d, \"num\": 1, \"min\": %.17g, \"max\": %.17g, \"sum\": %.17g}",
                    step ? "," : "", step, w, w, w);
      hists += buf;
    }
  }
  const std::string expected = "{\"scalars\": {\"loss\": " + scalars + "]}, \"histograms\": {\"w\": " + hists +
                               "]}, \"graph\": {\"loss\": {\"op\": \"ScalarSummary\", \"input\": [\"loss/tags\", "
                               "\"loss_value\"]}, \"Merge/MergeSummary\": {\"op\": \"MergeSummary\", \"input\": "
                               "[\"loss\", \"w_1\"]}, \"w_1\": {\"op\": \"HistogramSummary\", \"input\": [\"w_1/tag\", \"w\"]}}}";
  const std::string expected_path = (dir.path / "expected.json").string();
  {
    std::ofstream f(expected_path);
    f << expected;
  }
  std::string out;
  int rc = interop::run_script(python, "check_events.py", {dir.str(), expected_path}, &out);
  INFO(expected);
  INFO(out);
  CHECK(rc == 0);
  CHECK(contains(out, "OK: 5 events"));  // file_version, graph, 3 summaries
}
