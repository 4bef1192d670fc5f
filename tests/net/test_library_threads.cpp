// The threads the library starts are named af-... and run under SCHED_BATCH, in the
// calling process (its connection's thread) and in a node daemon (its network and worker
// threads, its actor scheduler and CPU pool); the caller's own threads keep their policy;
// AF_SCHED_BATCH=0 leaves every thread under the default policy; a thread under another
// policy is left alone (actorflow/library_threads.h).
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/library_threads.h>

#include <sched.h>
#include <unistd.h>

#include <future>
#include <map>
#include <optional>
#include <string>

#include "test_net_daemon_process.h"
#include "thread_policy.h"

namespace af = actorflow;
using aftnet::DaemonProcess;

namespace {

const char* kToken = "library-threads-test-token";

// How many of the process's threads have each name of ours (af-...), and how many of
// those run under a policy other than `policy`.
struct OurThreads {
  std::map<std::string, int> named;
  int other_policy = 0;
  std::string report;
};

OurThreads our_threads(pid_t pid, int policy) {
  OurThreads o;
  for (const auto& t : aft::process_threads(pid)) {
    o.report += t.name + "(" + std::to_string(t.tid) + "):" + std::to_string(t.policy) + " ";
    if (t.name.rfind("af-", 0) != 0) continue;
    ++o.named[t.name];
    if (t.policy != policy) ++o.other_policy;
  }
  return o;
}

int policy_of(pid_t tid) { return sched_getscheduler(tid); }

// A session that has run steps with a matmul on the daemon, big enough for its CPU pool,
// fed from this process and finished with a matmul here.
af::Session run_remote_steps(const std::string& target) {
  af::Graph g;
  af::Output x, y;
  {
    af::DeviceScope d(g, "/job:worker/task:0");
    x = af::placeholder(g, af::f32, {256, 256}, "x");
    y = af::matmul(x, x, false, false, "remote_square");
  }
  auto z = af::matmul(y, x, false, false, "local_product");
  af::SessionOptions opts;
  opts.step_timeout_ms = 20000;
  auto s = af::Session::create(g, target, opts);
  REQUIRE_MESSAGE(s.ok(), s.status().to_string());
  std::vector<float> ones(256 * 256, 0.01f);
  for (int i = 0; i < 3; ++i) {
    auto r = s->run({z}, {{x, af::Tensor::from_vector(ones, {256, 256})}});
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    CHECK(r->at(0).data<float>()[0] == doctest::Approx(256 * 256 * 1e-6f).epsilon(1e-3));
  }
  return std::move(s).value();
}

std::string cluster(const DaemonProcess& d) { return "/job:worker/task:0=" + d.target(); }

// A daemon whose main thread starts under the default policy, whatever policy this test
// was started with: this thread is under SCHED_OTHER while it forks it, then as before.
// False (and none started) when this test runs under a policy it may not leave
// (SCHED_IDLE without the nice limit to leave it).
bool start_daemon_under_default_policy(std::optional<DaemonProcess>& d) {
  sched_param was{};
  const int policy = sched_getscheduler(0);
  (void)sched_getparam(0, &was);
  sched_param other{};
  if (sched_setscheduler(0, SCHED_OTHER, &other) != 0) return false;
  d.emplace(kToken);
  (void)sched_setscheduler(0, policy, &was);
  return true;
}

}  // namespace

TEST_CASE("the library's threads are named and run under SCHED_BATCH; the caller's keep their policy") {
  REQUIRE(aftnet::daemon_built());
  const int main_policy = policy_of(getpid());
  std::optional<DaemonProcess> started;
  if (!start_daemon_under_default_policy(started)) {
    MESSAGE("not checked: this test runs under a policy it may not leave for SCHED_OTHER");
    return;
  }
  DaemonProcess& daemon = *started;
  REQUIRE_MESSAGE(daemon.started(), daemon.log());
  aftnet::ScopedEnv token("ACTORFLOW_TOKEN", kToken);
  // From a thread of the test's own under SCHED_OTHER.
  std::optional<af::Session> session;
  auto caller_policy = std::async(std::launch::async, [&] {
    sched_param p{};
    REQUIRE(sched_setscheduler(0, SCHED_OTHER, &p) == 0);
    session.emplace(run_remote_steps(cluster(daemon)));
    return sched_getscheduler(0);
  }).get();
  CHECK(caller_policy == SCHED_OTHER);
  CHECK(policy_of(getpid()) == main_policy);

  auto here = our_threads(getpid(), SCHED_BATCH);
  INFO("this process: ", here.report);
  // This side's steps run on the caller (the run path's choice for a short serial step):
  // the connection's thread is the library's thread here.
  CHECK(here.named["af-client-io"] >= 1);
  CHECK(here.other_policy == 0);

  auto there = our_threads(daemon.pid(), SCHED_BATCH);
  INFO("the daemon: ", there.report);
  CHECK(there.named["af-daemon-io"] == 1);
  CHECK(there.named["af-daemon-work"] >= 1);
  CHECK(there.named["af-actor"] >= 1);
  CHECK(there.named["af-cpu"] >= 1);
  CHECK(there.other_policy == 0);
  // The daemon's main thread, which only waits, keeps the default.
  CHECK(policy_of(daemon.pid()) == SCHED_OTHER);
}

TEST_CASE("AF_SCHED_BATCH=0 leaves the library's threads under the default policy") {
  REQUIRE(aftnet::daemon_built());
  std::optional<DaemonProcess> daemon;
  {
    aftnet::ScopedEnv off("AF_SCHED_BATCH", "0");
    start_daemon_under_default_policy(daemon);
  }
  if (!daemon) {
    MESSAGE("not checked: this test runs under a policy it may not leave for SCHED_OTHER");
    return;
  }
  REQUIRE_MESSAGE(daemon->started(), daemon->log());
  aftnet::ScopedEnv token("ACTORFLOW_TOKEN", kToken);
  auto session = run_remote_steps(cluster(*daemon));
  auto there = our_threads(daemon->pid(), SCHED_OTHER);
  INFO("the daemon: ", there.report);
  CHECK(there.named["af-daemon-io"] == 1);
  CHECK(there.named["af-actor"] >= 1);
  CHECK(there.named["af-cpu"] >= 1);
  CHECK(there.other_policy == 0);
  CHECK(aft::threads_under_policy(daemon->pid(), SCHED_BATCH) == 0);
}

TEST_CASE("a library thread is named and switched only from SCHED_OTHER, and only when the switch allows") {
  struct Seen {
    bool set = false;
    int policy = -1;
    std::string name;
  };
  auto enter = [](int start_policy, const char* name) {
    return std::async(std::launch::async, [=] {
      Seen s;
      sched_param p{};
      s.set = sched_setscheduler(0, start_policy, &p) == 0;
      af::enter_library_thread(name);
      s.policy = sched_getscheduler(0);
      char buf[32] = {};
      pthread_getname_np(pthread_self(), buf, sizeof(buf));
      s.name = buf;
      return s;
    }).get();
  };
  auto plain = enter(SCHED_OTHER, "af-test-a-name-longer-than-15");
  REQUIRE(plain.set);
  CHECK(plain.policy == SCHED_BATCH);
  CHECK(plain.name == "af-test-a-name-");  // Linux keeps 15 bytes
  // Leaving SCHED_IDLE needs a nice limit an unprivileged test may not have: in a thread
  // of its own, as every case here.
  auto idle = enter(SCHED_IDLE, "af-test-idle");
  REQUIRE(idle.set);
  CHECK(idle.policy == SCHED_IDLE);
  CHECK(idle.name == "af-test-idle");
  {
    aftnet::ScopedEnv off("AF_SCHED_BATCH", "0");
    auto kept = enter(SCHED_OTHER, "af-test-off");
    CHECK(kept.policy == SCHED_OTHER);
    CHECK(kept.name == "af-test-off");
  }
  // The guard puts the caller back under SCHED_OTHER.
  auto scoped = std::async(std::launch::async, [] {
    sched_param p{};
    REQUIRE(sched_setscheduler(0, SCHED_OTHER, &p) == 0);
    int inside = -1;
    {
      af::ScopedBatchPolicy batch;
      inside = sched_getscheduler(0);
    }
    return std::make_pair(inside, sched_getscheduler(0));
  }).get();
  CHECK(scoped.first == SCHED_BATCH);
  CHECK(scoped.second == SCHED_OTHER);
}
