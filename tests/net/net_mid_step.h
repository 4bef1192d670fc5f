// The net tests' mid-step failures: a chain step (net_chain_graph.h) whose far daemon is
// lost while the step runs, checked the same way in test_net_cluster (plain) and
// test_net_tls (TLS).
#pragma once
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "net_chain_graph.h"
#include "test_net_daemon_process.h"

namespace aftnet {

namespace af = actorflow;

// Two daemons as the tasks of a chain step (net_chain_graph.h): worker 0 ("near") waits
// for worker 1 ("far"). Their extra flags come after the ones that name worker 1.
struct NearFar {
  NearFar(const std::string& token, std::vector<std::string> near_flags = {}, std::vector<std::string> far_flags = {})
      : near(token, 0, std::move(near_flags)), far(token, 0, named_task1(std::move(far_flags))) {}
  DaemonProcess near, far;
  bool started() { return near.started() && far.started(); }
  std::string logs() const { return "--- near (worker 0):\n" + near.log() + "--- far (worker 1):\n" + far.log(); }
  std::string target() const { return "/job:worker/task:0=" + near.target() + ",/job:worker/task:1=" + far.target(); }

 private:
  static std::vector<std::string> named_task1(std::vector<std::string> more) {
    std::vector<std::string> f = {"--job_name", "worker", "--task_index", "1"};
    f.insert(f.end(), more.begin(), more.end());
    return f;
  }
};

// The far daemon of a chain step (net_chain_graph.h) is lost mid-step by `lose`: the step
// fails within `within`, naming the far task; the near daemon, with one worker thread,
// ends its part and serves again.
inline void lose_far_mid_step(DaemonProcess& near, DaemonProcess& far, const std::function<void()>& lose,
                              std::chrono::seconds within, ChainStep& chain) {
  auto logs = [&] { return "--- near (worker 0):\n" + near.log() + "--- far (worker 1):\n" + far.log(); };
  const size_t near_before = near.log().size();
  af::Status failure;
  std::chrono::steady_clock::duration took{};
  std::thread step([&] {
    auto t0 = std::chrono::steady_clock::now();
    auto r = chain.run();
    took = std::chrono::steady_clock::now() - t0;
    failure = r.ok() ? af::Status::OK() : r.status();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  lose();
  step.join();  // bounded by the step's deadline at worst
  INFO(failure.to_string());
  CHECK_FALSE(failure.ok());
  CHECK(took < within);
  CHECK((failure.message().find("/job:worker/task:1") != std::string::npos ||
         failure.message().find(far.address()) != std::string::npos));
  // The near part was waiting for the far edge: it ends too (the client's CleanupStep).
  auto near_failed = [&] { return near.log().find("partition step", near_before) != std::string::npos; };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!near_failed() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_MESSAGE(near_failed(), logs());
  // And its one worker thread is free: a graph on it alone registers and runs.
  af::Graph h;
  auto a = af::constant(h, 3.0f, "a") * 2.0;
  af::SessionOptions short_opts;
  short_opts.step_timeout_ms = 20000;
  auto sh = af::Session::create(h, near.target(), short_opts);
  REQUIRE_MESSAGE(sh.ok(), sh.status().to_string() << "\n" << logs());
  auto fine = sh->run({a});
  REQUIRE_MESSAGE(fine.ok(), fine.status().to_string() << "\n" << logs());
  CHECK(fine->at(0).to_vector<float>().at(0) == 6.0f);
}


}  // namespace aftnet
