// The graph side of distributed training, in one process: replica_device_setter's
// placements, sync replicas (two workers' averaged gradients equal one step on the
// doubled batch; stale gradients dropped and counted; a round that times out goes on
// with what arrived), and bounded staleness read from the clock records.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <optional>
#include <thread>

#include "actorflow/graph_partition.h"
#include "test_util.h"

namespace af = actorflow;
namespace L = actorflow::layers;

namespace {

const af::Node* node(const af::Graph& g, const std::string& name) {
  const af::Node* n = g.find_node(name);
  REQUIRE_MESSAGE(n, "no node " << name);
  return n;
}

// A two-layer model whose loss is the mean over the batch, so that the mean of two
// workers' gradients is the gradient of the doubled batch.
struct Mlp {
  af::Output x, y, loss, step;
  std::vector<af::Output> vars;
};

Mlp build_mlp(af::Graph& g) {
  Mlp m;
  m.x = af::placeholder(g, af::f32, {-1, 4}, "x");
  m.y = af::placeholder(g, af::f32, {-1, 1}, "y");
  auto w1 = af::get_variable(g, "w1", {4, 8}, af::glorot_uniform_initializer(3));
  auto b1 = af::get_variable(g, "b1", {8}, af::zeros_initializer());
  auto w2 = af::get_variable(g, "w2", {8, 1}, af::glorot_uniform_initializer(4));
  auto h = af::relu(af::matmul(m.x, w1) + b1);
  m.loss = af::mean(af::square(af::matmul(h, w2) - m.y));
  m.step = af::train::global_step(g);
  m.vars = {w1, b1, w2};
  return m;
}

af::Tensor batch(int64_t rows, int seed, int cols) {
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<float>(seed * 131 + static_cast<int>(i)) * 0.37f);
  return af::Tensor::from_vector(v, {rows, cols});
}

af::Tensor concat_rows(const af::Tensor& a, const af::Tensor& b) {
  std::vector<float> v(a.data<float>(), a.data<float>() + a.num_elements());
  v.insert(v.end(), b.data<float>(), b.data<float>() + b.num_elements());
  return af::Tensor::from_vector(v, {a.dim(0) + b.dim(0), a.dim(1)});
}

// Three sync rounds of two replicas in one session: worker 1 on a thread with its feeds,
// the chief here with its own; each chief step must move the global step by one.
void run_two_replicas(af::Session& sess, const af::train::SyncReplicasOps& chief, const af::train::SyncReplicasOps& other,
                      const af::FeedDict& chief_feeds, const af::FeedDict& other_feeds) {
  af::Status worker_status = af::Status::OK();
  std::thread worker([&] {
    int64_t local = 0;
    for (int s = 0; s < 3 && worker_status.ok(); ++s) {
      af::FeedDict feeds = other_feeds;
      feeds.push_back({other.local_step, af::Tensor::scalar<int64_t>(local)});
      auto r = sess.run({other.worker_step}, feeds);
      if (!r.ok()) worker_status = r.status();
      else local = (*r)[0].item<int64_t>();
    }
  });
  int64_t local = 0;
  for (int s = 0; s < 3; ++s) {
    af::FeedDict feeds = chief_feeds;
    feeds.push_back({chief.local_step, af::Tensor::scalar<int64_t>(local)});
    auto r = sess.run({chief.chief_step}, feeds);
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    local = (*r)[0].item<int64_t>();
    CHECK(local == s + 1);  // the step moves once per round
  }
  worker.join();
  REQUIRE_MESSAGE(worker_status.ok(), worker_status.to_string());
}

}  // namespace

TEST_CASE("replica_device_setter: variables round-robin on the ps tasks with their slots and initializers") {
  af::Graph g;
  Mlp m;
  af::Operation train;
  {
    af::DeviceScope placement(g, af::train::replica_device_setter(2, "/job:worker/task:1"));
    m = build_mlp(g);
    af::optim::Adam adam(0.01);
    train = adam.minimize(m.loss, {}, m.step);
  }
  CHECK(node(g, "w1")->device == "/job:ps/task:0/cpu:0");
  CHECK(node(g, "b1")->device == "/job:ps/task:1/cpu:0");
  CHECK(node(g, "w2")->device == "/job:ps/task:0/cpu:0");
  CHECK(node(g, "global_step")->device == "/job:ps/task:1/cpu:0");
  // Slots and initializers beside their variable; the model's ops on the worker.
  CHECK(node(g, "w1/Adam")->device == "/job:ps/task:0/cpu:0");
  CHECK(node(g, "b1/Adam_1")->device == "/job:ps/task:1/cpu:0");
  CHECK(node(g, "w1/Assign")->device == "/job:ps/task:0/cpu:0");
  CHECK(node(g, "Adam/update_w2/ApplyAdam")->device == "/job:ps/task:0/cpu:0");
  for (int id = 0; id < g.num_nodes(); ++id)
    if (g.node(id).name.rfind("w2/Initializer", 0) == 0)
      CHECK_MESSAGE(g.node(id).device == "/job:ps/task:0/cpu:0", g.node(id).name);
  CHECK(m.loss.node().device == "/job:worker/task:1");
  // The update ops run where their variable lives, and the graph partitions cleanly.
  for (int id = 0; id < g.num_nodes(); ++id)
    if (g.node(id).op == "ApplyAdam") CHECK(g.node(id).device == node(g, g.node(id).attr_string("variable"))->device);
  af::PartitionOptions opts;
  opts.nodes = g.prune({train.node_id()});
  auto p = af::partition(g, opts);
  REQUIRE_MESSAGE(p.ok(), p.status().to_string());
  CHECK(p->graphs.size() == 3);
}

TEST_CASE("replica_device_setter: greedy by bytes balances the ps tasks") {
  af::Graph g;
  af::DeviceScope placement(g, af::train::replica_device_setter(2, "/job:worker/task:0", af::train::PsStrategy::greedy_by_bytes));
  af::get_variable(g, "big", {100, 100});
  af::get_variable(g, "small1", {10});
  af::get_variable(g, "small2", {10});
  af::get_variable(g, "mid", {50, 50});
  CHECK(node(g, "big")->device == "/job:ps/task:0/cpu:0");
  CHECK(node(g, "small1")->device == "/job:ps/task:1/cpu:0");
  CHECK(node(g, "small2")->device == "/job:ps/task:1/cpu:0");
  CHECK(node(g, "mid")->device == "/job:ps/task:1/cpu:0");
}

TEST_CASE("sync replicas: two workers' mean gradient equals one step on the doubled batch") {
  af::Tensor x0 = batch(6, 1, 4), x1 = batch(6, 2, 4), y0 = batch(6, 3, 1), y1 = batch(6, 4, 1);
  std::vector<af::Tensor> expected;
  {
    af::Graph g;
    Mlp m = build_mlp(g);
    af::optim::Adam adam(0.05);
    auto train = adam.minimize(m.loss, {}, m.step);
    auto sess = af::Session::create(g);
    REQUIRE(sess.ok());
    REQUIRE(sess->run_init().ok());
    for (int s = 0; s < 3; ++s)
      REQUIRE(sess->run({}, {{m.x, concat_rows(x0, x1)}, {m.y, concat_rows(y0, y1)}}, {train}).ok());
    auto v = sess->run({m.vars[0], m.vars[1], m.vars[2], m.step});
    REQUIRE(v.ok());
    expected = *v;
  }
  af::Graph g;
  Mlp m = build_mlp(g);
  af::optim::Adam adam(0.05);
  af::train::SyncReplicasOptions so;
  so.replicas_to_aggregate = 2;
  so.timeout_ms = 20000;
  auto chief = af::train::sync_replicas_minimize(adam, m.loss, m.step, 0, so);
  auto other = af::train::sync_replicas_minimize(adam, m.loss, m.step, 1, so);
  auto sess = af::Session::create(g);
  REQUIRE(sess.ok());
  REQUIRE(sess->run_init().ok());
  run_two_replicas(*sess, chief, other, {{m.x, x0}, {m.y, y0}}, {{m.x, x1}, {m.y, y1}});
  auto v = sess->run({m.vars[0], m.vars[1], m.vars[2], m.step});
  REQUIRE(v.ok());
  CHECK((*v)[3].item<int64_t>() == 3);
  for (int i = 0; i < 3; ++i) {
    const af::Tensor& a = (*v)[static_cast<size_t>(i)];
    const af::Tensor& b = expected[static_cast<size_t>(i)];
    REQUIRE(a.num_elements() == b.num_elements());
    for (int64_t k = 0; k < a.num_elements(); ++k) CHECK(std::abs(a.data<float>()[k] - b.data<float>()[k]) <= 1e-5f);
  }
  // A gradient computed for a round already applied is dropped and counted.
  auto late = sess->run({other.worker_step, other.num_stale},
                        {{m.x, x1}, {m.y, y1}, {other.local_step, af::Tensor::scalar<int64_t>(1)}});
  REQUIRE_MESSAGE(late.ok(), late.status().to_string());
  CHECK((*late)[0].item<int64_t>() == 3);  // the round it may go on with
  auto stale = sess->run({other.num_stale});
  REQUIRE(stale.ok());
  CHECK((*stale)[0].item<int64_t>() == 3);  // one per variable
}

// An embedding lookup feeding a linear layer: the embedding's gradient is sparse.
struct Embedded {
  af::Output ids, y, loss, step, emb, w;
};

Embedded build_embedded(af::Graph& g) {
  Embedded m;
  m.ids = af::placeholder(g, af::i64, {-1, 2}, "ids");
  m.y = af::placeholder(g, af::f32, {-1, 1}, "y");
  m.emb = af::get_variable(g, "emb", {50, 3}, af::random_uniform_initializer(-0.5, 0.5, 5));
  m.w = af::get_variable(g, "w", {6, 1}, af::glorot_uniform_initializer(6));
  auto x = af::reshape(af::embedding_lookup(m.emb, m.ids), {-1, 6});
  m.loss = af::mean(af::square(af::matmul(x, m.w) - m.y));
  m.step = af::train::global_step(g);
  return m;
}

// Ids with repeats inside a batch and across the two batches.
af::Tensor id_batch(int64_t rows, int seed) {
  std::vector<int64_t> v(static_cast<size_t>(rows * 2));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>((seed * 7 + static_cast<int>(i) * 3) % 11);
  return af::Tensor::from_vector(v, {rows, 2});
}

af::Tensor concat_ids(const af::Tensor& a, const af::Tensor& b) {
  std::vector<int64_t> v(a.data<int64_t>(), a.data<int64_t>() + a.num_elements());
  v.insert(v.end(), b.data<int64_t>(), b.data<int64_t>() + b.num_elements());
  return af::Tensor::from_vector(v, {a.dim(0) + b.dim(0), a.dim(1)});
}

TEST_CASE("sync replicas: sparse gradients are summed row by row and equal one step on the doubled batch, with two optimizers") {
  af::Tensor i0 = id_batch(6, 1), i1 = id_batch(6, 2), y0 = batch(6, 3, 1), y1 = batch(6, 4, 1);
  std::vector<af::Tensor> expected;
  {
    af::Graph g;
    Embedded m = build_embedded(g);
    af::optim::Ftrl ftrl(0.2, 0.001, 0.001);
    af::optim::Adagrad adagrad(0.1);
    auto train = af::group(g, {ftrl.minimize(m.loss, {m.emb}), adagrad.minimize(m.loss, {m.w}, m.step)});
    auto sess = af::Session::create(g);
    REQUIRE(sess.ok());
    REQUIRE(sess->run_init().ok());
    for (int s = 0; s < 3; ++s)
      REQUIRE(sess->run({}, {{m.ids, concat_ids(i0, i1)}, {m.y, concat_rows(y0, y1)}}, {train}).ok());
    auto v = sess->run({m.emb, m.w, m.step});
    REQUIRE(v.ok());
    expected = *v;
  }
  af::Graph g;
  Embedded m = build_embedded(g);
  af::optim::Ftrl ftrl(0.2, 0.001, 0.001);
  af::optim::Adagrad adagrad(0.1);
  af::train::SyncReplicasOptions so;
  so.replicas_to_aggregate = 2;
  so.timeout_ms = 20000;
  std::vector<af::train::OptimizerVars> parts{{&ftrl, {m.emb}}, {&adagrad, {m.w}}};
  auto chief = af::train::sync_replicas_minimize(parts, m.loss, m.step, 0, so);
  auto other = af::train::sync_replicas_minimize(parts, m.loss, m.step, 1, so);
  // The embedding's gradient travels as rows and indices: nothing builds its dense form.
  int sparse_deposits = 0;
  for (int id = 0; id < g.num_nodes(); ++id) {
    CHECK_MESSAGE(g.node(id).op != "SparseRowsToDense", g.node(id).name << " densifies a sparse gradient");
    if (g.node(id).op == "SparseAccumulatorApplyGradient") {
      ++sparse_deposits;
      CHECK(g.node(id).output_shapes.empty());
      const af::Endpoint in = g.node(id).inputs[1];
      const af::Shape& values = g.node(in.node).output_shapes[static_cast<size_t>(in.index)];
      const std::vector<int64_t> rows{-1, 3};
      CHECK_MESSAGE(values.dims() == rows, values.to_string());
      // Each row once: summed where the gradient is computed, before it leaves.
      CHECK(g.node(in.node).op == "SparseSumDuplicates");
    }
  }
  CHECK(sparse_deposits == 2);  // one per worker
  auto sess = af::Session::create(g);
  REQUIRE(sess.ok());
  REQUIRE(sess->run_init().ok());
  // The step moves once per round, not once per optimizer.
  run_two_replicas(*sess, chief, other, {{m.ids, i0}, {m.y, y0}}, {{m.ids, i1}, {m.y, y1}});
  auto v = sess->run({m.emb, m.w, m.step});
  REQUIRE(v.ok());
  CHECK((*v)[2].item<int64_t>() == 3);
  for (int i = 0; i < 2; ++i) {
    const af::Tensor& a = (*v)[static_cast<size_t>(i)];
    const af::Tensor& b = expected[static_cast<size_t>(i)];
    REQUIRE(a.num_elements() == b.num_elements());
    for (int64_t k = 0; k < a.num_elements(); ++k) CHECK(std::abs(a.data<float>()[k] - b.data<float>()[k]) <= 1e-5f);
  }
  // Rows no batch touched kept their initial values in both.
  CHECK(std::abs((*v)[0].data<float>()[49 * 3] - expected[0].data<float>()[49 * 3]) == 0.0f);
}

TEST_CASE("sync replicas: a sparse and a dense gradient for one accumulator are refused, naming the worker") {
  af::Graph g;
  auto step = af::placeholder(g, af::i64, af::Shape{}, "local_step");
  auto values = af::placeholder(g, af::f32, {-1, 2}, "values");
  auto indices = af::placeholder(g, af::i64, {-1}, "indices");
  auto dense = af::placeholder(g, af::f32, {4, 2}, "dense");
  af::NodeSpec sparse_put;
  sparse_put.op = "SparseAccumulatorApplyGradient";
  sparse_put.name = "sparse_put";
  sparse_put.inputs = {step, values, indices};
  sparse_put.attrs = {{"accumulator", std::string("acc")}, {"worker", int64_t{1}}};
  auto sp = g.add_node(std::move(sparse_put));
  REQUIRE_MESSAGE(sp.ok(), sp.status().to_string());
  af::NodeSpec dense_put;
  dense_put.op = "AccumulatorApplyGradient";
  dense_put.name = "dense_put";
  dense_put.inputs = {step, dense};
  dense_put.attrs = {{"accumulator", std::string("acc")}, {"worker", int64_t{2}}};
  auto dp = g.add_node(std::move(dense_put));
  REQUIRE_MESSAGE(dp.ok(), dp.status().to_string());
  auto sess = af::Session::create(g);
  REQUIRE(sess.ok());
  af::Tensor v = af::Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  af::Tensor ix = af::Tensor::from_vector(std::vector<int64_t>{3, 3}, {2});
  af::Tensor zero = af::Tensor::scalar<int64_t>(0);
  REQUIRE(sess->run({}, {{step, zero}, {values, v}, {indices, ix}}, {*sp}).ok());
  af::Status st = sess->run({}, {{step, zero}, {dense, af::Tensor::from_vector(std::vector<float>(8, 1.f), {4, 2})}}, {*dp}).status();
  CHECK(!st.ok());
  CHECK_MESSAGE(st.message().find("worker 2") != std::string::npos, st.to_string());
  CHECK_MESSAGE(st.message().find("dense gradient for an accumulator of sparse") != std::string::npos, st.to_string());
  // A negative row index is refused before anything is summed.
  af::Tensor bad = af::Tensor::from_vector(std::vector<int64_t>{0, -4}, {2});
  st = sess->run({}, {{step, zero}, {values, v}, {indices, bad}}, {*sp}).status();
  CHECK(!st.ok());
  CHECK_MESSAGE(st.message().find("indices[1] = -4") != std::string::npos, st.to_string());
}

// Plain SGD under sync replicas over 2 replicas, with `timeout_ms` per round: the ops of
// the chief (worker 0) and of worker 1.
struct SyncSgd {
  af::train::SyncReplicasOps chief, other;
};
SyncSgd sync_sgd(Mlp& m, int64_t timeout_ms) {
  af::optim::GradientDescent sgd(0.1);
  af::train::SyncReplicasOptions so;
  so.replicas_to_aggregate = 2;
  so.timeout_ms = timeout_ms;
  SyncSgd out;
  out.chief = af::train::sync_replicas_minimize(sgd, m.loss, m.step, 0, so);
  out.other = af::train::sync_replicas_minimize(sgd, m.loss, m.step, 1, so);
  return out;
}

// Sync SGD over 2 replicas whose global step can be set back, as a checkpoint restore does.
struct RewindableSync {
  explicit RewindableSync(int64_t timeout_ms) : m(build_mlp(g)), ops(sync_sgd(m, timeout_ms)) {
    rewind = af::placeholder(g, af::i64, af::Shape{}, "rewind_to");
    restored = af::assign(m.step, rewind, "restore_step");
    auto s = af::Session::create(g);
    REQUIRE(s.ok());
    sess.emplace(std::move(*s));
    REQUIRE(sess->run_init().ok());
  }
  void restore_step(int64_t step) { REQUIRE(sess->run({restored}, {{rewind, af::Tensor::scalar<int64_t>(step)}}).ok()); }
  af::Graph g;
  Mlp m;
  SyncSgd ops;
  af::Output rewind, restored;
  std::optional<af::Session> sess;
};

TEST_CASE("sync replicas: when the global step goes back (a checkpoint restored), the rounds restart at the chief's") {
  RewindableSync r(3000);
  auto& [chief, other] = r.ops;
  auto& m = r.m;
  auto& sess = r.sess;
  // Both replicas run round `local`; returns the chief's new step and the worker's round.
  auto round = [&](int64_t local) -> std::pair<int64_t, int64_t> {
    af::Result<std::vector<af::Tensor>> w = af::Status::OK();
    std::thread worker([&] {
      w = sess->run({other.worker_step}, {{m.x, batch(4, 2, 4)}, {m.y, batch(4, 3, 1)}, {other.local_step, af::Tensor::scalar<int64_t>(local)}});
    });
    auto c = sess->run({chief.chief_step}, {{m.x, batch(4, 1, 4)}, {m.y, batch(4, 4, 1)}, {chief.local_step, af::Tensor::scalar<int64_t>(local)}});
    worker.join();
    REQUIRE_MESSAGE(c.ok(), c.status().to_string());
    REQUIRE_MESSAGE(w.ok(), w.status().to_string());
    return {(*c)[0].item<int64_t>(), (*w)[0].item<int64_t>()};
  };
  for (int64_t s = 0; s < 3; ++s) CHECK(round(s).first == s + 1);
  // The chief restores step 1: every replica's next gradient is for round 1, behind the
  // accumulators' round 3. Both count: the round ends without waiting out the 3 s timeout.
  r.restore_step(1);
  auto t0 = std::chrono::steady_clock::now();
  auto [chief_step, worker_round] = round(1);
  CHECK(chief_step == 2);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(2500));
  CHECK(worker_round >= 2);
  t0 = std::chrono::steady_clock::now();
  auto next = round(2);
  CHECK(next.first == 3);
  CHECK(next.second == 3);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(2500));
}

// A chief step that fails elsewhere (a ps lost) leaves its takes parked on the surviving
// ps's accumulators until their timeout, while the chief restores and takes again. Such a
// take must not end the new round: it once took the chief's fresh gradient, moved the
// accumulator past the new round, and left the new take without gradients (chaos runs
// then stalled for a whole step deadline).
TEST_CASE("sync replicas: a take left from a failed step gives way to the chief's next take") {
  RewindableSync r(1500);
  auto& [chief, other] = r.ops;
  auto& m = r.m;
  auto& sess = r.sess;
  auto feeds = [&](const af::train::SyncReplicasOps& who, int64_t local, int seed) {
    return af::FeedDict{{m.x, batch(4, seed, 4)}, {m.y, batch(4, seed + 1, 1)}, {who.local_step, af::Tensor::scalar<int64_t>(local)}};
  };
  for (int64_t s = 0; s < 2; ++s) {
    af::Result<std::vector<af::Tensor>> w = af::Status::OK();
    std::thread worker([&] { w = sess->run({other.worker_step}, feeds(other, s, 2)); });
    auto c = sess->run({chief.chief_step}, feeds(chief, s, 1));
    worker.join();
    REQUIRE_MESSAGE(c.ok(), c.status().to_string());
    REQUIRE_MESSAGE(w.ok(), w.status().to_string());
  }
  // The step of round 2 whose worker never comes: its takes wait (1.5 s).
  af::Result<std::vector<af::Tensor>> orphan = af::Status::OK();
  std::thread old_step([&] { orphan = sess->run({chief.chief_step}, feeds(chief, 2, 1)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // The chief restores step 1 and runs round 1 again, as another kind of step (its own
  // executor, so its takes run beside the old ones, as on a daemon after a re-register).
  r.restore_step(1);
  af::Result<std::vector<af::Tensor>> again = af::Status::OK();
  std::thread new_step([&] { again = sess->run({chief.chief_step, m.loss}, feeds(chief, 1, 1)); });
  // The worker's gradient for round 1 comes after the old takes' timeout.
  std::this_thread::sleep_for(std::chrono::milliseconds(1400));
  auto w = sess->run({other.worker_step}, feeds(other, 1, 2));
  old_step.join();
  new_step.join();
  REQUIRE_MESSAGE(again.ok(), again.status().to_string());
  CHECK((*again)[0].item<int64_t>() == 2);  // round 1 applied once, from both replicas
  REQUIRE_MESSAGE(w.ok(), w.status().to_string());
  CHECK((*w)[0].item<int64_t>() == 2);
  // The orphaned step fails, saying why, rather than applying round 1's gradients as 2's.
  REQUIRE_FALSE(orphan.ok());
  CHECK_MESSAGE(orphan.status().message().find("round 1") != std::string::npos, orphan.status().to_string());
}

TEST_CASE("sync replicas: a round without its replicas goes on after the timeout") {
  af::Graph g;
  Mlp m = build_mlp(g);
  auto [chief, other] = sync_sgd(m, 300);
  auto sess = af::Session::create(g);
  REQUIRE(sess.ok());
  REQUIRE(sess->run_init().ok());
  auto t0 = std::chrono::steady_clock::now();
  auto r = sess->run({chief.chief_step}, {{m.x, batch(4, 1, 4)}, {m.y, batch(4, 2, 1)}, {chief.local_step, af::Tensor::scalar<int64_t>(0)}});
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  CHECK((*r)[0].item<int64_t>() == 1);
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(250));
  // A worker waiting for a round the chief never applies fails at its deadline.
  auto w = sess->run({other.worker_step}, {{m.x, batch(4, 1, 4)}, {m.y, batch(4, 2, 1)}, {other.local_step, af::Tensor::scalar<int64_t>(5)}});
  REQUIRE_FALSE(w.ok());
  CHECK(w.status().code() == af::Code::deadline_exceeded);
  CHECK(w.status().message().find("chief") != std::string::npos);
}

TEST_CASE("a step past its deadline names the kernels still waiting") {
  af::Graph g;
  af::train::WorkerTable table;
  table.device = "";
  table.num_workers = 2;
  af::Output all_done = af::train::wait_workers_done(g, table, 1500);
  af::SessionOptions opts;
  opts.step_timeout_ms = 200;
  auto sess = af::Session::create(g, opts);
  REQUIRE(sess.ok());
  auto r = sess->run({all_done});  // no worker ever reports its end
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == af::Code::deadline_exceeded);
  CHECK_MESSAGE(r.status().message().find("still running: WaitWorkersDone 'wait_workers_done'") != std::string::npos,
                r.status().to_string());
}

TEST_CASE("bounded staleness: the fast worker is never more than S clocks ahead of the slowest") {
  af::Graph g;
  af::train::WorkerTable table;
  table.device = "";
  table.num_workers = 2;
  const int64_t S = 2;
  auto clock = af::placeholder(g, af::i64, af::Shape{}, "clock");
  auto fast = af::train::worker_clock(g, table, 0, clock, S, 20000);
  auto slow = af::train::worker_clock(g, table, 1, clock, S, 20000);
  auto done0 = af::train::worker_done(g, table, 0);
  auto done1 = af::train::worker_done(g, table, 1);
  auto all_done = af::train::wait_workers_done(g, table, 20000);
  auto log = af::train::worker_clock_log(g, table);
  auto sess = af::Session::create(g);
  REQUIRE(sess.ok());
  const int kSteps = 12;
  af::Status slow_status = af::Status::OK();
  std::thread slow_worker([&] {
    for (int c = 1; c <= kSteps && slow_status.ok(); ++c) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));  // the test hook: a slow worker
      auto r = sess->run({slow}, {{clock, af::Tensor::scalar<int64_t>(c)}});
      if (!r.ok()) slow_status = r.status();
    }
    if (slow_status.ok()) slow_status = sess->run({}, {}, {done1}).status();
  });
  for (int c = 1; c <= kSteps; ++c) {
    auto r = sess->run({fast}, {{clock, af::Tensor::scalar<int64_t>(c)}});
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  }
  REQUIRE(sess->run({}, {}, {done0}).ok());
  auto n = sess->run({all_done});
  slow_worker.join();
  REQUIRE_MESSAGE(slow_status.ok(), slow_status.to_string());
  REQUIRE(n.ok());
  CHECK((*n)[0].item<int64_t>() == 2);
  auto records = sess->run({log});
  REQUIRE(records.ok());
  const af::Tensor& t = (*records)[0];
  REQUIRE(t.dim(0) == 2 * kSteps);
  int64_t max_lead = 0;
  for (int64_t r = 0; r < t.dim(0); ++r) {
    const int64_t* row = t.data<int64_t>() + 3 * r;
    int64_t lead = row[1] - row[2];
    CHECK_MESSAGE(lead <= S, "worker " << row[0] << " went on at clock " << row[1] << " with the slowest at " << row[2]);
    if (row[0] == 0) max_lead = std::max(max_lead, lead);
  }
  CHECK(max_lead == S);  // the fast worker did run ahead, as far as allowed
}
