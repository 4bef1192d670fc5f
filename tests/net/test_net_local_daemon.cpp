// A cluster session runs the partitions of its own process's daemon by direct calls
// (net/src/local_daemons.h), as a worker task does: a daemon in this process
// (/job:worker/task:0) and one child daemon (/job:ps/task:0) on 127.0.0.1. Steps equal
// the local session's; a failure on either side ends the step on the other at once;
// closing the session frees its partitions; a stopped daemon fails the next step naming
// its address; AF_DIAL_OWN_DAEMON=1 dials the own daemon over loopback instead.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/net/daemon.h>

#include <chrono>
#include <cmath>
#include <mutex>
#include <optional>

#include "test_net_daemon_process.h"

namespace af = actorflow;
namespace afn = actorflow::net;
using aftnet::DaemonProcess;
using aftnet::client_connections;

namespace {

const char* kToken = "local-daemon-test-token";

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A daemon in this process whose log lines the test reads.
struct OwnDaemon {
  std::mutex mu;
  std::string lines;
  std::unique_ptr<afn::NodeDaemon> d;
  OwnDaemon() {
    afn::DaemonOptions o;
    o.host = "127.0.0.1";
    o.task = "/job:worker/task:0";
    o.token = kToken;
    o.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mu);
      lines += line + "\n";
    };
    auto started = afn::NodeDaemon::start(o);
    REQUIRE_MESSAGE(started.ok(), started.status().to_string());
    d = std::move(started).value();
  }
  std::string log() {
    std::lock_guard<std::mutex> lock(mu);
    return lines;
  }
  std::string target() const { return "af://127.0.0.1:" + std::to_string(d->port()); }
};

// w (on the ps) times x (fed on the worker), plus a bias on the worker.
struct PsGraph {
  af::Graph g;
  af::Output x, y;
  af::Operation init;
  PsGraph() {
    af::Output w;
    {
      af::DeviceScope s(g, "/job:ps/task:0");
      w = af::variable(g, af::Tensor::from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}), "w");
    }
    af::DeviceScope s(g, "/job:worker/task:0");
    x = af::placeholder(g, af::f32, {-1, 2}, "x");
    y = af::matmul(x, w, false, false, "xw") + 0.5f;
  }
  af::Tensor input(float k) const { return af::Tensor::from_vector(std::vector<float>{k, 1, 2, k}, {2, 2}); }
};

std::string cluster_target(const OwnDaemon& own, const DaemonProcess& ps) {
  return "/job:worker/task:0=" + own.target() + ",/job:ps/task:0=" + ps.target();
}

// A ps daemon (a child process) and a daemon of this process, with the cluster token set
// and AF_DIAL_OWN_DAEMON as given.
struct OwnAndPs {
  DaemonProcess ps{kToken, 0, {"--job_name=ps", "--task_index=0"}};
  aftnet::ScopedEnv env{"ACTORFLOW_TOKEN", kToken};
  aftnet::ScopedEnv dial;
  OwnDaemon own;
  explicit OwnAndPs(const char* dial_value) : dial("AF_DIAL_OWN_DAEMON", dial_value) {
    REQUIRE_MESSAGE(ps.started(), ps.log());
  }
  std::string target() const { return cluster_target(own, ps); }
  // A session of `pg` on both daemons, its variables initialized.
  af::Session session(PsGraph& pg) {
    af::SessionOptions opts;
    opts.step_timeout_ms = 20000;
    auto s = af::Session::create(pg.g, target(), opts);
    REQUIRE_MESSAGE(s.ok(), s.status().to_string());
    af::Session out = std::move(s).value();
    REQUIRE(out.run_init().ok());
    return out;
  }
};

// A reshape on `failing` feeds a tanh on `waiting`: a bad input fails the step at once
// (not at its 30 s deadline) naming the node and task, and the next step runs.
void failure_ends_step(const std::string& target, const std::string& failing, const std::string& waiting) {
  CAPTURE(failing);
  af::Graph g;
  af::Output x, y;
  {
    af::DeviceScope d(g, failing);
    x = af::placeholder(g, af::f32, {-1}, "x");
    y = af::reshape(x, {3}, "must_be_three");
  }
  {
    af::DeviceScope d(g, waiting);
    y = af::tanh(y, "downstream");
  }
  af::SessionOptions opts;
  opts.step_timeout_ms = 30000;
  auto s = af::Session::create(g, target, opts);
  REQUIRE(s.ok());
  auto t0 = std::chrono::steady_clock::now();
  auto fail = s->run({y}, {{x, af::Tensor::from_vector(std::vector<float>{1, 2}, {2})}});
  auto took = std::chrono::steady_clock::now() - t0;
  REQUIRE_FALSE(fail.ok());
  CHECK(contains(fail.status().message(), "must_be_three"));
  CHECK(contains(fail.status().message(), failing));
  CHECK(took < std::chrono::seconds(10));
  auto fine = s->run({y}, {{x, af::Tensor::from_vector(std::vector<float>{1, 2, 3}, {3})}});
  REQUIRE_MESSAGE(fine.ok(), fine.status().to_string());
  CHECK(fine->at(0).to_vector<float>().at(2) == doctest::Approx(std::tanh(3.0f)));
}

}  // namespace

TEST_CASE("the own daemon's partition runs by direct calls; values equal the local session's; close frees it") {
  REQUIRE(aftnet::daemon_built());
  OwnAndPs c("");
  auto& own = c.own;
  PsGraph pg;
  auto local = af::Session::create(pg.g);
  REQUIRE(local.ok());
  REQUIRE(local->run_init().ok());
  {
    std::optional<af::Session> s(c.session(pg));
    for (int i = 0; i < 20; ++i) {
      auto got = s->run({pg.y}, {{pg.x, pg.input(static_cast<float>(i))}});
      REQUIRE_MESSAGE(got.ok(), got.status().to_string());
      auto want = local->run({pg.y}, {{pg.x, pg.input(static_cast<float>(i))}});
      REQUIRE(want.ok());
      CHECK(got->at(0).equals(want->at(0)));
    }
    std::string log = own.log();
    CHECK_MESSAGE(contains(log, "partition /job:worker/task:0/cpu:0 for a session of this process registered"), log);
    // The ps dialed this daemon (or the other way round) for edges; no client connection
    // carried the steps.
    CHECK_MESSAGE(client_connections(log) == 0, log);
  }
  std::string log = own.log();
  CHECK_MESSAGE(contains(log, "of a session of this process"), log);
  CHECK_MESSAGE(contains(log, "freed"), log);
}

TEST_CASE("a failure on either side ends the step on the other at once, naming the node and task") {
  REQUIRE(aftnet::daemon_built());
  OwnAndPs c("");
  // The ps fails upstream of the edge the own partition waits for, then the other way.
  failure_ends_step(c.target(), "/job:ps/task:0", "/job:worker/task:0");
  failure_ends_step(c.target(), "/job:worker/task:0", "/job:ps/task:0");
}

TEST_CASE("a stopped own daemon fails the next step at once, naming its address") {
  REQUIRE(aftnet::daemon_built());
  OwnAndPs c("");
  auto& own = c.own;
  PsGraph pg;
  std::optional<af::Session> s(c.session(pg));
  REQUIRE(s->run({pg.y}, {{pg.x, pg.input(1)}}).ok());
  own.d->stop();
  auto t0 = std::chrono::steady_clock::now();
  auto r = s->run({pg.y}, {{pg.x, pg.input(1)}});
  REQUIRE_FALSE(r.ok());
  INFO(r.status().to_string());
  CHECK(r.status().code() == af::Code::unavailable);
  // The session registers the kind afresh; the stopped daemon's address is what fails.
  CHECK(contains(r.status().message(), "127.0.0.1:" + std::to_string(own.d->port())));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(15));
}

TEST_CASE("AF_DIAL_OWN_DAEMON=1 sends the own partition's steps over a loopback connection") {
  REQUIRE(aftnet::daemon_built());
  OwnAndPs c("1");
  auto& own = c.own;
  PsGraph pg;
  std::optional<af::Session> s(c.session(pg));
  auto got = s->run({pg.y}, {{pg.x, pg.input(2)}});
  REQUIRE_MESSAGE(got.ok(), got.status().to_string());
  // [2 1; 2 2] x [1 2; 3 4] + 0.5
  CHECK(got->at(0).equals(af::Tensor::from_vector(std::vector<float>{5.5f, 8.5f, 8.5f, 12.5f}, {2, 2})));
  std::string log = own.log();
  CHECK_MESSAGE(!contains(log, "for a session of this process"), log);
  CHECK_MESSAGE(contains(log, "partition /job:worker/task:0/cpu:0 for 127.0.0.1:"), log);
  CHECK_MESSAGE(client_connections(log) >= 1, log);
}
