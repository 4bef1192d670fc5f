// The scheduler's polling profile (runtime/scheduler_polling.h): set before the first
// session it governs every step of the process; after that it is refused. With no
// polling, idle workers wait on a condition variable, so this also checks that steps
// woken that way never stall (many small steps from several threads, each with a deadline).
// Its one case must come before any session of its process: CTest runs this file alone
// in its process, and no file of its test binary starts a session when the program loads.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/runtime/scheduler_polling.h>

#include <atomic>
#include <thread>
#include <vector>

namespace af = actorflow;

TEST_CASE("shared-cores polling: set before the first session, steps run without polling, then refused") {
  REQUIRE(af::runtime::set_scheduler_polling(af::runtime::SchedulerPolling::shared_cores()).ok());
  af::Graph g;
  // A MatMul, so that the steps go through node actors (a plan of only cheap nodes may
  // run on the caller's thread).
  auto x = af::placeholder(g, af::f32, {1, 4}, "x");
  auto eye = af::constant(g, af::Tensor::from_vector<float>({1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}, {4, 4}));
  auto y = af::relu(af::matmul(x, eye) * 2.0f + 1.0f, "y");
  af::SessionOptions opts;
  opts.intra_op_threads = 2;
  auto made = af::Session::create(g, opts);
  REQUIRE(made.ok());
  af::Session sess = std::move(made).value();
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        float v = static_cast<float>(t * 1000 + i);
        af::RunOptions ro;
        ro.timeout_ms = 10000;
        auto out = sess.run(ro, {y}, {{x, af::Tensor::from_vector<float>({v, -v, 0, 1}, {1, 4})}}, {});
        if (out.ok() && (*out)[0].to_vector<float>() == std::vector<float>{2 * v + 1, v == 0 ? 1.0f : 0.0f, 1, 3}) ++good;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(good == 1200);
  af::Status again = af::runtime::set_scheduler_polling(af::runtime::SchedulerPolling::standalone());
  CHECK(again.code() == af::Code::failed_precondition);
  CHECK(again.message().find("already started") != std::string::npos);
}
