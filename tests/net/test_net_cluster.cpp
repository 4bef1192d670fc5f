// A graph cut over three node daemons (child processes on 127.0.0.1, port 0): the cluster
// session (net/src/cluster_session.h) places nodes by their device strings, registers one
// partition per daemon, and the daemons exchange Edge and Credit frames directly. 50+
// random DAGs with random placement equal the local session bit for bit; errors name the
// node and the task.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/net/daemon.h>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "net_mid_step.h"
#include "test_net_daemon_process.h"
#include "random_dag.h"

namespace af = actorflow;
namespace afn = actorflow::net;
using aftnet::DaemonProcess;

namespace {

const char* kToken = "cluster-test-token";

// The cluster of these tests, with their token.
struct ThreeDaemons : aftnet::ThreeDaemons {
  explicit ThreeDaemons(std::vector<std::string> extra = {}) : aftnet::ThreeDaemons(kToken, std::move(extra)) {}
};

}  // namespace

TEST_CASE("55 random DAGs over 3 daemons equal the local session bit for bit") {
  REQUIRE_MESSAGE(aftnet::daemon_built(), aftnet::daemon_binary() << " is not built (it is built with this test)");
  ThreeDaemons c;
  REQUIRE_MESSAGE(c.started(), c.logs());
  aftnet::ScopedEnv env("ACTORFLOW_TOKEN", kToken);
  const std::vector<std::string> devices = {"", "/job:worker/task:1", "/job:ps/task:0/cpu:0", "/job:worker/task:0"};
  std::mt19937 rng(777);
  int compared = 0;
  for (int gi = 0; gi < 55; ++gi) {
    INFO("graph " << gi);
    aftpart::PlacedDag d;
    aftpart::build_placed_dag(d, rng, devices, 3);
    af::SessionOptions opts;
    opts.step_timeout_ms = 20000;
    opts.edge_capacity = 1 + gi % 3;
    auto remote = af::Session::create(d.g, c.target(), opts);
    REQUIRE_MESSAGE(remote.ok(), remote.status().to_string());
    auto local = af::Session::create(d.g);
    REQUIRE(local.ok());
    std::vector<af::Fetch> fetches(d.fetches.begin(), d.fetches.end());
    for (int step = 0; step < 3; ++step) {
      std::vector<float> v(8);
      for (auto& e : v) e = static_cast<float>(static_cast<int>(rng() % 21) - 10) / 4.0f;
      af::Tensor in = af::Tensor::from_vector(v, {2, 4});
      auto got = remote->run(fetches, {{d.x, in}});
      REQUIRE_MESSAGE(got.ok(), got.status().to_string() << "\n" << c.logs());
      auto want = local->run(fetches, {{d.x, in}});
      REQUIRE(want.ok());
      REQUIRE(got->size() == want->size());
      for (size_t f = 0; f < fetches.size(); ++f) {
        INFO("step " << step << " fetch " << f);
        CHECK((*got)[f].equals((*want)[f]));
        ++compared;
      }
    }
  }
  CHECK(compared >= 165);
  // Every daemon ran partitions, and the edges went between the daemons.
  for (DaemonProcess* d : {&c.d0, &c.d1, &c.d2}) CHECK_MESSAGE(d->log().find("partition /job:") != std::string::npos, d->log());
  CHECK(c.d0.running());
  CHECK(c.d1.running());
  CHECK(c.d2.running());
}

TEST_CASE("cluster errors name the node and the task") {
  REQUIRE(aftnet::daemon_built());
  ThreeDaemons c;
  REQUIRE_MESSAGE(c.started(), c.logs());
  aftnet::ScopedEnv env("ACTORFLOW_TOKEN", kToken);
  af::SessionOptions opts;
  opts.step_timeout_ms = 10000;

  // A kernel error on one daemon: its message names the node and the location.
  af::Graph g;
  af::Output x, bad;
  {
    af::DeviceScope s(g, "/job:worker/task:1");
    x = af::placeholder(g, af::f32, {-1}, "x");
  }
  {
    af::DeviceScope s(g, "/job:ps/task:0");
    bad = af::reshape(af::tanh(x), {3}, "reshape_me");
  }
  auto s = af::Session::create(g, c.target(), opts);
  REQUIRE(s.ok());
  auto ok = s->run({bad}, {{x, af::Tensor::from_vector(std::vector<float>{1, 2, 3}, {3})}});
  REQUIRE_MESSAGE(ok.ok(), ok.status().to_string());
  auto r = s->run({bad}, {{x, af::Tensor::from_vector(std::vector<float>{1, 2}, {2})}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("reshape_me") != std::string::npos);
  CHECK(r.status().message().find("/job:ps/task:0") != std::string::npos);
  // The next step runs again.
  auto again = s->run({bad}, {{x, af::Tensor::from_vector(std::vector<float>{1, 2, 3}, {3})}});
  REQUIRE_MESSAGE(again.ok(), again.status().to_string());
  CHECK(again->at(0).to_vector<float>().at(2) == doctest::Approx(std::tanh(3.0f)));

  // A failure upstream of an edge ends the step on the daemon waiting for that edge at
  // once (the client's CleanupStep), not at the step deadline.
  af::Graph k;
  af::Output kx, kout;
  {
    af::DeviceScope d(k, "/job:worker/task:1");
    kx = af::placeholder(k, af::f32, {-1}, "kx");
  }
  {
    af::DeviceScope d(k, "/job:ps/task:0");
    kout = af::reshape(kx, {3}, "must_be_three");
  }
  {
    af::DeviceScope d(k, "/job:worker/task:0");
    kout = af::tanh(kout, "downstream");
  }
  af::SessionOptions slow = opts;
  slow.step_timeout_ms = 30000;
  auto sk = af::Session::create(k, c.target(), slow);
  REQUIRE(sk.ok());
  auto t0 = std::chrono::steady_clock::now();
  auto fail = sk->run({kout}, {{kx, af::Tensor::from_vector(std::vector<float>{1, 2}, {2})}});
  auto took = std::chrono::steady_clock::now() - t0;
  REQUIRE_FALSE(fail.ok());
  CHECK(fail.status().message().find("must_be_three") != std::string::npos);
  CHECK(fail.status().message().find("/job:ps/task:0") != std::string::npos);
  CHECK(took < std::chrono::seconds(10));
  auto fine = sk->run({kout}, {{kx, af::Tensor::from_vector(std::vector<float>{1, 2, 3}, {3})}});
  REQUIRE_MESSAGE(fine.ok(), fine.status().to_string());

  // A node placed on a task the target does not list.
  af::Graph h;
  af::Output y;
  {
    af::DeviceScope d(h, "/job:worker/task:7");
    y = af::constant(h, 1.0f, "far_away");
  }
  auto sh = af::Session::create(h, c.target(), opts);
  REQUIRE(sh.ok());
  auto e = sh->run({y});
  REQUIRE_FALSE(e.ok());
  CHECK(e.status().message().find("far_away") != std::string::npos);
  CHECK(e.status().message().find("/job:worker/task:7") != std::string::npos);
}

TEST_CASE("variables on a ps daemon persist across kinds of step and a graph that grows") {
  REQUIRE(aftnet::daemon_built());
  ThreeDaemons c;
  REQUIRE_MESSAGE(c.started(), c.logs());
  aftnet::ScopedEnv env("ACTORFLOW_TOKEN", kToken);
  af::Graph g;
  af::Output v, bump, x, y;
  {
    af::DeviceScope d(g, "/job:worker/task:1");
    x = af::placeholder(g, af::f32, {2}, "x");
  }
  {
    af::DeviceScope d(g, "/job:ps/task:0");
    v = af::variable(g, af::Tensor::from_vector(std::vector<float>{1, 2}, {2}), "v");
    bump = af::assign_add(v, x * 2.0, "bump");
  }
  {
    af::DeviceScope d(g, "/job:worker/task:0");
    y = af::tanh(v * 0.25, "read_v");
  }
  af::SessionOptions opts;
  opts.step_timeout_ms = 20000;
  auto remote = af::Session::create(g, c.target(), opts);
  REQUIRE(remote.ok());
  auto local = af::Session::create(g);
  REQUIRE(local.ok());
  // Asked on the ps, answered on the worker: no value travels, and an uninitialized
  // variable is an answer, not an error.
  af::Output missing;
  {
    af::DeviceScope d(g, "/job:worker/task:0");
    missing = af::report_uninitialized_variables(g);
  }
  auto before = remote->run({missing});
  REQUIRE_MESSAGE(before.ok(), before.status().to_string());
  CHECK(before->at(0).to_vector<std::string>() == std::vector<std::string>{"v"});
  auto init = remote->run_init();
  REQUIRE_MESSAGE(init.ok(), init.to_string());
  REQUIRE(local->run_init().ok());
  auto after = remote->run({missing});
  REQUIRE_MESSAGE(after.ok(), after.status().to_string());
  CHECK(after->at(0).num_elements() == 0);
  af::Tensor in = af::Tensor::from_vector(std::vector<float>{0.5f, -3}, {2});
  for (int i = 0; i < 3; ++i) {
    auto rb = remote->run({bump}, {{x, in}});
    REQUIRE_MESSAGE(rb.ok(), rb.status().to_string());
    REQUIRE(local->run({bump}, {{x, in}}).ok());
    auto got = remote->run({y});
    REQUIRE_MESSAGE(got.ok(), got.status().to_string());
    auto want = local->run({y});
    REQUIRE(want.ok());
    CHECK((*got)[0].equals((*want)[0]));
  }
  // The graph grows: the new kind of step still sees the variable's value.
  af::Output z;
  {
    af::DeviceScope d(g, "/job:worker/task:1");
    z = af::identity(v * 1.0, "late_read");
  }
  auto got = remote->run({z});
  REQUIRE_MESSAGE(got.ok(), got.status().to_string());
  CHECK(got->at(0).to_vector<float>() == std::vector<float>{1 + 3 * 1.0f, 2 + 3 * -6.0f});
  // Every kind of step, and the one registered again after the graph grew, went over one
  // connection from this session to each daemon.
  for (auto* d : {&c.d0, &c.d1, &c.d2}) CHECK_MESSAGE(aftnet::client_connections(d->log()) == 1, d->log());
}

TEST_CASE("steps from 4 threads pipeline over 3 daemons with one credit per edge") {
  REQUIRE(aftnet::daemon_built());
  ThreeDaemons c;
  REQUIRE_MESSAGE(c.started(), c.logs());
  aftnet::ScopedEnv env("ACTORFLOW_TOKEN", kToken);
  const std::vector<std::string> devices = {"/job:worker/task:1", "/job:ps/task:0", "/job:worker/task:0"};
  std::mt19937 rng(31);
  aftpart::PlacedDag d;
  aftpart::build_placed_dag(d, rng, devices, 4);
  af::SessionOptions opts;
  opts.step_timeout_ms = 20000;
  opts.edge_capacity = 1;
  auto remote = af::Session::create(d.g, c.target(), opts);
  REQUIRE(remote.ok());
  auto local = af::Session::create(d.g);
  REQUIRE(local.ok());
  std::vector<af::Fetch> fetches(d.fetches.begin(), d.fetches.end());
  std::atomic<int> equal{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        std::vector<float> v(8, static_cast<float>(t * 100 + i) / 8.0f);
        af::Tensor in = af::Tensor::from_vector(v, {2, 4});
        auto got = remote->run(fetches, {{d.x, in}});
        auto want = local->run(fetches, {{d.x, in}});
        if (!got.ok() || !want.ok()) {
          ++failed;
          continue;
        }
        bool same = true;
        for (size_t f = 0; f < fetches.size(); ++f) same = same && (*got)[f].equals((*want)[f]);
        equal += same ? 1 : 0;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(failed == 0);
  CHECK(equal == 100);
  // Daemons holding partitions and peer connections shut down cleanly on SIGTERM.
  for (DaemonProcess* d : {&c.d0, &c.d1, &c.d2}) CHECK_MESSAGE(d->terminate(std::chrono::seconds(40)) == 0, d->log());
}

TEST_CASE("a daemon killed mid-session fails the next step within its deadline, naming the task") {
  REQUIRE(aftnet::daemon_built());
  ThreeDaemons c;
  REQUIRE_MESSAGE(c.started(), c.logs());
  aftnet::ScopedEnv env("ACTORFLOW_TOKEN", kToken);
  af::Graph g;
  af::Output x, y;
  {
    af::DeviceScope d(g, "/job:worker/task:0");
    x = af::placeholder(g, af::f32, {2}, "x");
  }
  {
    af::DeviceScope d(g, "/job:ps/task:0");
    y = af::tanh(x, "on_ps");
  }
  {
    af::DeviceScope d(g, "/job:worker/task:1");
    y = af::identity(y * 2.0, "back_on_worker");
  }
  af::SessionOptions opts;
  opts.step_timeout_ms = 8000;
  auto s = af::Session::create(g, c.target(), opts);
  REQUIRE(s.ok());
  af::Tensor in = af::Tensor::from_vector(std::vector<float>{0.5f, -1}, {2});
  auto ok = s->run({y}, {{x, in}});
  REQUIRE_MESSAGE(ok.ok(), ok.status().to_string());
  c.d2.kill9();
  auto t0 = std::chrono::steady_clock::now();
  auto r = s->run({y}, {{x, in}});
  auto took = std::chrono::steady_clock::now() - t0;
  REQUIRE_FALSE(r.ok());
  CHECK(took < std::chrono::seconds(9));
  INFO(r.status().to_string());
  CHECK((r.status().message().find("/job:ps/task:0") != std::string::npos ||
         r.status().message().find(c.d2.address()) != std::string::npos));
  // The surviving daemons still serve: a graph that avoids the dead task runs.
  af::Graph h;
  af::Output a;
  {
    af::DeviceScope d(h, "/job:worker/task:1");
    a = af::constant(h, 3.0f, "a") * 2.0;
  }
  auto sh = af::Session::create(h, c.target(), opts);
  REQUIRE(sh.ok());
  auto fine = sh->run({a});
  REQUIRE_MESSAGE(fine.ok(), fine.status().to_string());
  CHECK(fine->at(0).to_vector<float>().at(0) == 6.0f);
}

TEST_CASE("a client killed mid-step: its daemons end its step at once and free its partitions") {
  REQUIRE(aftnet::daemon_built());
  REQUIRE_MESSAGE(::access(AF_NET_CLIENT_CHILD, X_OK) == 0, AF_NET_CLIENT_CHILD << " is not built (it is built with this test)");
  // One worker thread on the waiting daemon: freeing the client's partition must not queue
  // behind the very step it has to end.
  aftnet::NearFar c(kToken, {"--worker_threads", "1"});
  auto& near = c.near;
  auto& far = c.far;
  auto logs = [&] { return c.logs(); };
  REQUIRE_MESSAGE(c.started(), logs());
  const std::string target = c.target();
  auto env = aft::environment_without({"ACTORFLOW_TOKEN"});
  env.push_back(std::string("ACTORFLOW_TOKEN=") + kToken);
  // Ready once its chain takes a second a step; then it runs one more step, with no deadline.
  aft::ChildProcess client("af_net_client", {AF_NET_CLIENT_CHILD, "--target", target}, env, true,
                           std::chrono::seconds(180));
  REQUIRE_MESSAGE(client.started(), "client:\n" << client.log() << logs());
  const size_t near_before = near.log().size(), far_before = far.log().size();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  REQUIRE_MESSAGE(client.running(), "the client's step ended before it was killed:\n" << client.log());
  client.kill9();

  // Without a deadline the near partition's step would wait for the far chain forever:
  // the client's going must end it, and free both partitions.
  auto since = [](DaemonProcess& d, size_t from) {
    std::string l = d.log();
    return l.size() > from ? l.substr(from) : std::string();
  };
  auto done = [&] {
    std::string n = since(near, near_before), f = since(far, far_before);
    return n.find("went away") != std::string::npos && n.find("freed 1 graph(s)") != std::string::npos &&
           f.find("freed 1 graph(s)") != std::string::npos;
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::string near_after = since(near, near_before), far_after = since(far, far_before);
  // "partition step N for ... failed: Cancelled: on /job:worker/task:0/cpu:0 (...): _Recv ...:
  // the client of this partition went away"
  CHECK_MESSAGE(near_after.find("failed: Cancelled: ") != std::string::npos, logs());
  CHECK_MESSAGE(near_after.find("the client of this partition went away") != std::string::npos, logs());
  CHECK_MESSAGE(near_after.find("freed 1 graph(s)") != std::string::npos, logs());
  CHECK_MESSAGE(far_after.find("freed 1 graph(s)") != std::string::npos, logs());

  // Both go on serving: a new client's step across them runs (the shortest chain).
  aftnet::ScopedEnv token("ACTORFLOW_TOKEN", kToken);
  af::SessionOptions opts;
  opts.step_timeout_ms = 20000;
  auto fresh = aftnet::chain_step(target, opts, std::chrono::milliseconds(0));
  REQUIRE_MESSAGE(fresh.ok(), fresh.status().to_string() << "\n" << logs());
  auto out = fresh->run();
  REQUIRE_MESSAGE(out.ok(), out.status().to_string() << "\n" << logs());
  CHECK(out->at(0).to_vector<float>().at(0) == aftnet::ChainStep::kSum);
  CHECK_MESSAGE(near.terminate(std::chrono::seconds(40)) == 0, near.log());
  CHECK_MESSAGE(far.terminate(std::chrono::seconds(40)) == 0, far.log());
}

TEST_CASE("a daemon killed mid-step fails that step at once, naming it, and the daemon left frees its part") {
  REQUIRE(aftnet::daemon_built());
  aftnet::NearFar c(kToken, {"--worker_threads", "1"});
  REQUIRE_MESSAGE(c.started(), c.logs());
  aftnet::ScopedEnv token("ACTORFLOW_TOKEN", kToken);
  af::SessionOptions opts;
  opts.step_timeout_ms = 120000;  // far beyond this test's patience: the failure must come sooner
  auto chain = aftnet::chain_step(c.target(), opts, std::chrono::seconds(1));
  REQUIRE_MESSAGE(chain.ok(), chain.status().to_string() << "\n" << c.logs());
  auto& near = c.near;
  auto& far = c.far;
  aftnet::lose_far_mid_step(near, far, [&] { far.kill9(); }, std::chrono::seconds(30), *chain);
  CHECK_MESSAGE(near.terminate(std::chrono::seconds(40)) == 0, near.log());
}

TEST_CASE("a daemon stopped mid-step (SIGSTOP) fails that step by the peer timeout; running again, it takes steps again") {
  REQUIRE(aftnet::daemon_built());
  // Every process of the cluster on the same short beat: a silent peer is dropped after 1.5 s.
  const std::vector<std::string> beat = {"--heartbeat_ms", "200", "--peer_timeout_ms", "1500"};
  std::vector<std::string> near_flags = beat;
  near_flags.insert(near_flags.end(), {"--worker_threads", "1"});
  aftnet::NearFar c(kToken, near_flags, beat);
  REQUIRE_MESSAGE(c.started(), c.logs());
  auto& near = c.near;
  auto& far = c.far;
  afn::set_client_heartbeat(200, 1500);
  struct Restore {
    ~Restore() { afn::set_client_heartbeat(1000, 10000); }  // the documented defaults
  } restore;
  aftnet::ScopedEnv token("ACTORFLOW_TOKEN", kToken);
  af::SessionOptions opts;
  opts.step_timeout_ms = 120000;
  auto chain = aftnet::chain_step(c.target(), opts, std::chrono::seconds(1));
  REQUIRE_MESSAGE(chain.ok(), chain.status().to_string() << "\n" << c.logs());
  struct Resume {
    pid_t pid;
    ~Resume() { ::kill(pid, SIGCONT); }  // never leave it stopped, even when a check fails
  } resume{far.pid()};
  aftnet::lose_far_mid_step(near, far, [&] { ::kill(far.pid(), SIGSTOP); }, std::chrono::seconds(20), *chain);
  // Running again, the far daemon finds its connections gone and takes new ones: the same
  // session registers its partitions afresh and its step runs.
  ::kill(far.pid(), SIGCONT);
  auto again = chain->run();
  REQUIRE_MESSAGE(again.ok(), again.status().to_string() << "\n" << near.log() << far.log());
  CHECK(again->at(0).to_vector<float>().at(0) == aftnet::ChainStep::kSum);
  CHECK_MESSAGE(near.terminate(std::chrono::seconds(40)) == 0, near.log());
  CHECK_MESSAGE(far.terminate(std::chrono::seconds(40)) == 0, far.log());
}

TEST_CASE("a daemon restarted on its port after kill -9: the same session's next step registers afresh and runs") {
  REQUIRE(aftnet::daemon_built());
  DaemonProcess near(kToken, 0);
  auto far = std::make_unique<DaemonProcess>(kToken, 0, std::vector<std::string>{"--job_name", "worker", "--task_index", "1"});
  REQUIRE_MESSAGE(near.started(), near.log());
  REQUIRE_MESSAGE(far->started(), far->log());
  const int far_port = far->port();
  aftnet::ScopedEnv token("ACTORFLOW_TOKEN", kToken);
  af::SessionOptions opts;
  opts.step_timeout_ms = 20000;
  auto chain = aftnet::chain_step("/job:worker/task:0=" + near.target() + ",/job:worker/task:1=" + far->target(), opts,
                                  std::chrono::milliseconds(0));
  REQUIRE_MESSAGE(chain.ok(), chain.status().to_string() << "\n" << near.log() << far->log());
  far->kill9();
  auto lost = chain->run();
  REQUIRE_FALSE(lost.ok());
  CHECK_MESSAGE(lost.status().message().find("/job:worker/task:1") != std::string::npos, lost.status().to_string());
  far = std::make_unique<DaemonProcess>(kToken, far_port, std::vector<std::string>{"--job_name", "worker", "--task_index", "1"});
  REQUIRE_MESSAGE(far->started(), far->log());
  // A new incarnation behind the old address: the session registers its partition there
  // again, and the near daemon dials it again.
  auto back = chain->run();
  REQUIRE_MESSAGE(back.ok(), back.status().to_string() << "\n" << near.log() << far->log());
  CHECK(back->at(0).to_vector<float>().at(0) == aftnet::ChainStep::kSum);
  auto again = chain->run();
  REQUIRE_MESSAGE(again.ok(), again.status().to_string());
  // Whichever has the lower address dials: the near one again, or the new far one afresh.
  const bool redialed = near.log().find("is back: connected again") != std::string::npos ||
                        far->log().find("peer daemon /job:worker/task:0") != std::string::npos;
  CHECK_MESSAGE(redialed, near.log() << far->log());
}

TEST_CASE("8 threads mid-step when a daemon is killed: every step fails by the failure, none by its deadline") {
  REQUIRE(aftnet::daemon_built());
  aftnet::NearFar c(kToken);
  REQUIRE_MESSAGE(c.started(), c.logs());
  auto& near = c.near;
  auto& far = c.far;
  aftnet::ScopedEnv token("ACTORFLOW_TOKEN", kToken);
  af::SessionOptions opts;
  opts.step_timeout_ms = 120000;
  auto chain = aftnet::chain_step(c.target(), opts, std::chrono::milliseconds(300));
  REQUIRE_MESSAGE(chain.ok(), chain.status().to_string() << "\n" << c.logs());
  constexpr int kThreads = 8;
  std::atomic<int> failed{0}, ran{0};
  std::mutex mu;
  std::string first_error;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&] {
      // Steps until one fails: the kill lands while every thread has one in flight.
      for (int k = 0; k < 1000; ++k) {
        auto r = chain->run();
        if (r.ok()) {
          ++ran;
          continue;
        }
        ++failed;
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.empty()) first_error = r.status().to_string();
        return;
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  far.kill9();
  const auto killed = std::chrono::steady_clock::now();
  for (auto& t : threads) t.join();  // bounded by the steps' deadline at worst
  const auto took = std::chrono::steady_clock::now() - killed;
  INFO(first_error);
  CHECK(failed == kThreads);
  CHECK(took < std::chrono::seconds(30));
  CHECK(first_error.find("/job:worker/task:1") != std::string::npos);
  MESSAGE(ran.load() << " steps ran before the kill, in " << std::chrono::duration<double>(killed - t0).count() << " s");
  // The near daemon serves a new session.
  af::Graph h;
  auto a = af::constant(h, 3.0f, "a") * 2.0;
  auto sh = af::Session::create(h, near.target(), opts);
  REQUIRE_MESSAGE(sh.ok(), sh.status().to_string());
  auto fine = sh->run({a});
  REQUIRE_MESSAGE(fine.ok(), fine.status().to_string());
  CHECK_MESSAGE(near.terminate(std::chrono::seconds(40)) == 0, near.log());
}

TEST_CASE("steps that time out mid-way leave no held credit or edge behind: the next steps of the kind run") {
  REQUIRE(aftnet::daemon_built());
  aftnet::NearFar c(kToken);
  REQUIRE_MESSAGE(c.started(), c.logs());
  aftnet::ScopedEnv token("ACTORFLOW_TOKEN", kToken);
  af::SessionOptions opts;
  opts.step_timeout_ms = 60000;
  opts.edge_capacity = 1;  // one credit per edge: a credit kept by an aborted step would stall the next
  auto chain = aftnet::chain_step(c.target(), opts, std::chrono::milliseconds(400));
  REQUIRE_MESSAGE(chain.ok(), chain.status().to_string() << "\n" << c.logs());
  af::RunOptions hasty;
  hasty.timeout_ms = 50;
  for (int i = 0; i < 3; ++i) {
    auto late = chain->run(hasty);
    REQUIRE_FALSE(late.ok());
    CHECK_MESSAGE(late.status().code() == af::Code::deadline_exceeded, late.status().to_string());
  }
  for (int i = 0; i < 3; ++i) {
    auto r = chain->run();
    REQUIRE_MESSAGE(r.ok(), r.status().to_string() << "\n" << c.logs());
    CHECK(r->at(0).to_vector<float>().at(0) == aftnet::ChainStep::kSum);
  }
}

TEST_CASE("a named container's variables outlive every session that used it, as a TF server's containers do") {
  REQUIRE(aftnet::daemon_built());
  DaemonProcess worker(kToken, 0);
  DaemonProcess ps(kToken, 0, {"--job_name", "ps", "--task_index", "0"});
  REQUIRE_MESSAGE(worker.started(), worker.log());
  REQUIRE_MESSAGE(ps.started(), ps.log());
  aftnet::ScopedEnv token("ACTORFLOW_TOKEN", kToken);
  const std::string target = "/job:worker/task:0=" + worker.target() + ",/job:ps/task:0=" + ps.target();
  // The variable and its update on the ps; the rest on the first task listed, worker 0.
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {2}, "x");
  af::Output v, bump;
  {
    af::DeviceScope d(g, "/job:ps/task:0");
    v = af::variable(g, af::Tensor::from_vector(std::vector<float>{1, 2}, {2}), "v");
    bump = af::assign_add(v, x, "bump");
  }
  auto y = v * 1.0;
  // The end-of-training marks of two workers, on the ps beside the variable.
  af::train::WorkerTable table;
  table.device = "/job:ps/task:0/cpu:0";
  table.num_workers = 2;
  af::Operation worker1_done = af::train::worker_done(g, table, 1);
  af::Operation chief_done = af::train::worker_done(g, table, 0);
  af::Output all_done = af::train::wait_workers_done(g, table, 300);
  auto session = [&](const std::string& container) {
    af::SessionOptions opts;
    opts.step_timeout_ms = 20000;
    opts.shared_container = container;
    auto s = af::Session::create(g, target, opts);
    REQUIRE_MESSAGE(s.ok(), s.status().to_string());
    return std::move(s).value();
  };
  {
    // Every connection of this session closes at the end of the block, as when a ps
    // hangs past the peer timeout or a link is cut: no session holds the container then.
    af::Session first = session("model");
    REQUIRE(first.run_init().ok());
    auto bumped = first.run({bump}, {{x, af::Tensor::from_vector(std::vector<float>{10, 20}, {2})}});
    REQUIRE_MESSAGE(bumped.ok(), bumped.status().to_string());
    REQUIRE(first.run({}, {}, {worker1_done}).ok());
  }
  af::Session later = session("model");
  auto kept = later.run({y});
  REQUIRE_MESSAGE(kept.ok(), kept.status().to_string() << "\n" << ps.log());
  CHECK(kept->at(0).to_vector<float>() == std::vector<float>{11, 22});
  // So does the coordination state: a worker that ended its training and left before a
  // restarted chief came back still counts as done (the chief once waited for it forever).
  REQUIRE(later.run({}, {}, {chief_done}).ok());
  auto done = later.run({all_done});
  REQUIRE_MESSAGE(done.ok(), done.status().to_string());
  CHECK(done->at(0).item<int64_t>() == 2);
  // Another container, or a session's own variables, start uninitialized.
  for (const char* other : {"another", ""}) {
    INFO("container '" << other << "'");
    af::Session s = session(other);
    auto fresh = s.run({y});
    REQUIRE_FALSE(fresh.ok());
    CHECK(fresh.status().code() == af::Code::failed_precondition);
  }
}

TEST_CASE("a partitioned embedding over two ps daemons: a shard on each, looked up and trained across them") {
  REQUIRE(aftnet::daemon_built());
  DaemonProcess worker(kToken, 0);
  DaemonProcess ps0(kToken, 0, {"--job_name", "ps", "--task_index", "0"});
  DaemonProcess ps1(kToken, 0, {"--job_name", "ps", "--task_index", "1"});
  REQUIRE_MESSAGE(worker.started(), worker.log());
  REQUIRE_MESSAGE(ps0.started(), ps0.log());
  REQUIRE_MESSAGE(ps1.started(), ps1.log());
  aftnet::ScopedEnv token("ACTORFLOW_TOKEN", kToken);
  const std::string target = "/job:worker/task:0=" + worker.target() + ",/job:ps/task:0=" + ps0.target() +
                             ",/job:ps/task:1=" + ps1.target();
  std::vector<float> init(7 * 2);
  for (size_t i = 0; i < init.size(); ++i) init[i] = static_cast<float>(i);
  af::Graph g;
  // One setter for the whole model: it remembers where the shards went, so their updates
  // run there.
  std::optional<af::DeviceScope> placement(std::in_place, g, af::train::replica_device_setter(2, "/job:worker/task:0"));
  af::PartitionedVariable emb = af::get_variable(
      g, "emb", {7, 2}, af::constant_initializer(af::Tensor::from_vector(init, {7, 2})), af::fixed_size_partitioner(2));
  af::Output ids = af::placeholder(g, af::i64, {-1}, "ids");
  af::Output rows = af::embedding_lookup(emb, ids, "div");
  af::Operation train = af::optim::GradientDescent(0.5).minimize(af::reduce_sum(rows));
  placement.reset();
  REQUIRE(emb.parts()[0].node().device == "/job:ps/task:0/cpu:0");
  REQUIRE(emb.parts()[1].node().device == "/job:ps/task:1/cpu:0");
  af::SessionOptions opts;
  opts.step_timeout_ms = 20000;
  auto remote = af::Session::create(g, target, opts);
  REQUIRE_MESSAGE(remote.ok(), remote.status().to_string());
  auto local = af::Session::create(g);
  REQUIRE(local.ok());
  REQUIRE(remote->run_init().ok());
  REQUIRE(local->run_init().ok());
  // "div" over shards of 4 and 3 rows: ids 0-3 on ps 0, 4-6 on ps 1.
  const af::FeedDict feeds = {{ids, af::Tensor::from_vector<int64_t>({6, 1, 4, 1}, {4})}};
  auto got = remote->run({rows}, feeds);
  REQUIRE_MESSAGE(got.ok(), got.status().to_string());
  CHECK(got->at(0).to_vector<float>() == std::vector<float>{12, 13, 2, 3, 8, 9, 2, 3});
  for (int step = 0; step < 2; ++step) {
    auto r = remote->run({}, feeds, {train});
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    REQUIRE(local->run({}, feeds, {train}).ok());
  }
  auto shards = remote->run({emb.parts()[0], emb.parts()[1]});
  REQUIRE_MESSAGE(shards.ok(), shards.status().to_string());
  auto want = local->run({emb.parts()[0], emb.parts()[1]});
  REQUIRE(want.ok());
  CHECK(shards->at(0).equals(want->at(0)));
  CHECK(shards->at(1).equals(want->at(1)));
  // Id 1 was looked up twice a step: two steps of 0.5 took 2 off it; ids 4 and 6 lost 1.
  CHECK(shards->at(0).to_vector<float>() == std::vector<float>{0, 1, 0, 1, 4, 5, 6, 7});
  CHECK(shards->at(1).to_vector<float>() == std::vector<float>{7, 8, 10, 11, 11, 12});
}
