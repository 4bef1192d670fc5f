// TF1's optimizers on sparse gradients, checked against values TensorFlow itself wrote
// (tests/data/make_sparse_golden.py -> sparse_updates.json): the gradient of a gather with
// repeated ids, applied by each optimizer's sparse kernel to a plain variable and to one
// split in two shards (fixed_size_partitioner) read by embedding_lookup "mod" and "div".
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace af = actorflow;
using json = nlohmann::json;

namespace {

json golden() {
  std::ifstream in(std::string(AF_TEST_DATA_DIR) + "/sparse_updates.json");
  REQUIRE_MESSAGE(in.good(), "cannot read tests/data/sparse_updates.json");
  return json::parse(in);
}

std::unique_ptr<af::optim::Optimizer> make(const std::string& name) {
  namespace o = af::optim;
  if (name == "sgd") return std::make_unique<o::GradientDescent>(0.1);
  if (name == "momentum") return std::make_unique<o::Momentum>(0.1, 0.9);
  if (name == "nesterov") return std::make_unique<o::Momentum>(0.1, 0.9, true);
  if (name == "adagrad") return std::make_unique<o::Adagrad>(0.1, 0.1);
  if (name == "adadelta") return std::make_unique<o::Adadelta>(1.0, 0.95, 1e-6);
  if (name == "rmsprop") return std::make_unique<o::RMSProp>(0.01, 0.9, 0.5, 1e-10);
  if (name == "ftrl") return std::make_unique<o::Ftrl>(0.1, 0.001, 0.001, -0.5, 0.1);
  return nullptr;
}

}  // namespace

TEST_CASE("sparse updates of every TF1 optimizer match TensorFlow's, on plain and partitioned variables") {
  const json doc = golden();
  const int64_t rows = doc["rows"], width = doc["width"];
  const std::vector<float> initial = doc["initial"].get<std::vector<float>>();
  const auto ids = doc["ids"].get<std::vector<std::vector<int64_t>>>();
  const auto weights = doc["weights"].get<std::vector<std::vector<std::vector<float>>>>();
  REQUIRE(doc["cases"].size() >= 21);
  for (const json& c : doc["cases"]) {
    const std::string name = c["optimizer"];
    const int shards = c["shards"];
    const std::string strategy = c["partition_strategy"];
    CAPTURE(name);
    CAPTURE(shards);
    CAPTURE(strategy);
    af::Graph g;
    auto id_in = af::placeholder(g, af::i64, {-1}, "ids");
    auto w_in = af::placeholder(g, af::f32, {-1, width}, "weights");
    af::Tensor init = af::Tensor::from_vector(initial, {rows, width});
    af::Output whole, looked_up;
    if (shards == 1) {
      whole = af::get_variable(g, "table", {rows, width}, af::constant_initializer(init));
      looked_up = af::gather(whole, id_in);
    } else {
      auto pv = af::get_variable(g, "table", {rows, width}, af::constant_initializer(init), af::fixed_size_partitioner(shards));
      REQUIRE(pv.num_parts() == shards);
      looked_up = af::embedding_lookup(pv, id_in, strategy);
      whole = pv.value();
    }
    auto loss = af::reduce_sum(looked_up * w_in);
    auto opt = make(name);
    REQUIRE_MESSAGE(opt, "no optimizer " << name);
    auto train = opt->minimize(loss);
    // The gradient stays rows and ids all the way to the update.
    int sparse_applies = 0;
    for (int id = 0; id < g.num_nodes(); ++id) {
      CHECK_MESSAGE(g.node(id).op != "SparseRowsToDense", g.node(id).name << " densifies the gradient");
      if (g.node(id).op.rfind("SparseApply", 0) == 0) ++sparse_applies;
    }
    CHECK(sparse_applies == shards);
    auto sess = af::Session::create(g);
    REQUIRE(sess.ok());
    REQUIRE(sess->run_init().ok());
    const auto& expected = c["after_step"];
    REQUIRE(expected.size() == ids.size());
    for (size_t s = 0; s < ids.size(); ++s) {
      std::vector<float> flat;
      for (auto& row : weights[s]) flat.insert(flat.end(), row.begin(), row.end());
      af::Tensor id_t = af::Tensor::from_vector(ids[s], {static_cast<int64_t>(ids[s].size())});
      af::Tensor w_t = af::Tensor::from_vector(flat, {static_cast<int64_t>(weights[s].size()), width});
      auto r = sess->run({}, {{id_in, id_t}, {w_in, w_t}}, {train});
      REQUIRE_MESSAGE(r.ok(), r.status().to_string());
      auto v = sess->run({whole});
      REQUIRE(v.ok());
      const std::vector<float> want = expected[s].get<std::vector<float>>();
      REQUIRE((*v)[0].num_elements() == static_cast<int64_t>(want.size()));
      for (size_t k = 0; k < want.size(); ++k) {
        const float got = (*v)[0].data<float>()[k];
        CHECK_MESSAGE(std::abs(got - want[k]) <= 1e-5f + 1e-5f * std::abs(want[k]),
                      "after step " << s + 1 << ", element " << k << ": " << got << " vs TensorFlow's " << want[k]);
      }
    }
  }
}

TEST_CASE("a sparse update writes its rows in place, yet never reaches an earlier fetch, a constant or another variable") {
  af::Graph g;
  af::Tensor init = af::Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}, {4, 2});
  auto table = af::get_variable(g, "table", {4, 2}, af::constant_initializer(init));
  auto copy = af::get_variable(g, "copy", {4, 2}, af::zeros_initializer());
  auto copy_table = af::assign(copy, table, "copy_table");
  auto ids = af::placeholder(g, af::i64, {-1}, "ids");
  auto loss = af::reduce_sum(af::gather(table, ids));
  af::optim::GradientDescent sgd(0.5);
  auto train = sgd.minimize(loss);
  auto sess = af::Session::create(g);
  REQUIRE(sess.ok());
  REQUIRE(sess->run_init().ok());
  auto before = sess->run({table});
  REQUIRE(before.ok());
  REQUIRE(sess->run({copy_table}).ok());
  REQUIRE(sess->run({}, {{ids, af::Tensor::from_vector(std::vector<int64_t>{1, 1}, {2})}}, {train}).ok());
  auto after = sess->run({table, copy});
  REQUIRE(after.ok());
  for (int64_t k = 0; k < 8; ++k) {
    CHECK((*before)[0].data<float>()[k] == init.data<float>()[k]);  // what run returned stays
    CHECK((*after)[1].data<float>()[k] == init.data<float>()[k]);   // the variable copied from it
    // Row 1 got the gradient twice (two ids), the others nothing.
    const float want = init.data<float>()[k] - (k / 2 == 1 ? 1.0f : 0.0f);
    CHECK((*after)[0].data<float>()[k] == want);
  }
  // The initializer's constant is intact: initializing again gives its values back.
  REQUIRE(sess->run_init().ok());
  auto again = sess->run({table});
  REQUIRE(again.ok());
  for (int64_t k = 0; k < 8; ++k) CHECK((*again)[0].data<float>()[k] == init.data<float>()[k]);
}
