// Partitions executed in one process (actors/partition_executor.h) through the loopback
// RemoteEdges: random DAGs over three locations, each partition its own executor and
// the three run concurrently for each step id, equal the local session bit for bit.
// Also the rendezvous' credits (back-pressure) and a deadline when a partition never
// runs its half of a step.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/graph_partition.h>
#include <actorflow/runtime/partition_executor.h>
#include <actorflow/runtime/remote_edges.h>

#include <future>

#include "random_dag.h"

namespace af = actorflow;
namespace rt = actorflow::runtime;

namespace {

struct InProcessCluster {
  std::shared_ptr<rt::LoopbackEdges> loop = std::make_shared<rt::LoopbackEdges>();
  std::map<std::string, std::unique_ptr<rt::PartitionExecutor>> parts;
  af::Partitions meta;

  af::Status build(const af::Graph& g, const af::PartitionOptions& popts, const af::SessionOptions& sopts) {
    AF_ASSIGN_OR_RETURN(meta, af::partition(g, popts));
    for (auto& [loc, pg] : meta.graphs) {
      auto r = std::make_shared<rt::EdgeRendezvous>(loc, loop, sopts.edge_capacity);
      loop->attach(r);
      AF_ASSIGN_OR_RETURN(parts[loc], rt::make_partition_executor(std::move(pg), r, sopts));
    }
    return af::Status::OK();
  }

  // Runs `step` on every partition at once; fetches by original tensor name.
  af::Result<std::vector<af::Tensor>> run(int64_t step, const std::string& feed_name, const af::Tensor& feed,
                                          const std::vector<std::string>& fetch_names, int64_t timeout_ms = 20000) {
    std::map<std::string, std::vector<std::string>> fetch_at;
    std::vector<std::pair<std::string, size_t>> where;  // per fetch: location, index there
    for (auto& f : fetch_names) {
      std::string node = f.substr(0, f.find(':'));
      const std::string& loc = meta.location_of.at(node);
      where.push_back({loc, fetch_at[loc].size()});
      fetch_at[loc].push_back(f);
    }
    std::string feed_loc = meta.location_of.at(feed_name.substr(0, feed_name.find(':')));
    std::map<std::string, std::future<af::Result<std::vector<af::Tensor>>>> running;
    for (auto& [loc, ex] : parts) {
      std::vector<std::pair<std::string, af::Tensor>> feeds;
      if (loc == feed_loc) feeds.push_back({feed_name, feed});
      // The fetch list is copied here: fetch_at[] inserts, and the threads run at once.
      running[loc] = std::async(std::launch::async, [&, loc = loc, feeds, fetches = fetch_at[loc]] {
        return parts.at(loc)->run_step(step, feeds, fetches, {}, timeout_ms);
      });
    }
    std::map<std::string, std::vector<af::Tensor>> got;
    af::Status first;
    for (auto& [loc, fut] : running) {
      auto r = fut.get();
      if (!r.ok() && first.ok()) first = r.status();
      if (r.ok()) got[loc] = std::move(*r);
    }
    if (!first.ok()) return first;
    std::vector<af::Tensor> out;
    for (auto& [loc, i] : where) out.push_back(got[loc][i]);
    return out;
  }
};

}  // namespace

TEST_CASE("50 random DAGs partitioned over 3 in-process executors equal the local session bit for bit") {
  const std::vector<std::string> devices = {"", "/job:worker/task:0", "/job:worker/task:1/cpu:0"};
  std::mt19937 rng(2024);
  int compared = 0, crossing = 0;
  for (int gi = 0; gi < 50; ++gi) {
    INFO("graph " << gi);
    aftpart::PlacedDag d;
    aftpart::build_placed_dag(d, rng, devices, 3);
    af::PartitionOptions popts;
    popts.default_location = "/job:ps/task:0/cpu:0";
    af::SessionOptions sopts;
    sopts.intra_op_threads = 1;
    sopts.edge_capacity = 1 + static_cast<int>(gi % 3);
    InProcessCluster c;
    auto built = c.build(d.g, popts, sopts);
    REQUIRE_MESSAGE(built.ok(), built.to_string());
    crossing += static_cast<int>(c.meta.edges.size());
    auto local = af::Session::create(d.g);
    REQUIRE(local.ok());
    std::vector<af::Fetch> fetches(d.fetches.begin(), d.fetches.end());
    std::vector<std::string> names;
    for (auto& f : d.fetches) names.push_back(f.name());
    for (int step = 0; step < 3; ++step) {
      std::vector<float> v(8);
      for (auto& e : v) e = static_cast<float>(static_cast<int>(rng() % 21) - 10) / 4.0f;
      af::Tensor in = af::Tensor::from_vector(v, {2, 4});
      auto got = c.run(100 + step, d.x.name(), in, names);
      REQUIRE_MESSAGE(got.ok(), got.status().to_string());
      auto want = local->run(fetches, {{d.x, in}});
      REQUIRE(want.ok());
      REQUIRE(got->size() == want->size());
      for (size_t f = 0; f < fetches.size(); ++f) {
        INFO("step " << step << " fetch " << names[f]);
        CHECK((*got)[f].equals((*want)[f]));
        ++compared;
      }
    }
  }
  CHECK(compared >= 150);
  CHECK(crossing > 100);
}

TEST_CASE("a _Send holds one of edge_capacity credits until the far side takes its tensor") {
  auto text = [](const char* s) {
    af::TensorMessage m;
    m.tensor = af::Tensor::scalar(std::string(s));
    return m;
  };
  auto loop = std::make_shared<rt::LoopbackEdges>();
  auto a = std::make_shared<rt::EdgeRendezvous>("/job:a/task:0/cpu:0", loop, 2);
  auto b = std::make_shared<rt::EdgeRendezvous>("/job:b/task:0/cpu:0", loop, 2);
  loop->attach(a);
  loop->attach(b);
  int granted = 0;
  for (int step = 0; step < 3; ++step)
    a->when_credit(step, 7, [&](af::Status s) { granted += s.ok() ? 1 : 0; });
  CHECK(granted == 2);  // the third waits
  for (int step = 0; step < 2; ++step)
    REQUIRE(loop->send_edge(b->location(), step, 7, text("x")).ok());
  std::string seen;
  b->when_edge(0, 7, a->location(), [&](af::Result<rt::EdgeValue> r) { seen = r.ok() ? r->tensor.item<std::string>() : "error"; });
  CHECK(seen == "x");
  CHECK(granted == 3);  // taking step 0's tensor returned its credit
  // A step aborted while waiting fails its waiter with the reason.
  std::string why;
  b->when_edge(5, 7, a->location(), [&](af::Result<rt::EdgeValue> r) { why = r.ok() ? "ok" : r.status().message(); });
  CHECK(why.empty());
  b->abort_step(5, af::deadline_exceeded("too late"));
  CHECK(why == "too late");
  CHECK_FALSE(loop->send_edge("/job:c/task:0/cpu:0", 0, 1, text("x")).ok());

  // Tensors of an aborted step give their credits back, arrived or late: a failed step
  // must not shrink the edge for good.
  b->expect_edge(9, a->location());
  int granted9 = 0;
  for (int step = 10; step < 12; ++step) a->when_credit(step, 9, [&](af::Status s) { granted9 += s.ok() ? 1 : 0; });
  REQUIRE(granted9 == 2);
  REQUIRE(loop->send_edge(b->location(), 10, 9, text("early")).ok());
  b->abort_step(10, af::cancelled("failed elsewhere"));  // an arrived tensor
  b->abort_step(11, af::cancelled("failed elsewhere"));
  REQUIRE(loop->send_edge(b->location(), 11, 9, text("late")).ok());  // a late one
  for (int step = 12; step < 14; ++step) a->when_credit(step, 9, [&](af::Status s) { granted9 += s.ok() ? 1 : 0; });
  CHECK(granted9 == 4);
}

TEST_CASE("a partition whose peer never runs the step fails within its deadline, naming the edge and location") {
  af::Graph g;
  af::Output x, y;
  {
    af::DeviceScope s(g, "/job:w/task:0");
    x = af::placeholder(g, af::f32, {2}, "x");
  }
  {
    af::DeviceScope s(g, "/job:w/task:1");
    y = af::tanh(x);
  }
  InProcessCluster c;
  af::SessionOptions sopts;
  REQUIRE(c.build(g, {}, sopts).ok());
  REQUIRE(c.parts.size() == 2);
  auto& consumer = c.parts.at("/job:w/task:1/cpu:0");
  auto t0 = std::chrono::steady_clock::now();
  auto r = consumer->run_step(1, {}, {y.name()}, {}, 300);
  auto took = std::chrono::steady_clock::now() - t0;
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == af::Code::deadline_exceeded);
  CHECK(r.status().message().find("/job:w/task:1/cpu:0") != std::string::npos);
  // It says what it still waited for: the edge, and where from.
  CHECK_MESSAGE(r.status().message().find("waiting for edges ") != std::string::npos, r.status().to_string());
  CHECK_MESSAGE(r.status().message().find(" from /job:w/task:0/cpu:0") != std::string::npos, r.status().to_string());
  // ... and which node produces what the edge carries.
  CHECK_MESSAGE(r.status().message().find("edges 0 (x) from ") != std::string::npos, r.status().to_string());
  CHECK(took < std::chrono::seconds(5));
  // The executor still serves the next step once both halves run it.
  auto ok = c.run(2, x.name(), af::Tensor::from_vector(std::vector<float>{0.5f, -1}, {2}), {y.name()});
  REQUIRE_MESSAGE(ok.ok(), ok.status().to_string());
  CHECK((*ok)[0].to_vector<float>().at(1) == doctest::Approx(std::tanh(-1.0f)));
}

TEST_CASE("a partition whose kernel fails ends its step at once, not at the deadline of the edges it waits for") {
  // The restarted-ps case: a read of a variable the ps lost fails, while the partition
  // also waits for an edge the other side sends only after that read.
  af::Graph g;
  af::Output x, y;
  {
    af::DeviceScope s(g, "/job:w/task:0");
    x = af::placeholder(g, af::f32, {2}, "x");
  }
  {
    af::DeviceScope s(g, "/job:w/task:1");
    auto v = af::variable(g, af::Tensor::from_vector<float>({1, 2}, {2}), "never_initialized");
    y = af::tanh(x) + v;
  }
  InProcessCluster c;
  REQUIRE(c.build(g, {}, af::SessionOptions{}).ok());
  auto& consumer = c.parts.at("/job:w/task:1/cpu:0");
  auto t0 = std::chrono::steady_clock::now();
  auto r = consumer->run_step(1, {}, {y.name()}, {}, 20000);
  auto took = std::chrono::steady_clock::now() - t0;
  REQUIRE_FALSE(r.ok());
  CHECK_MESSAGE(r.status().code() != af::Code::deadline_exceeded, r.status().to_string());
  CHECK_MESSAGE(r.status().message().find("never_initialized") != std::string::npos, r.status().to_string());
  CHECK(took < std::chrono::seconds(5));
}

TEST_CASE("a partition past its deadline names the kernels of the step still running") {
  af::Graph g;
  af::Output all_done, x;
  {
    af::DeviceScope s(g, "/job:w/task:0");
    x = af::placeholder(g, af::f32, {1}, "x");
    af::train::WorkerTable table;
    table.device = "/job:w/task:0";
    table.num_workers = 2;
    all_done = af::train::wait_workers_done(g, table, 1500);  // no worker ever reports its end
  }
  {
    af::DeviceScope s(g, "/job:w/task:1");
    (void)af::tanh(x);
  }
  InProcessCluster c;
  REQUIRE(c.build(g, {}, af::SessionOptions{}).ok());
  auto& part = c.parts.at("/job:w/task:0/cpu:0");
  auto r = part->run_step(1, {}, {all_done.name()}, {}, 300);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == af::Code::deadline_exceeded);
  CHECK_MESSAGE(r.status().message().find("kernels still running: WaitWorkersDone 'wait_workers_done'") != std::string::npos,
                r.status().to_string());
}
