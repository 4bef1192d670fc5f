// The remote step's fast paths (remote_step_latency), against an in-process
// NodeDaemon on 127.0.0.1 (--insecure): a step of cheap kernels only runs on the daemon's
// io thread (it passes a worker pool busy with a long step; its kernel errors still name
// the node and the daemon); an idle DaemonClient's caller writes its RunStep and reads its
// StepDone itself (right values; a deadline still ends a slow step; heartbeats keep a long
// step alive; a second caller meanwhile, and a registration's answer read by the driving
// caller, reach their waiters). The daemon runs in this process: no actorflow-node needed.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/net/daemon.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "../../net/src/connection_client.h"

namespace af = actorflow;
namespace net = actorflow::net;
using Clock = std::chrono::steady_clock;

namespace {

// These cases test the wire: sessions on this process's daemon dial it, as another
// process's would, instead of calling it directly.
// Set when the first case starts, not when the program loads: the other files of this
// test binary keep the direct path. Never unset: setenv while other threads read the
// environment is a race.
struct DialOwnDaemon {
  DialOwnDaemon() {
    static const bool set = setenv("AF_DIAL_OWN_DAEMON", "1", 1) == 0;
    (void)set;
  }
};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::unique_ptr<net::NodeDaemon> start_daemon(int worker_threads = 8, int heartbeat_ms = 1000, int idle_ms = 15000) {
  net::DaemonOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.insecure = true;
  o.worker_threads = worker_threads;
  o.heartbeat_ms = heartbeat_ms;
  o.idle_timeout_ms = idle_ms;
  o.log = [](const std::string&) {};
  auto d = net::NodeDaemon::start(o);
  REQUIRE_MESSAGE(d.ok(), d.status().to_string());
  return std::move(d).value();
}

std::string target(const net::NodeDaemon& d) { return "af://127.0.0.1:" + std::to_string(d.port()); }

// A chain of 256x256 matmuls: not cheap, so it runs on a worker (and on the actors).
struct SlowGraph {
  af::Graph g;
  af::Output x, y;
  explicit SlowGraph(int depth) {
    x = af::placeholder(g, af::f32, {256, 256}, "x");
    y = x;
    for (int i = 0; i < depth; ++i) y = af::matmul(y, x) * (1.0 / 128);  // stays 0.5
  }
  af::Tensor input() const { return af::Tensor::filled(af::f32, {256, 256}, 0.5); }
};

// Deeper chains until one step takes at least `at_least` here.
std::unique_ptr<SlowGraph> slow_graph(std::chrono::milliseconds at_least) {
  for (int depth = 50;; depth *= 2) {
    auto sg = std::make_unique<SlowGraph>(depth);
    auto sess = af::Session::create(sg->g);
    REQUIRE(sess.ok());
    auto t0 = Clock::now();
    REQUIRE(sess->run({sg->y}, {{sg->x, sg->input()}}).ok());
    if (Clock::now() - t0 >= at_least || depth >= 12800) return sg;
  }
}

// The whole graph as one partition on the daemon at `port`, as a session on
// af://127.0.0.1:port registers it.
af::Result<uint64_t> register_whole(net::DaemonClient& c, const af::Graph& g, uint16_t port, Clock::time_point deadline) {
  static std::atomic<uint64_t> next_session{1};
  net::RegisterGraphMsg m;
  m.graph_def = g.serialize();
  m.location = "/job:worker/task:0/cpu:0";
  m.session = next_session++;
  m.peers = {{m.location, "127.0.0.1:" + std::to_string(port)}};
  return c.register_message(std::move(m), deadline);
}

af::TensorMessage feed(const std::string& name, af::Tensor t) {
  af::TensorMessage tm;
  tm.producer = name;
  tm.tensor = std::move(t);
  return tm;
}

}  // namespace

TEST_CASE_FIXTURE(DialOwnDaemon, "steps of cheap kernels run on the daemon's io thread: right values, past a worker pool busy with a long step") {
  auto d = start_daemon(/*worker_threads=*/1);
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {3}, "x");
  auto y = af::relu(x * 2.0f - 1.0f);
  auto sess = af::Session::create(g, target(*d));
  REQUIRE_MESSAGE(sess.ok(), sess.status().to_string());
  // The first step of a kind runs on the worker; the next ones on the io thread.
  for (int i = 0; i < 200; ++i) {
    float v = static_cast<float>(i % 7) - 3.0f;
    auto out = sess->run({y}, {{x, af::Tensor::from_vector<float>({v, 0.25f, -v}, {3})}});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    auto r = (*out)[0].to_vector<float>();
    CHECK(r[0] == std::max(0.0f, 2 * v - 1));
    CHECK(r[1] == 0.0f);
    CHECK(r[2] == std::max(0.0f, -2 * v - 1));
  }
  // The daemon's only worker now runs a long step for another client.
  auto sg = slow_graph(std::chrono::milliseconds(300));
  auto slow = af::Session::create(sg->g, target(*d));
  REQUIRE(slow.ok());
  std::atomic<bool> slow_done{false};
  auto slow_run = std::async(std::launch::async, [&] {
    auto r = slow->run({sg->y}, {{sg->x, sg->input()}});
    slow_done = true;
    return r.status();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  int during = 0;
  for (int i = 0; i < 50 && !slow_done; ++i) {
    auto out = sess->run({y}, {{x, af::Tensor::from_vector<float>({1.0f, 2.0f, 3.0f}, {3})}});
    REQUIRE_MESSAGE(out.ok(), out.status().to_string());
    CHECK((*out)[0].to_vector<float>() == std::vector<float>{1.0f, 3.0f, 5.0f});
    if (!slow_done) ++during;
  }
  af::Status s = slow_run.get();
  CHECK_MESSAGE(s.ok(), s.to_string());
  // Had they queued behind the long step on the one worker, none would have finished first.
  CHECK(during >= 10);
}

TEST_CASE_FIXTURE(DialOwnDaemon, "a kernel error in a step run on the io thread names the node and the daemon; the next step works") {
  auto d = start_daemon();
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {-1}, "x");
  auto r = af::reshape(x, {2, 3}, "shape_it");
  auto y = r + 1.0f;
  auto sess = af::Session::create(g, target(*d));
  REQUIRE(sess.ok());
  auto six = af::Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {6});
  for (int i = 0; i < 3; ++i) REQUIRE(sess->run({y}, {{x, six}}).ok());
  auto bad = sess->run({y}, {{x, af::Tensor::from_vector<float>({0, 1, 2, 3, 4}, {5})}});
  REQUIRE_FALSE(bad.ok());
  CHECK_MESSAGE(contains(bad.status().message(), "shape_it"), bad.status().to_string());
  CHECK_MESSAGE(contains(bad.status().message(), "/job:worker/task:0"), bad.status().to_string());
  auto again = sess->run({y}, {{x, six}});
  REQUIRE_MESSAGE(again.ok(), again.status().to_string());
  CHECK((*again)[0].to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
}

TEST_CASE_FIXTURE(DialOwnDaemon, "a caller driving an idle connection: a deadline ends a slow step, heartbeats keep a long one alive") {
  // Both ends beat every 50 ms and drop a peer silent for 800 ms, and a step lasts 1.5 s:
  // a caller that waits on its socket must still send the client's heartbeats. (800 ms,
  // not less: under ASan, beside other tests on 2 cores, a thread may wait a few hundred
  // ms for a core, and 400 ms once failed the next step so.)
  net::set_client_heartbeat(50, 800);
  struct Restore {
    ~Restore() { net::set_client_heartbeat(1000, 10000); }  // the documented defaults
  } restore;
  auto d = start_daemon(8, 50, 800);
  auto sg = slow_graph(std::chrono::milliseconds(1500));
  auto sess = af::Session::create(sg->g, target(*d));
  REQUIRE(sess.ok());
  auto long_step = sess->run({sg->y}, {{sg->x, sg->input()}});
  CHECK_MESSAGE(long_step.ok(), long_step.status().to_string());
  af::RunOptions quick;
  quick.timeout_ms = 100;
  auto t0 = Clock::now();
  auto late = sess->run(quick, {sg->y}, {{sg->x, sg->input()}});
  auto took = Clock::now() - t0;
  REQUIRE_FALSE(late.ok());
  CHECK(late.status().code() == af::Code::deadline_exceeded);
  CHECK(took < std::chrono::milliseconds(1000));
  // The connection is still good for the next step.
  auto next = sess->run({sg->y}, {{sg->x, sg->input()}});
  CHECK_MESSAGE(next.ok(), next.status().to_string());
}

TEST_CASE_FIXTURE(DialOwnDaemon, "while one caller drives the connection, a second caller's step and a registration are answered") {
  auto d = start_daemon();
  auto deadline = Clock::now() + std::chrono::seconds(60);
  auto c = net::DaemonClient::connect("127.0.0.1", d->port(), "", target(*d), deadline);
  REQUIRE_MESSAGE(c.ok(), c.status().to_string());
  auto& client = **c;
  auto sg = slow_graph(std::chrono::milliseconds(600));
  auto h_slow = register_whole(client, sg->g, d->port(), deadline);
  REQUIRE(h_slow.ok());
  af::Graph cheap;
  auto x = af::placeholder(cheap, af::f32, {}, "x");
  auto y = x + 1.0f;
  // Thread 1: a long step on the fast path (nothing else is outstanding).
  net::RunStepMsg m1;
  m1.handle = *h_slow;
  m1.step_id = 1;
  m1.feeds.emplace_back(sg->x.name(), feed(sg->x.name(), sg->input()));
  m1.fetches.push_back(sg->y.name());
  std::atomic<bool> first_done{false};
  auto first = std::async(std::launch::async, [&] {
    auto r = client.run_step(std::move(m1), deadline);
    first_done = true;
    return r;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // Thread 2 (this one), meanwhile: its frames leave through the driving caller's loop
  // (woken by the eventfd), and their answers, read by that caller, reach this thread.
  auto h_cheap = register_whole(client, cheap, d->port(), deadline);
  REQUIRE_MESSAGE(h_cheap.ok(), h_cheap.status().to_string());
  for (uint64_t step = 2; step < 12; ++step) {
    net::RunStepMsg m;
    m.handle = *h_cheap;
    m.step_id = step;
    m.feeds.emplace_back(x.name(), feed(x.name(), af::Tensor::scalar(static_cast<float>(step))));
    m.fetches.push_back(y.name());
    auto r = client.run_step(std::move(m), deadline);
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    REQUIRE_MESSAGE(r->status.ok(), r->status.to_string());
    REQUIRE(r->fetched.size() == 1);
    CHECK(r->fetched[0].tensor.item<float>() == static_cast<float>(step) + 1);
  }
  bool overlapped = !first_done;
  auto r1 = first.get();
  REQUIRE_MESSAGE(r1.ok(), r1.status().to_string());
  CHECK_MESSAGE(r1->status.ok(), r1->status.to_string());
  CHECK(r1->fetched.size() == 1);
  // The second caller did not wait for the first one's step.
  CHECK(overlapped);
  // Idle again: the next step takes the fast path again, and is answered.
  net::RunStepMsg m;
  m.handle = *h_cheap;
  m.step_id = 100;
  m.feeds.emplace_back(x.name(), feed(x.name(), af::Tensor::scalar(41.0f)));
  m.fetches.push_back(y.name());
  auto r = client.run_step(std::move(m), deadline);
  REQUIRE(r.ok());
  CHECK(r->fetched.at(0).tensor.item<float>() == 42.0f);
}

TEST_CASE_FIXTURE(DialOwnDaemon, "a step on the fast path fails, naming the daemon, when the daemon goes away") {
  auto d = start_daemon();
  auto deadline = Clock::now() + std::chrono::seconds(60);
  auto c = net::DaemonClient::connect("127.0.0.1", d->port(), "", target(*d), deadline);
  REQUIRE(c.ok());
  auto sg = slow_graph(std::chrono::milliseconds(500));
  auto h = register_whole(**c, sg->g, d->port(), deadline);
  REQUIRE(h.ok());
  net::RunStepMsg m;
  m.handle = *h;
  m.step_id = 1;
  m.feeds.emplace_back(sg->x.name(), feed(sg->x.name(), sg->input()));
  m.fetches.push_back(sg->y.name());
  auto stopper = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    d.reset();  // drains the step in flight, then closes the connection
  });
  auto r = (*c)->run_step(std::move(m), deadline);
  stopper.get();
  // Drained: either the step's answer came first, or the closed connection is reported.
  if (!r.ok()) CHECK_MESSAGE(contains(r.status().message(), "127.0.0.1"), r.status().to_string());
  net::RunStepMsg again;
  again.handle = *h;
  again.step_id = 2;
  auto t0 = Clock::now();
  auto r2 = (*c)->run_step(std::move(again), Clock::now() + std::chrono::seconds(5));
  REQUIRE_FALSE(r2.ok());
  CHECK(Clock::now() - t0 < std::chrono::seconds(5));
  CHECK_MESSAGE(contains(r2.status().message(), "127.0.0.1"), r2.status().to_string());
}
