// A real node daemon (build/tools/actorflow-node, a child process on 127.0.0.1, port 0)
// driven through Session::create(g, "af://127.0.0.1:PORT"): 50 random DAGs equal the
// local session bit for bit; kernel errors name the node and the daemon; kill -9 mid-step
// fails the step within its deadline naming the address, and a restarted daemon serves
// the next step; SIGTERM drains a step in flight and exits 0.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>

#include <atomic>
#include <future>
#include <optional>
#include <thread>
#include <random>

#include "net_chain_graph.h"
#include "random_dag.h"
#include "test_net_daemon_process.h"

namespace af = actorflow;
using aftnet::DaemonProcess;

namespace {

const char* kToken = "loopback-test-token";

using RandomGraph = aftpart::PlacedDag;

void build_random_dag(RandomGraph& rg, std::mt19937& rng) { aftpart::build_placed_dag(rg, rng, {""}, 0); }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("50 random DAGs on a daemon equal the local session bit for bit") {
  REQUIRE_MESSAGE(aftnet::daemon_built(), aftnet::daemon_binary() << " is not built (it is built with this test)");
  DaemonProcess d(kToken);
  REQUIRE_MESSAGE(d.started(), d.log());
  aftnet::ScopedEnv env("ACTORFLOW_TOKEN", kToken);
  std::mt19937 rng(4321);
  int compared = 0;
  for (int gi = 0; gi < 50; ++gi) {
    RandomGraph rg;
    build_random_dag(rg, rng);
    af::SessionOptions opts;
    opts.step_timeout_ms = 20000;
    auto remote = af::Session::create(rg.g, d.target(), opts);
    REQUIRE_MESSAGE(remote.ok(), remote.status().to_string());
    auto local = af::Session::create(rg.g);
    REQUIRE(local.ok());
    std::vector<af::Fetch> fetches(rg.fetches.begin(), rg.fetches.end());
    for (int step = 0; step < 3; ++step) {
      std::vector<float> v(8);
      for (auto& e : v) e = static_cast<float>(static_cast<int>(rng() % 21) - 10) / 4.0f;
      af::Tensor in = af::Tensor::from_vector(v, {2, 4});
      auto got = remote->run(fetches, {{rg.x, in}});
      REQUIRE_MESSAGE(got.ok(), got.status().to_string());
      auto want = local->run(fetches, {{rg.x, in}});
      REQUIRE(want.ok());
      REQUIRE(got->size() == want->size());
      for (size_t f = 0; f < fetches.size(); ++f) {
        INFO("graph " << gi << " step " << step << " fetch " << f);
        CHECK((*got)[f].equals((*want)[f]));
        ++compared;
      }
    }
  }
  CHECK(compared >= 150);
  CHECK(d.running());
}

TEST_CASE("variables, init ops, op fetches and a graph that grows work remotely") {
  REQUIRE(aftnet::daemon_built());
  DaemonProcess d(kToken);
  REQUIRE_MESSAGE(d.started(), d.log());
  aftnet::ScopedEnv env("ACTORFLOW_TOKEN", kToken);
  af::Graph g;
  auto v = af::variable(g, af::Tensor::zeros(af::f32, {3}), "acc");
  auto inc = af::assign_add(v, af::constant(g, std::vector<float>{1, 2, 3}, af::Shape{3}));
  auto sess = af::Session::create(g, d.target());
  REQUIRE_MESSAGE(sess.ok(), sess.status().to_string());
  REQUIRE(sess->run_init().ok());
  for (int i = 0; i < 4; ++i) REQUIRE(sess->run(std::vector<af::Fetch>{af::Fetch(af::Operation(inc))}).ok());
  auto out = sess->run({v});
  REQUIRE(out.ok());
  CHECK((*out)[0].equals(af::Tensor::from_vector<float>({4, 8, 12})));
  // The graph grows after its first runs: the daemon extends its copy, and the
  // variable keeps its value, as in a local session.
  auto doubled = v * 2.0;
  auto grown = sess->run({doubled, v});
  REQUIRE_MESSAGE(grown.ok(), grown.status().to_string());
  CHECK((*grown)[0].equals(af::Tensor::from_vector<float>({8, 16, 24})));
  CHECK((*grown)[1].equals(af::Tensor::from_vector<float>({4, 8, 12})));
}

TEST_CASE("a kernel error on the daemon names the node and the daemon; bad targets fail fast") {
  REQUIRE(aftnet::daemon_built());
  DaemonProcess d(kToken);
  REQUIRE_MESSAGE(d.started(), d.log());
  aftnet::ScopedEnv env("ACTORFLOW_TOKEN", kToken);
  af::Graph g;
  auto a = af::placeholder(g, af::f32, {-1, -1}, "a");
  auto b = af::placeholder(g, af::f32, {-1, -1}, "b");
  auto c = af::matmul(a, b, false, false, "product");
  auto sess = af::Session::create(g, d.target());
  REQUIRE(sess.ok());
  auto r = sess->run({c}, {{a, af::Tensor::filled(af::f32, {2, 3}, 1)}, {b, af::Tensor::filled(af::f32, {4, 5}, 1)}});
  REQUIRE_FALSE(r.ok());
  INFO(r.status().to_string());
  CHECK(contains(r.status().message(), "product"));
  CHECK(contains(r.status().message(), d.address()));
  // The session still works after a failed step.
  auto ok = sess->run({c}, {{a, af::Tensor::filled(af::f32, {2, 3}, 1)}, {b, af::Tensor::filled(af::f32, {3, 1}, 2)}});
  REQUIRE(ok.ok());
  CHECK((*ok)[0].equals(af::Tensor::filled(af::f32, {2, 1}, 6)));
  // Nobody listens on a port we just freed: create fails within its deadline.
  int dead_port = 0;
  {
    DaemonProcess gone(kToken);
    REQUIRE(gone.started());
    dead_port = gone.port();
  }
  af::SessionOptions opts;
  opts.step_timeout_ms = 3000;
  auto t0 = std::chrono::steady_clock::now();
  auto none = af::Session::create(g, "af://127.0.0.1:" + std::to_string(dead_port), opts);
  REQUIRE_FALSE(none.ok());
  CHECK(contains(none.status().message(), "127.0.0.1:" + std::to_string(dead_port)));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(4));
  CHECK_FALSE(af::Session::create(g, "af://127.0.0.1").ok());
}

TEST_CASE("kill -9 mid-step fails the step within its deadline, naming the address; a restarted daemon serves the next step") {
  REQUIRE(aftnet::daemon_built());
  auto d = std::make_unique<DaemonProcess>(kToken);
  REQUIRE_MESSAGE(d->started(), d->log());
  int port = d->port();
  std::string address = d->address();
  aftnet::ScopedEnv env("ACTORFLOW_TOKEN", kToken);
  // A step that cannot end by itself, so the kill always lands mid-step however fast or
  // loaded the machine is: it waits for a sync round nobody advances.
  af::Graph g;
  af::Output x = af::placeholder(g, af::f32, {2}, "x");
  af::Output y = x * 2.0;
  af::NodeSpec hold_spec;
  hold_spec.op = "SyncRoundWait";
  hold_spec.name = "hold";
  hold_spec.inputs = {af::constant(g, int64_t{1})};
  hold_spec.attrs = {{"barrier", std::string("never_advanced")}, {"timeout_ms", int64_t{60000}}};
  auto hold_op = g.add_node(hold_spec);
  REQUIRE_MESSAGE(hold_op.ok(), hold_op.status().to_string());
  af::Output hold = hold_op->output(0);
  af::SessionOptions opts;
  opts.step_timeout_ms = 60000;
  auto sess = af::Session::create(g, d->target(), opts);
  REQUIRE_MESSAGE(sess.ok(), sess.status().to_string());
  af::Tensor in = af::Tensor::from_vector(std::vector<float>{1, 2}, {2});
  REQUIRE(sess->run({y}, {{x, in}}).ok());

  auto pending = std::async(std::launch::async, [&] { return sess->run({hold}, {}); });
  REQUIRE(pending.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
  auto killed_at = std::chrono::steady_clock::now();
  d->kill9();
  REQUIRE(pending.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  auto failed_after = std::chrono::steady_clock::now() - killed_at;
  auto r = pending.get();
  REQUIRE_FALSE(r.ok());
  INFO(r.status().to_string());
  CHECK(r.status().code() == af::Code::unavailable);
  CHECK(contains(r.status().message(), address));
  CHECK(contains(r.status().message(), "/job:worker/task:0"));
  CHECK(failed_after < std::chrono::seconds(5));

  // Same port, new incarnation: the session reconnects and registers the graph again.
  d = std::make_unique<DaemonProcess>(kToken, port);
  REQUIRE_MESSAGE(d->started(), d->log());
  auto again = sess->run({y}, {{x, in}});
  REQUIRE_MESSAGE(again.ok(), again.status().to_string());
  CHECK(again->at(0).equals(af::Tensor::from_vector(std::vector<float>{2, 4}, {2})));
}

TEST_CASE("a step's deadline holds against a daemon that is slow, and SIGTERM drains a step in flight") {
  REQUIRE(aftnet::daemon_built());
  DaemonProcess d(kToken);
  REQUIRE_MESSAGE(d.started(), d.log());
  aftnet::ScopedEnv env("ACTORFLOW_TOKEN", kToken);
  // The whole chain step on this one daemon (net_chain_graph.h).
  auto slow = aftnet::chain_step(d.target(), {}, std::chrono::milliseconds(400), "", "");
  REQUIRE_MESSAGE(slow.ok(), slow.status().to_string() << "\n" << d.log());
  af::RunOptions quick;
  quick.timeout_ms = 50;
  auto t0 = std::chrono::steady_clock::now();
  auto late = slow->run(quick);
  REQUIRE_FALSE(late.ok());
  CHECK(late.status().code() == af::Code::deadline_exceeded);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3));

  auto pending = std::async(std::launch::async, [&] { return slow->run(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  int code = d.terminate(std::chrono::seconds(60));
  CHECK(code == 0);
  REQUIRE(pending.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  auto r = pending.get();
  CHECK_MESSAGE(r.ok(), r.status().to_string());
  std::string log = d.log();
  CHECK(contains(log, "SIGTERM"));
  CHECK(contains(log, "shutdown"));
  CHECK(contains(log, "/job:worker/task:0"));
}

TEST_CASE("concurrent steps from 4 threads; empty, one-element and 16 MiB tensors; frames over --max_message_bytes fail clearly") {
  REQUIRE(aftnet::daemon_built());
  DaemonProcess d(kToken, 0, {"--max_message_bytes", "1048576"});
  REQUIRE_MESSAGE(d.started(), d.log());
  aftnet::ScopedEnv env("ACTORFLOW_TOKEN", kToken);
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1}, "x");
  auto y = af::tanh(x) * 2.0 + x;
  auto col = af::placeholder(g, af::f32, {-1, 1}, "col");
  auto outer = af::matmul(col, col, false, true, "outer");
  auto remote = af::Session::create(g, d.target());
  REQUIRE(remote.ok());
  auto local = af::Session::create(g);
  REQUIRE(local.ok());

  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0}, failures{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int s = 0; s < 10; ++s) {
        auto in = af::Tensor::from_vector<float>({float(t), float(s), float(t * s) / 7.0f});
        auto got = remote->run({y}, {{x, in}});
        auto want = local->run({y}, {{x, in}});
        if (!got.ok() || !want.ok()) ++failures;
        else if (!(*got)[0].equals((*want)[0])) ++mismatches;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(failures.load() == 0);
  CHECK(mismatches.load() == 0);

  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{100000}}) {
    auto in = af::Tensor::filled(af::f32, {n}, 0.25);
    auto got = remote->run({y}, {{x, in}});
    REQUIRE_MESSAGE(got.ok(), got.status().to_string());
    CHECK((*got)[0].equals(*local->eval(y, {{x, in}})));
  }
  // 2 MiB of feed against a 1 MiB limit: refused before sending, the connection stays.
  auto big = remote->run({y}, {{x, af::Tensor::filled(af::f32, {1 << 19}, 1.0)}});
  REQUIRE_FALSE(big.ok());
  CHECK(big.status().code() == af::Code::resource_exhausted);
  CHECK(contains(big.status().message(), "max_message_bytes"));
  // A fetch over the limit: the daemon says so instead of sending it.
  auto wide = remote->run({outer}, {{col, af::Tensor::filled(af::f32, {600, 1}, 1.0)}});
  REQUIRE_FALSE(wide.ok());
  CHECK(wide.status().code() == af::Code::resource_exhausted);
  auto small = remote->run({y}, {{x, af::Tensor::from_vector<float>({0})}});
  REQUIRE(small.ok());
  CHECK((*small)[0].equals(af::Tensor::from_vector<float>({0})));
}

TEST_CASE("16 MiB each way through a daemon") {
  REQUIRE(aftnet::daemon_built());
  DaemonProcess d(kToken);
  REQUIRE_MESSAGE(d.started(), d.log());
  aftnet::ScopedEnv env("ACTORFLOW_TOKEN", kToken);
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1}, "x");
  auto y = x + 1.0;
  auto sess = af::Session::create(g, d.target());
  REQUIRE(sess.ok());
  auto got = sess->run({y}, {{x, af::Tensor::filled(af::f32, {4 << 20}, 2.0)}});
  REQUIRE_MESSAGE(got.ok(), got.status().to_string());
  CHECK((*got)[0].equals(af::Tensor::filled(af::f32, {4 << 20}, 3.0)));
}

TEST_CASE("the daemon takes its task from the cluster flags; a bad cluster spec is refused, naming the flag") {
  REQUIRE(aftnet::daemon_built());
  DaemonProcess d(kToken, 0, {"--ps_hosts", "127.0.0.1:1", "--worker_hosts", "127.0.0.1:2", "--job_name", "ps"});
  REQUIRE_MESSAGE(d.started(), d.log());
  aftnet::ScopedEnv env("ACTORFLOW_TOKEN", kToken);
  af::Graph g;
  auto a = af::placeholder(g, af::f32, {-1, -1}, "a");
  auto c = af::matmul(a, a, false, false, "square");
  auto sess = af::Session::create(g, d.target());
  REQUIRE(sess.ok());
  auto r = sess->run({c}, {{a, af::Tensor::filled(af::f32, {2, 3}, 1)}});
  REQUIRE_FALSE(r.ok());
  CHECK(contains(r.status().message(), "/job:ps/task:0"));
  CHECK(contains(r.status().message(), "square"));

  DaemonProcess bad(kToken, 0, {"--ps_hosts", "127.0.0.1:1", "--job_name", "ps", "--task_index", "5"});
  CHECK_FALSE(bad.started());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (bad.exit_code() < 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(bad.exit_code() == 2);
  CHECK(contains(bad.log(), "--task_index 5"));
}
