// Polling before sleeping (net/src/spin_wait.h): a SpinWait's budget ends its polls, the
// io loop that polls runs every handler (posted from other threads, timers) and returns
// when stopped, and a daemon that polls and one that never does answer remote steps alike.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/net/daemon.h>

#include <sched.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "../../net/src/spin_wait.h"

namespace af = actorflow;
namespace net = actorflow::net;
using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;

namespace {

// These cases test the wire: sessions on this process's daemon dial it, as another
// process's would, instead of calling it directly (and so pass its handshake).
// Set when the first case starts, not when the program loads: the other files of this
// test binary keep the direct path. Never unset: setenv while other threads read the
// environment is a race.
struct DialOwnDaemon {
  DialOwnDaemon() {
    static const bool set = setenv("AF_DIAL_OWN_DAEMON", "1", 1) == 0;
    (void)set;
  }
};

long involuntary_switches() {
  rusage u{};
  ::getrusage(RUSAGE_THREAD, &u);
  return u.ru_nivcsw;
}

}  // namespace

TEST_CASE_FIXTURE(DialOwnDaemon, "a SpinWait polls until its budget is spent (or its core is wanted), and not at all without one") {
  net::SpinWait none(microseconds(0));
  CHECK_FALSE(none.again());

  long switches = involuntary_switches();
  net::SpinWait wait(microseconds(3000));
  auto t0 = Clock::now();
  int polls = 0;
  while (wait.again() && polls < 10'000'000) ++polls;
  auto spent = Clock::now() - t0;
  CHECK(polls > 0);
  CHECK(spent < milliseconds(500));  // bounded: the budget ends it, not the poll cap
  // Short of its budget only where its yields handed the core to another thread (the
  // suite runs tests side by side).
  if (spent < microseconds(3000)) CHECK(involuntary_switches() > switches);
  CHECK_FALSE(wait.again());  // stays spent
}

TEST_CASE_FIXTURE(DialOwnDaemon, "a poller whose core another thread wants stops") {
  cpu_set_t was;
  REQUIRE(::sched_getaffinity(0, sizeof was, &was) == 0);
  int cpu = -1;
  for (int c = 0; c < CPU_SETSIZE && cpu < 0; ++c)
    if (CPU_ISSET(c, &was)) cpu = c;
  REQUIRE(cpu >= 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  // A busy thread on this thread's only core, for at most 2 s.
  std::atomic<bool> stop{false}, running{false};
  std::thread busy([&] {
    ::sched_setaffinity(0, sizeof one, &one);
    running = true;
    auto end = Clock::now() + std::chrono::seconds(2);
    while (!stop && Clock::now() < end) {
    }
  });
  REQUIRE(::sched_setaffinity(0, sizeof one, &one) == 0);
  while (!running) std::this_thread::yield();
  net::SpinWait wait(milliseconds(200));
  auto t0 = Clock::now();
  while (wait.again()) {
  }
  auto spent = Clock::now() - t0;
  stop = true;
  busy.join();
  REQUIRE(::sched_setaffinity(0, sizeof was, &was) == 0);
  CHECK(spent < milliseconds(150));  // well short of its 200 ms: its yields ran the busy thread
  CHECK_FALSE(wait.again());         // and it stays stopped
}

TEST_CASE_FIXTURE(DialOwnDaemon, "the polling io loop runs posted handlers and timers, and returns once stopped") {
  asio::io_context io;
  auto guard = asio::make_work_guard(io);
  std::atomic<int> ran{0};
  std::atomic<bool> fired{false};
  asio::steady_timer timer(io, milliseconds(20));
  timer.async_wait([&](std::error_code ec) { fired = !ec; });
  auto loop = std::async(std::launch::async, [&] { net::run_io_spinning(io, microseconds(200)); });
  for (int i = 0; i < 100; ++i) {
    asio::post(io, [&] { ++ran; });
    // Some posts land while it polls, some after it has gone to sleep.
    if (i % 10 == 0) std::this_thread::sleep_for(milliseconds(1));
  }
  auto until = Clock::now() + std::chrono::seconds(10);
  while ((ran < 100 || !fired) && Clock::now() < until) std::this_thread::sleep_for(milliseconds(1));
  CHECK(ran == 100);
  CHECK(fired);
  io.stop();
  REQUIRE(loop.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
}

TEST_CASE_FIXTURE(DialOwnDaemon, "the polling io loop returns when it runs out of work") {
  asio::io_context io;
  int ran = 0;
  asio::post(io, [&] { ++ran; });
  auto loop = std::async(std::launch::async, [&] { net::run_io_spinning(io, microseconds(500)); });
  REQUIRE(loop.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(ran == 1);
}

TEST_CASE_FIXTURE(DialOwnDaemon, "daemons that poll and daemons that never do give the same answers") {
  for (int spin_us : {0, 200}) {
    CAPTURE(spin_us);
    net::DaemonOptions o;
    o.host = "127.0.0.1";
    o.insecure = true;
    o.spin_us = spin_us;
    o.log = [](const std::string&) {};
    auto d = net::NodeDaemon::start(o);
    REQUIRE_MESSAGE(d.ok(), d.status().to_string());
    af::Graph g;
    auto x = af::placeholder(g, af::f32, {2}, "x");
    auto y = x * 3.0f + 1.0f;
    auto sess = af::Session::create(g, "af://127.0.0.1:" + std::to_string((*d)->port()));
    REQUIRE_MESSAGE(sess.ok(), sess.status().to_string());
    for (int i = 0; i < 300; ++i) {
      float v = static_cast<float>(i);
      auto out = sess->run({y}, {{x, af::Tensor::from_vector<float>({v, -v}, {2})}});
      REQUIRE_MESSAGE(out.ok(), out.status().to_string());
      auto r = (*out)[0].to_vector<float>();
      CHECK(r[0] == 3 * v + 1);
      CHECK(r[1] == -3 * v + 1);
    }
  }
}
