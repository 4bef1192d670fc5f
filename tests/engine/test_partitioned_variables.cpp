// Partitioned variables as TF1 has them: the partitioners' shard counts and the shards'
// names, shapes and save_slice_info (TF1's values, worked out from
// partitioned_variables.py and variable_scope.py and written down here), lookups across
// shards with both partition strategies against a plain gather, gradients into every
// shard, placement on the ps tasks, checkpoints that move between shard counts, and a
// training step. The data-flow ops the lookup is built from are checked on their own.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include <actorflow/actorflow.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <numeric>

#include "gradient_check.h"
#include "saver_test_util.h"

namespace af = actorflow;
namespace fs = std::filesystem;

namespace {

// 0, 1, 2, ... as a float tensor of `shape`.
af::Tensor iota(af::Shape shape) {
  std::vector<float> v(static_cast<size_t>(shape.num_elements()));
  std::iota(v.begin(), v.end(), 0.f);
  return af::Tensor::from_vector(v, shape);
}

std::vector<std::vector<int64_t>> shard_shapes(const af::PartitionedVariable& pv) {
  std::vector<std::vector<int64_t>> out;
  for (const af::Output& p : pv.parts()) out.push_back(p.shape().dims());
  return out;
}

std::vector<int64_t> counts(const af::Partitioner& p, af::Shape shape, af::DType dtype = af::f32) { return p(shape, dtype); }

// The rows of `whole` (rows x width) at `rows`, as floats.
std::vector<float> rows_of(const af::Tensor& whole, const std::vector<int64_t>& rows) {
  const int64_t width = whole.num_elements() / whole.dim(0);
  std::vector<float> out;
  for (int64_t r : rows)
    for (int64_t k = 0; k < width; ++k) out.push_back(whole.data<float>()[r * width + k]);
  return out;
}

// Where id lands in the concatenated shards under "mod": shard id % p at row id / p.
std::vector<int64_t> mod_rows(const std::vector<int64_t>& ids, const std::vector<int64_t>& shard_rows) {
  const int64_t p = static_cast<int64_t>(shard_rows.size());
  std::vector<int64_t> offset(shard_rows.size(), 0);
  for (size_t i = 1; i < shard_rows.size(); ++i) offset[i] = offset[i - 1] + shard_rows[i - 1];
  std::vector<int64_t> out;
  for (int64_t id : ids) out.push_back(offset[static_cast<size_t>(id % p)] + id / p);
  return out;
}

}  // namespace

TEST_CASE("fixed_size_partitioner: TF1's shard names, shapes and save_slice_info") {
  af::Graph g;
  af::PartitionedVariable emb = [&] {
    af::VariableScope scope(g, "model");
    af::NameScope ignored(g, "tower");  // name scopes do not name variables
    return af::get_variable(g, "emb", {10, 4}, af::zeros_initializer(), af::fixed_size_partitioner(3));
  }();
  CHECK(emb.name() == "model/emb");
  CHECK(emb.shape() == af::Shape{10, 4});
  CHECK(emb.axis() == 0);
  CHECK(emb.partitions() == std::vector<int64_t>{3, 1});
  REQUIRE(emb.num_parts() == 3);
  CHECK(shard_shapes(emb) == std::vector<std::vector<int64_t>>{{4, 4}, {3, 4}, {3, 4}});
  const std::vector<std::string> specs = {"10 4 0,4:0,4", "10 4 4,3:0,4", "10 4 7,3:0,4"};
  for (int i = 0; i < 3; ++i) {
    const af::Output& part = emb.parts()[static_cast<size_t>(i)];
    CHECK(part.node().op == "VariableV2");
    CHECK(part.node().name == "model/emb/part_" + std::to_string(i));
    auto info = af::save_slice_info(part);
    REQUIRE(info.has_value());
    CHECK(info->full_name == "model/emb");
    CHECK(info->full_shape == std::vector<int64_t>{10, 4});
    CHECK(info->spec() == specs[static_cast<size_t>(i)]);
  }
  // Every shard is an ordinary trainable variable with its own initializer.
  CHECK(g.collection("variables").size() == 3);
  CHECK(g.collection("trainable_variables").size() == 3);
  CHECK(g.find_node("model/emb/part_2/Assign") != nullptr);

  // More shards than rows: as many as rows. Along axis 1: the first shard takes the extra column.
  CHECK(shard_shapes(af::get_variable(g, "few", {3, 2}, af::zeros_initializer(), af::fixed_size_partitioner(5))) ==
        std::vector<std::vector<int64_t>>{{1, 2}, {1, 2}, {1, 2}});
  af::PartitionedVariable cols = af::get_variable(g, "cols", {3, 5}, af::zeros_initializer(), af::fixed_size_partitioner(2, 1));
  CHECK(cols.axis() == 1);
  CHECK(cols.partitions() == std::vector<int64_t>{1, 2});
  CHECK(shard_shapes(cols) == std::vector<std::vector<int64_t>>{{3, 3}, {3, 2}});
  CHECK(af::save_slice_info(cols.parts()[1])->spec() == "3 5 0,3:3,2");
  // An unpartitioned variable has no slice.
  CHECK_FALSE(af::save_slice_info(af::get_variable(g, "plain", {2}, af::zeros_initializer())).has_value());
  CHECK_THROWS_AS(af::fixed_size_partitioner(2, 2)({3, 5}, af::f32), af::Error);
  CHECK_THROWS_AS(af::fixed_size_partitioner(0), af::Error);
}

TEST_CASE("min_max_variable_partitioner: TF1's counts from bytes, min_slice_size and max_partitions") {
  // ceil(total bytes / min_slice_size), clamped to [1, min(dim, max_partitions)].
  CHECK(counts(af::min_max_variable_partitioner(4), {1000, 100}) == std::vector<int64_t>{2, 1});  // 400000 B / 256 KiB = 1.53
  CHECK(counts(af::min_max_variable_partitioner(10, 0, 64 << 10), {1000, 100}) == std::vector<int64_t>{7, 1});  // 6.10
  CHECK(counts(af::min_max_variable_partitioner(3, 0, 1 << 10), {1000, 100}) == std::vector<int64_t>{3, 1});   // max wins
  CHECK(counts(af::min_max_variable_partitioner(100, 0, 4), {5, 1}) == std::vector<int64_t>{5, 1});            // the dim wins
  CHECK(counts(af::min_max_variable_partitioner(), {1000, 100}) == std::vector<int64_t>{1, 1});                // max 1
  CHECK(counts(af::min_max_variable_partitioner(16, 0, 1000), {100, 10}, af::f64) == std::vector<int64_t>{8, 1});
  CHECK(counts(af::min_max_variable_partitioner(16, 0, 1000), {100, 10}, af::f32) == std::vector<int64_t>{4, 1});
  CHECK(counts(af::min_max_variable_partitioner(16, 0, 512), {64, 2}, af::string) == std::vector<int64_t>{4, 1});
  CHECK(counts(af::min_max_variable_partitioner(16, 0, 512, 4), {64, 2}, af::string) == std::vector<int64_t>{1, 1});
  CHECK(counts(af::min_max_variable_partitioner(8, 1, 64), {4, 32}) == std::vector<int64_t>{1, 8});
  CHECK_THROWS_AS(af::min_max_variable_partitioner(8, 2)({4, 32}, af::f32), af::Error);

  af::Graph g;
  af::PartitionedVariable v =
      af::get_variable(g, "v", {1000, 100}, af::zeros_initializer(), af::min_max_variable_partitioner(10, 0, 64 << 10));
  REQUIRE(v.num_parts() == 7);
  // 1000 rows in 7: the first 1000 % 7 = 6 shards take 143, the last 142.
  for (int i = 0; i < 7; ++i) CHECK(v.parts()[static_cast<size_t>(i)].shape() == af::Shape{i < 6 ? 143 : 142, 100});
  CHECK(af::save_slice_info(v.parts()[6])->var_offset == std::vector<int64_t>{858, 0});
  // One partition is still a shard: "<name>/part_0" (TF's degenerate case).
  af::PartitionedVariable one = af::get_variable(g, "one", {8, 2}, af::zeros_initializer(), af::min_max_variable_partitioner());
  REQUIRE(one.num_parts() == 1);
  CHECK(one.parts()[0].node().name == "one/part_0");
}

TEST_CASE("partitioned get_variable: the whole value, sliced initial values, reuse") {
  af::Graph g;
  af::PartitionedVariable emb =
      af::get_variable(g, "emb", {10, 4}, af::constant_initializer(iota({10, 4})), af::fixed_size_partitioner(3));
  af::Output whole = emb.value();
  CHECK(whole.node().name == "emb");
  CHECK(whole.shape() == af::Shape{10, 4});
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  auto out = sess.run({whole, emb.parts()[1]}).value();
  CHECK(out[0].equals(iota({10, 4})));
  CHECK(out[1].to_vector<float>() == rows_of(iota({10, 4}), {4, 5, 6}));

  // Glorot scales each shard by the whole shape: limit sqrt(6 / (10 + 4)) = 0.655, not the
  // shard's sqrt(6 / (4 + 4)) = 0.866.
  af::PartitionedVariable glorot =
      af::get_variable(g, "glorot", {10, 4}, af::glorot_uniform_initializer(5), af::fixed_size_partitioner(3));
  const af::Node* uniform = g.find_node("glorot/part_0/Initializer/glorot_uniform");
  REQUIRE(uniform != nullptr);
  CHECK(uniform->attr_float("maxval") == doctest::Approx(std::sqrt(6.0 / 14)));

  // Reuse gives the same shards; another shape or count fails; so does the plain name.
  {
    af::VariableScope reuse(g, "", true);
    af::PartitionedVariable again = af::get_variable(g, "emb", {10, 4}, af::zeros_initializer(), af::fixed_size_partitioner(3));
    CHECK(again.parts()[2].node_id() == emb.parts()[2].node_id());
    CHECK_THROWS_AS(af::get_variable(g, "emb", {10, 4}, af::zeros_initializer(), af::fixed_size_partitioner(2)), af::Error);
    CHECK_THROWS_AS(af::get_variable(g, "emb", {12, 4}, af::zeros_initializer(), af::fixed_size_partitioner(3)), af::Error);
  }
  CHECK_THROWS_AS(af::get_variable(g, "emb", {10, 4}, af::zeros_initializer(), af::fixed_size_partitioner(3)), af::Error);
  CHECK_THROWS_AS(af::get_variable(g, "emb", {10, 4}, af::zeros_initializer()), af::Error);
  (void)af::get_variable(g, "flat", {4}, af::zeros_initializer());
  CHECK_THROWS_AS(af::get_variable(g, "flat", {4}, af::zeros_initializer(), af::fixed_size_partitioner(2)), af::Error);
}

TEST_CASE("dynamic_partition, dynamic_stitch and range: TF's values, errors and the stitch's gradient") {
  af::Graph g;
  auto data = af::constant(g, af::Tensor::from_vector<float>({10, 11, 20, 21, 30, 31, 40, 41, 50, 51}, {5, 2}));
  auto parts = af::placeholder(g, af::i32, {5}, "parts");
  std::vector<af::Output> split = af::dynamic_partition(data, parts, 3);
  REQUIRE(split.size() == 3);
  CHECK(split[0].shape() == af::Shape{-1, 2});
  auto sess = af::Session::create(g).value();
  auto out = sess.run({split[0], split[1], split[2]}, {{parts, af::Tensor::from_vector<int32_t>({2, 0, 2, 1, 0}, {5})}}).value();
  CHECK(out[0].to_vector<float>() == std::vector<float>{20, 21, 50, 51});
  CHECK(out[1].to_vector<float>() == std::vector<float>{40, 41});
  CHECK(out[2].to_vector<float>() == std::vector<float>{10, 11, 30, 31});
  auto bad = sess.run({split[0]}, {{parts, af::Tensor::from_vector<int32_t>({0, 3, 0, 0, 0}, {5})}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("partitions[1] = 3 is not in [0, 3)") != std::string::npos);

  auto i0 = af::constant(g, af::Tensor::from_vector<int32_t>({4, 0}, {2}));
  auto i1 = af::constant(g, af::Tensor::from_vector<int32_t>({1, 0}, {2}));  // 0 again: the later input wins
  auto d0 = af::constant(g, af::Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}));
  auto d1 = af::constant(g, af::Tensor::from_vector<float>({5, 6, 7, 8}, {2, 2}));
  auto stitched = af::dynamic_stitch({i0, i1}, {d0, d1});
  auto r = af::range(af::constant(g, int64_t{3}), af::constant(g, int64_t{-4}), af::constant(g, int64_t{-3}));
  auto sess2 = af::Session::create(g).value();
  auto out2 = sess2.run({stitched, r}).value();
  // Row 2 and 3 are named by no index: zeros.
  CHECK(out2[0].shape() == af::Shape{5, 2});
  CHECK(out2[0].to_vector<float>() == std::vector<float>{7, 8, 5, 6, 0, 0, 0, 0, 1, 2});
  CHECK(out2[1].to_vector<int64_t>() == std::vector<int64_t>{3, 0, -3});

  // The stitch's gradient gathers each data input's rows back.
  af::Graph gg;
  auto x0 = af::placeholder(gg, af::f64, {2, 3}, "x0");
  auto x1 = af::placeholder(gg, af::f64, {3, 3}, "x1");
  auto y = af::dynamic_stitch({af::constant(gg, af::Tensor::from_vector<int32_t>({3, 0}, {2})),
                               af::constant(gg, af::Tensor::from_vector<int32_t>({1, 4, 2}, {3}))},
                              {x0, x1});
  CHECK(aft::gradient_error(gg, y, {x0, x1}, {aft::random_f64({2, 3}, -1, 1, 3), aft::random_f64({3, 3}, -1, 1, 4)}) <= 1e-6);
}

TEST_CASE("embedding_lookup over uneven shards: \"div\" and \"mod\" as TF maps ids to shards") {
  for (int64_t rows : {10, 11, 12}) {
    for (const char* strategy : {"div", "mod"}) {
      CAPTURE(rows);
      CAPTURE(strategy);
      af::Graph g;
      const af::Tensor init = iota({rows, 3});
      af::PartitionedVariable emb =
          af::get_variable(g, "emb", {rows, 3}, af::constant_initializer(init), af::fixed_size_partitioner(3));
      std::vector<int64_t> shard_rows;
      for (const af::Output& p : emb.parts()) shard_rows.push_back(p.shape().dim(0));
      auto ids = af::placeholder(g, af::i64, {-1}, "ids");
      auto ids2d = af::placeholder(g, af::i32, {2, -1}, "ids2d");
      auto got = af::embedding_lookup(emb, ids, strategy);
      auto got2d = af::embedding_lookup(emb, ids2d, strategy);
      CHECK(got2d.shape() == af::Shape{2, -1, 3});
      // Every id, in a shuffled order with repeats.
      std::vector<int64_t> all;
      for (int64_t k = 0; k < rows; ++k) all.push_back((k * 7 + 3) % rows);
      all.push_back(rows - 1);
      all.push_back(0);
      std::vector<int32_t> half(all.begin(), all.begin() + 6);
      auto sess = af::Session::create(g).value();
      REQUIRE(sess.run_init().ok());
      auto out = sess.run({got, got2d, emb.value()}, {{ids, af::Tensor::from_vector(all, {static_cast<int64_t>(all.size())})},
                                                      {ids2d, af::Tensor::from_vector(half, {2, 3})}});
      REQUIRE_MESSAGE(out.ok(), out.status().to_string());
      const af::Tensor& whole = (*out)[2];
      // "div": shard p holds consecutive ids, so the lookup is a gather on the whole value.
      // "mod": id i lives in shard i % 3 at row i / 3.
      const bool div = std::string(strategy) == "div";
      std::vector<int64_t> at = div ? all : mod_rows(all, shard_rows);
      CHECK((*out)[0].shape() == af::Shape{static_cast<int64_t>(all.size()), 3});
      CHECK((*out)[0].to_vector<float>() == rows_of(whole, at));
      std::vector<int64_t> at_half(at.begin(), at.begin() + 6);
      CHECK((*out)[1].shape() == af::Shape{2, 3, 3});
      CHECK((*out)[1].to_vector<float>() == rows_of(whole, at_half));
      if (div) {
        auto plain = sess.run({af::gather(emb.value(), ids)}, {{ids, af::Tensor::from_vector(all, {static_cast<int64_t>(all.size())})}});
        REQUIRE(plain.ok());
        CHECK((*plain)[0].equals((*out)[0]));
      }
      // An id past the variable fails the step.
      auto past = sess.run({got}, {{ids, af::Tensor::from_vector<int64_t>({rows + 2}, {1})}});
      CHECK_FALSE(past.ok());
    }
  }
}

TEST_CASE("embedding_lookup: gradients reach every shard, row by row") {
  af::Graph g;
  af::PartitionedVariable emb = af::get_variable(g, "emb", {7, 2}, af::constant_initializer(iota({7, 2})), af::fixed_size_partitioner(3));
  auto ids = af::constant(g, af::Tensor::from_vector<int64_t>({6, 0, 3, 6, 4}, {5}));
  auto weights = af::constant(g, af::Tensor::from_vector<float>({1, 2, 3, 4, 5}, {5, 1}));
  auto loss = af::reduce_sum(af::embedding_lookup(emb, ids, "div") * weights);
  std::vector<af::Gradient> grads = af::gradients_sparse({loss}, emb.parts());
  std::vector<af::Output> dense;
  for (size_t i = 0; i < grads.size(); ++i) {
    REQUIRE(grads[i].valid());
    dense.push_back(grads[i].sparse() ? af::densify(grads[i], emb.parts()[i]) : grads[i].dense);
  }
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  auto out = sess.run({dense[0], dense[1], dense[2]}).value();
  // Shards of 3, 2, 2 rows ("div": ids 0-2, 3-4, 5-6): id 0 weighs 2, id 3 weighs 3, id 4
  // weighs 5, id 6 weighs 1 + 4.
  CHECK(out[0].to_vector<float>() == std::vector<float>{2, 2, 0, 0, 0, 0});
  CHECK(out[1].to_vector<float>() == std::vector<float>{3, 3, 5, 5});
  CHECK(out[2].to_vector<float>() == std::vector<float>{0, 0, 5, 5});
}

TEST_CASE("replica_device_setter places the shards on the ps tasks, and the lookup gathers there") {
  {
    af::Graph g;
    af::DeviceScope placement(g, af::train::replica_device_setter(2, "/job:worker/task:0"));
    af::PartitionedVariable emb = af::get_variable(g, "emb", {10, 4}, af::zeros_initializer(), af::fixed_size_partitioner(3));
    auto ids = af::placeholder(g, af::i64, {-1}, "ids");
    auto rows = af::embedding_lookup(emb, ids, "mod");
    const std::vector<std::string> want = {"/job:ps/task:0/cpu:0", "/job:ps/task:1/cpu:0", "/job:ps/task:0/cpu:0"};
    for (int i = 0; i < 3; ++i) {
      CHECK(emb.parts()[static_cast<size_t>(i)].node().device == want[static_cast<size_t>(i)]);
      const std::string shard = "emb/part_" + std::to_string(i);
      CHECK(g.find_node(shard + "/Assign")->device == want[static_cast<size_t>(i)]);
      const af::Node* gather = g.find_node(i == 0 ? "embedding_lookup/Gather" : "embedding_lookup/Gather_" + std::to_string(i));
      REQUIRE(gather != nullptr);
      CHECK(gather->device == want[static_cast<size_t>(i)]);
    }
    CHECK(rows.node().device == "/job:worker/task:0");
  }
  {
    // Greedy by bytes: a 100-byte variable on ps 0, then shards of 64, 48 and 48 bytes go
    // to ps 1, ps 1 (64 < 100) and ps 0 (100 < 112).
    af::Graph g;
    af::DeviceScope placement(g, af::train::replica_device_setter(2, "/job:worker/task:0", af::train::PsStrategy::greedy_by_bytes));
    auto big = af::get_variable(g, "big", {25}, af::zeros_initializer());
    af::PartitionedVariable emb = af::get_variable(g, "emb", {10, 4}, af::zeros_initializer(), af::fixed_size_partitioner(3));
    CHECK(big.node().device == "/job:ps/task:0/cpu:0");
    CHECK(emb.parts()[0].node().device == "/job:ps/task:1/cpu:0");
    CHECK(emb.parts()[1].node().device == "/job:ps/task:1/cpu:0");
    CHECK(emb.parts()[2].node().device == "/job:ps/task:0/cpu:0");
  }
}

TEST_CASE("Saver: a partitioned variable is saved whole and restores into 2, 1 or no shards") {
  TempDir dir;
  const af::Tensor value = iota({10, 4});
  {
    af::Graph g;
    af::PartitionedVariable emb = af::get_variable(g, "emb", {10, 4}, af::constant_initializer(value), af::fixed_size_partitioner(3));
    auto other = af::get_variable(g, "other", {2}, af::ones_initializer());
    af::Saver saver(g);
    // Some of the shards cannot be saved: the checkpoint holds the variable whole.
    CHECK_THROWS_AS(af::Saver(g, {emb.parts()[0], emb.parts()[1]}), af::Error);
    auto sess = af::Session::create(g).value();
    REQUIRE(sess.run_init().ok());
    REQUIRE(saver.save(sess, dir.str(), 1).ok());
    (void)other;
  }
  auto file = af::read_safetensors(af::latest_checkpoint(dir.str()).value());
  REQUIRE_MESSAGE(file.ok(), file.status().to_string());
  std::map<std::string, af::Tensor> saved;
  for (auto& t : *file) saved[t.name] = t.value;
  CHECK(saved.size() == 2);
  REQUIRE(saved.count("emb") == 1);
  CHECK(saved["emb"].equals(value));

  for (int shards : {2, 1, 0}) {
    CAPTURE(shards);
    af::Graph g;
    af::Output whole;
    std::vector<af::Output> parts;
    if (shards > 0) {
      af::PartitionedVariable emb = af::get_variable(g, "emb", {10, 4}, af::zeros_initializer(), af::fixed_size_partitioner(shards));
      whole = emb.value();
      parts = emb.parts();
    } else {
      whole = af::get_variable(g, "emb", {10, 4}, af::zeros_initializer());
    }
    (void)af::get_variable(g, "other", {2}, af::zeros_initializer());
    af::Saver saver(g);
    auto sess = af::Session::create(g).value();
    auto restored = saver.restore(sess, dir.str());
    REQUIRE_MESSAGE(restored.ok(), restored.to_string());
    CHECK(sess.eval(whole).value().equals(value));
    if (shards == 2) CHECK(sess.eval(parts[1]).value().to_vector<float>() == rows_of(value, {5, 6, 7, 8, 9}));
  }

  // And back: saved from 2 shards after a change, restored into 3.
  TempDir dir2;
  {
    af::Graph g;
    af::PartitionedVariable emb = af::get_variable(g, "emb", {10, 4}, af::constant_initializer(value), af::fixed_size_partitioner(2));
    af::Saver saver(g);
    auto sess = af::Session::create(g).value();
    REQUIRE(sess.run_init().ok());
    auto ph = af::placeholder(g, af::f32, {5, 4});
    REQUIRE(sess.run({}, {{ph, af::Tensor::filled(af::f32, {5, 4}, -1.0)}}, {af::Operation(af::assign(emb.parts()[1], ph))}).ok());
    REQUIRE(saver.save(sess, dir2.str(), 2).ok());
  }
  af::Graph g;
  af::PartitionedVariable emb = af::get_variable(g, "emb", {10, 4}, af::zeros_initializer(), af::fixed_size_partitioner(3));
  af::Saver saver(g);
  auto sess = af::Session::create(g).value();
  REQUIRE(saver.restore(sess, dir2.str()).ok());
  auto got = sess.run({emb.parts()[0], emb.parts()[1], emb.parts()[2]}).value();
  CHECK(got[0].to_vector<float>() == rows_of(value, {0, 1, 2, 3}));
  CHECK(got[1].to_vector<float>() == std::vector<float>{16, 17, 18, 19, -1, -1, -1, -1, -1, -1, -1, -1});
  CHECK(got[2].to_vector<float>() == std::vector<float>(12, -1.f));

  // A checkpoint whose variable has another shape is refused before anything is assigned.
  af::Graph wrong;
  (void)af::get_variable(wrong, "emb", {12, 4}, af::zeros_initializer(), af::fixed_size_partitioner(3));
  af::Saver wrong_saver(wrong);
  auto wrong_sess = af::Session::create(wrong).value();
  auto refused = wrong_saver.restore(wrong_sess, dir2.str());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.message().find("stores shape [10,4]") != std::string::npos);
}

TEST_CASE("a training step through a partitioned embedding updates the rows looked up, on their shards") {
  af::Graph g;
  af::PartitionedVariable emb = af::get_variable(g, "emb", {6, 2}, af::constant_initializer(iota({6, 2})), af::fixed_size_partitioner(3));
  auto ids = af::placeholder(g, af::i64, {-1}, "ids");
  auto target = af::placeholder(g, af::f32, {-1, 2}, "target");
  auto loss = af::reduce_sum(af::square(af::embedding_lookup(emb, ids, "mod") - target));
  af::Operation train = af::optim::GradientDescent(0.25).minimize(loss);
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  // Shards of rows [0,1 | 2,3], [4,5 | 6,7], [8,9 | 10,11]. "mod": id 0 is shard 0 row 0
  // (0, 1), id 4 is shard 1 row 1 (6, 7), looked up twice.
  auto step = sess.run({loss}, {{ids, af::Tensor::from_vector<int64_t>({0, 4, 4}, {3})},
                                {target, af::Tensor::from_vector<float>({0, 0, 8, 8, 8, 8}, {3, 2})}},
                       {train});
  REQUIRE_MESSAGE(step.ok(), step.status().to_string());
  CHECK((*step)[0].item<float>() == doctest::Approx(1 + 5 + 5));
  auto out = sess.run({emb.parts()[0], emb.parts()[1], emb.parts()[2]}).value();
  // d loss / d row = 2 (row - target) per lookup, and the step takes 0.25 of it:
  // id 0: (0, 1) - 0.25 * (0, 2); id 4: (6, 7) - 0.25 * 2 * 2 * (-2, -1).
  CHECK(out[0].to_vector<float>() == std::vector<float>{0, 0.5f, 2, 3});
  CHECK(out[1].to_vector<float>() == std::vector<float>{4, 5, 8, 8});
  CHECK(out[2].to_vector<float>() == std::vector<float>{8, 9, 10, 11});  // untouched
}

// The same, against values TensorFlow itself wrote (tests/data/make_partition_golden.py).
TEST_CASE("partitioners and embedding_lookup match what TensorFlow makes of the same shapes and ids") {
  std::ifstream in(std::string(AF_TEST_DATA_DIR) + "/partitioned_variables.json");
  REQUIRE_MESSAGE(in.good(), "cannot read tests/data/partitioned_variables.json");
  const nlohmann::json doc = nlohmann::json::parse(in);
  REQUIRE(doc["partitions"].size() >= 8);
  for (const auto& c : doc["partitions"]) {
    const std::string name = c["name"];
    CAPTURE(name);
    const std::vector<int64_t> shape = c["shape"].get<std::vector<int64_t>>();
    const af::DType dtype = c["dtype"] == "float64" ? af::f64 : af::f32;
    const auto& a = c["args"];
    af::Partitioner p = c["kind"] == "fixed"
                            ? af::fixed_size_partitioner(a["num_shards"].get<int64_t>(), a["axis"].get<int>())
                            : af::min_max_variable_partitioner(a["max_partitions"].get<int64_t>(), a["axis"].get<int>(),
                                                               a["min_slice_size"].get<int64_t>());
    af::Graph g;
    auto v = af::get_variable(g, name, af::Shape(shape), af::zeros_initializer(dtype), p);
    REQUIRE(static_cast<size_t>(v.num_parts()) == c["parts"].size());
    for (size_t k = 0; k < c["parts"].size(); ++k) {
      const auto& want = c["parts"][k];
      const af::Output& part = v.parts()[k];
      CHECK(part.node().name == want["name"].get<std::string>());
      CHECK(part.shape().dims() == want["shape"].get<std::vector<int64_t>>());
      auto info = af::save_slice_info(part);
      REQUIRE(info.has_value());
      CHECK(info->spec() == want["spec"].get<std::string>());
    }
  }
  for (const auto& c : doc["lookups"]) {
    const std::string strategy = c["strategy"];
    CAPTURE(strategy);
    af::Graph g;
    std::vector<af::Output> shards;
    for (size_t k = 0; k < c["shards"].size(); ++k) {
      const auto rows = c["shard_rows"][k].get<int64_t>();
      shards.push_back(af::constant(g, af::Tensor::from_vector(c["shards"][k].get<std::vector<float>>(), {rows, 2})));
    }
    const auto ids = c["ids"].get<std::vector<std::vector<int64_t>>>();
    std::vector<int64_t> flat;
    for (auto& r : ids) flat.insert(flat.end(), r.begin(), r.end());
    auto id_t = af::constant(g, af::Tensor::from_vector(flat, {static_cast<int64_t>(ids.size()), static_cast<int64_t>(ids[0].size())}));
    auto looked = af::embedding_lookup(shards, id_t, strategy);
    auto sess = af::Session::create(g);
    REQUIRE(sess.ok());
    auto r = sess->run({looked});
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    const std::vector<float> want = c["result"].get<std::vector<float>>();
    REQUIRE((*r)[0].num_elements() == static_cast<int64_t>(want.size()));
    CHECK((*r)[0].shape().dims() == std::vector<int64_t>{2, 3, 2});
    for (size_t k = 0; k < want.size(); ++k) CHECK((*r)[0].data<float>()[k] == want[k]);
  }
}
