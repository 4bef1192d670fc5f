// Node actors run by the threads that post to them (in_place_runner.h): a caller without
// a deadline runs its step's actors itself, a caller with one leaves them to CAF's
// workers, and close() still waits for a kernel that a caller's thread is inside.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/kernel.h>
#include <actorflow/op_registry.h>
#include <actorflow/runtime/actor_count.h>
#include <actorflow/runtime/run_path.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "test_util.h"

namespace af = actorflow;
using aft::unary;

namespace {

thread_local bool t_caller = false;  // set on the threads a test calls run() from
std::atomic<int> g_on_caller{0}, g_elsewhere{0};
std::atomic<int> g_sleep_ms{0};
std::atomic<bool> g_sleeping{false}, g_slept{false};

// Passes its input through and counts where it ran. Not a cheap op (cheap_ops.h), so
// every one gets an actor of its own.
class WhereKernel : public af::OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(af::OpKernelContext& ctx) override {
    (t_caller ? g_on_caller : g_elsewhere).fetch_add(1);
    ctx.set_output(0, ctx.input(0));
  }
};

class NapKernel : public af::OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(af::OpKernelContext& ctx) override {
    g_sleeping = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(g_sleep_ms.load()));
    g_slept = true;
    ctx.set_output(0, ctx.input(0));
  }
};

}  // namespace

AF_REGISTER_OP("TestInPlaceWhere").inputs(1).shape_fn(aft::same_shape);
AF_REGISTER_KERNEL("TestInPlaceWhere", af::DeviceType::CPU, WhereKernel);
AF_REGISTER_OP("TestInPlaceNap").inputs(1).shape_fn(aft::same_shape);
AF_REGISTER_KERNEL("TestInPlaceNap", af::DeviceType::CPU, NapKernel);

namespace {

// Every node on an actor of its own, and no step on the caller's thread by the run path.
constexpr af::runtime::RunPath kActorsOnly{false, false, false};

}  // namespace

TEST_CASE("a chain of node actors runs on the caller's thread; with a deadline, on CAF's workers") {
  af::runtime::ScopedRunPath actors_only(kActorsOnly);
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {3}, "x");
  af::Output y = x;
  for (int i = 0; i < 4; ++i) y = unary(g, "TestInPlaceWhere", y, "where" + std::to_string(i));
  auto sess = af::Session::create(g).value();
  af::Tensor in = af::Tensor::from_vector<float>({1, 2, 3});
  t_caller = true;
  g_on_caller = 0;
  g_elsewhere = 0;
  const int64_t before = af::runtime::steps_on_actors();
  for (int s = 0; s < 20; ++s) {
    auto r = sess.run({y}, {{x, in}});
    REQUIRE(r.ok());
    CHECK((*r)[0].equals(in));
  }
  CHECK(af::runtime::steps_on_actors() - before == 20);
  // No hop of the chain went through a worker: each actor ran on the thread that made it
  // ready, starting with the caller's.
  CHECK(g_on_caller.load() == 80);
  CHECK(g_elsewhere.load() == 0);

  g_on_caller = 0;
  af::RunOptions ro;
  ro.timeout_ms = 30000;
  for (int s = 0; s < 5; ++s) {
    auto r = sess.run(ro, {y}, {{x, in}}, {});
    REQUIRE(r.ok());
    CHECK((*r)[0].equals(in));
  }
  // A caller that may stop waiting runs none of its step's actors.
  CHECK(g_on_caller.load() == 0);
  CHECK(g_elsewhere.load() == 20);
  t_caller = false;
}

TEST_CASE("close() while a caller's thread is inside a node actor's kernel waits for it; the step fails cancelled") {
  af::runtime::ScopedRunPath actors_only(kActorsOnly);
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {2}, "x");
  auto y = unary(g, "TestInPlaceWhere", unary(g, "TestInPlaceNap", x, "nap"), "after_nap");
  auto sess = af::Session::create(g).value();
  af::Tensor in = af::Tensor::from_vector<float>({1, 2});
  g_sleep_ms = 0;
  t_caller = true;
  g_on_caller = 0;
  REQUIRE(sess.run({y}, {{x, in}}).ok());
  REQUIRE(g_on_caller.load() == 1);

  g_sleep_ms = 300;
  g_sleeping = false;
  g_slept = false;
  std::optional<af::Result<std::vector<af::Tensor>>> during;
  std::thread caller([&] {
    t_caller = true;
    during = sess.run({y}, {{x, in}});
  });
  for (int i = 0; i < 10000 && !g_sleeping.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(g_sleeping.load());
  REQUIRE(sess.close().ok());
  // The kernel that the caller's thread was inside had ended before close() returned:
  // nothing reads the graph after it.
  CHECK(g_slept.load());
  caller.join();
  g_sleep_ms = 0;
  REQUIRE(during.has_value());
  REQUIRE_FALSE(during->ok());
  CHECK(during->status().code() == af::Code::cancelled);
  CHECK_FALSE(sess.run({y}, {{x, in}}).ok());
  t_caller = false;
}

TEST_CASE("steps from several callers pipeline through one set of actors, each run by whoever finds it idle") {
  af::runtime::ScopedRunPath actors_only(kActorsOnly);
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {}, "x");
  // Two branches of a few actors each, joined: the runners hand actors over and take
  // them back while the other callers' steps go through the same actors.
  auto left = unary(g, "TestInPlaceWhere", unary(g, "TestInPlaceWhere", x * 2.0f, "l0"), "l1");
  auto right = unary(g, "TestInPlaceWhere", unary(g, "TestInPlaceWhere", x * 3.0f, "r0"), "r1");
  auto y = unary(g, "TestInPlaceWhere", left + right, "joined");
  af::SessionOptions opts;
  opts.edge_capacity = 1;
  auto sess = af::Session::create(g, opts).value();
  auto step = sess.make_callable({y}, {x}).value();
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        float v = static_cast<float>(t * 1000 + i);
        auto r = step({af::Tensor::scalar(v)});
        if (!r.ok()) ++failed;
        else if ((*r)[0].item<float>() != 5.0f * v) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(failed.load() == 0);
  CHECK(wrong.load() == 0);
}
