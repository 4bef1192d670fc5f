// Failures inside actors become failed steps, never hangs: a throwing kernel, a throwing
// map function, ragged rows, an allocation over the session's memory limit, and steps or
// batches that miss their deadline. Each must answer within a second and leave the
// session or pipeline usable.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/data/dataset.h>
#include <actorflow/kernel.h>
#include <actorflow/op_registry.h>
#include <actorflow/runtime/actor_count.h>
#include <actorflow/runtime/run_path.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "test_util.h"

namespace af = actorflow;
using Clock = std::chrono::steady_clock;

namespace {

// Throws when its input is negative, else passes it through.
class ThrowingKernel : public af::OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(af::OpKernelContext& ctx) override {
    if (ctx.input(0).item<float>() < 0) throw std::runtime_error("negative input");
    ctx.set_output(0, ctx.input(0));
  }
};

// Allocates an output of `n` float32 elements, n taken from its int64 input.
class AllocatingKernel : public af::OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(af::OpKernelContext& ctx) override {
    int64_t n = ctx.input(0).item<int64_t>();
    af::Tensor& out = ctx.allocate_output(0, af::f32, af::Shape({n}));
    for (int64_t i = 0; i < n; ++i) out.data<float>()[i] = 1.0f;
  }
};

// Sleeps for its input's number of milliseconds.
class SleepingKernel : public af::OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(af::OpKernelContext& ctx) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(ctx.input(0).item<int64_t>()));
    ctx.set_output(0, ctx.input(0));
  }
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

AF_REGISTER_OP("TestThrowing").inputs(1).shape_fn(aft::same_shape);
AF_REGISTER_KERNEL("TestThrowing", af::DeviceType::CPU, ThrowingKernel);
AF_REGISTER_OP("TestAllocating").inputs(1).shape_fn([](af::ShapeContext& c) {
  c.set_output(0, af::f32, af::Shape({-1}));
  return af::Status::OK();
});
AF_REGISTER_KERNEL("TestAllocating", af::DeviceType::CPU, AllocatingKernel);
AF_REGISTER_OP("TestSleeping").inputs(1).shape_fn(aft::same_shape);
AF_REGISTER_KERNEL("TestSleeping", af::DeviceType::CPU, SleepingKernel);

TEST_CASE("a throwing kernel fails its step, naming the node, and the session goes on") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {}, "x");
  auto y = aft::unary(g, "TestThrowing", x, "thrower");
  auto z = y * 2.0f;
  auto sess = af::Session::create(g).value();
  for (int round = 0; round < 3; ++round) {
    auto t0 = Clock::now();
    auto bad = sess.run({z}, {{x, af::Tensor::scalar(-1.0f)}});
    CHECK(seconds_since(t0) < 1.0);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().message().find("thrower") != std::string::npos);
    CHECK(bad.status().message().find("negative input") != std::string::npos);
    auto good = sess.run({z}, {{x, af::Tensor::scalar(3.0f)}});
    REQUIRE(good.ok());
    CHECK((*good)[0].item<float>() == 6.0f);
  }
}

TEST_CASE("an allocation over the session's memory limit fails the step with ResourceExhausted") {
  af::Graph g;
  auto n = af::placeholder(g, af::i64, {}, "n");
  auto big = aft::unary(g, "TestAllocating", n, "allocator");
  af::SessionOptions opts;
  opts.memory_limit_bytes = 1 << 20;
  auto sess = af::Session::create(g, opts).value();
  auto t0 = Clock::now();
  auto bad = sess.run({big}, {{n, af::Tensor::scalar(int64_t{16} << 20)}});
  CHECK(seconds_since(t0) < 1.0);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == af::Code::resource_exhausted);
  CHECK(bad.status().message().find("allocator") != std::string::npos);
  // Within the limit the same session still works, again and again (the failed step's
  // bytes came back).
  for (int i = 0; i < 3; ++i) {
    auto good = sess.run({big}, {{n, af::Tensor::scalar(int64_t{1000})}});
    REQUIRE(good.ok());
    CHECK((*good)[0].num_elements() == 1000);
  }
  // Without a limit the big allocation succeeds: the limit, not the machine, refused it.
  auto unlimited = af::Session::create(g).value();
  auto ok = unlimited.run({big}, {{n, af::Tensor::scalar(int64_t{16} << 20)}});
  CHECK(ok.ok());
}

TEST_CASE("a step past its deadline fails with DeadlineExceeded; the next step works") {
  af::Graph g;
  auto ms = af::placeholder(g, af::i64, {}, "ms");
  auto slow = aft::unary(g, "TestSleeping", ms, "sleeper");
  auto sess = af::Session::create(g).value();
  af::RunOptions ro;
  ro.timeout_ms = 100;
  auto t0 = Clock::now();
  auto late = sess.run(ro, {slow}, {{ms, af::Tensor::scalar(int64_t{1500})}});
  double took = seconds_since(t0);
  CHECK(took < 1.0);
  CHECK(took >= 0.09);
  REQUIRE_FALSE(late.ok());
  CHECK(late.status().code() == af::Code::deadline_exceeded);
  auto quick = sess.run(ro, {slow}, {{ms, af::Tensor::scalar(int64_t{1})}});
  // The first step still holds the node for the rest of its 1.5 s; steps are in order.
  if (!quick.ok()) CHECK(quick.status().code() == af::Code::deadline_exceeded);
  std::this_thread::sleep_for(std::chrono::milliseconds(1600));
  auto after = sess.run(ro, {slow}, {{ms, af::Tensor::scalar(int64_t{1})}});
  REQUIRE(after.ok());
  CHECK((*after)[0].item<int64_t>() == 1);

  // The session-wide default applies when the run sets none.
  af::SessionOptions opts;
  opts.step_timeout_ms = 100;
  auto strict = af::Session::create(g, opts).value();
  auto late2 = strict.run({slow}, {{ms, af::Tensor::scalar(int64_t{800})}});
  REQUIRE_FALSE(late2.ok());
  CHECK(late2.status().code() == af::Code::deadline_exceeded);
}

TEST_CASE("distinct kinds of step beyond max_cached_plans evict the least recently used") {
  // Counts one actor per prepared plan: a cheap plan must not run on the caller's thread.
  af::runtime::ScopedRunPath one_actor_per_node(af::runtime::RunPath{false, false});
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {}, "x");
  std::vector<af::Output> outs;
  for (int i = 0; i < 6; ++i) outs.push_back(x * static_cast<float>(i + 1));
  af::SessionOptions opts;
  opts.max_cached_plans = 2;
  auto sess = af::Session::create(g, opts).value();
  auto feed = af::FeedDict{{x, af::Tensor::scalar(2.0f)}};
  for (int round = 0; round < 3; ++round)
    for (int i = 0; i < 6; ++i) {
      auto r = sess.run({outs[static_cast<size_t>(i)]}, feed);
      REQUIRE(r.ok());
      CHECK((*r)[0].item<float>() == 2.0f * static_cast<float>(i + 1));
    }
  // outs[5] and outs[4] are the two cached plans: running them spawns nothing; outs[0]
  // was evicted, so running it prepares it again (one actor: the Mul).
  int64_t spawned = af::runtime::node_actors_spawned();
  for (int i = 0; i < 10; ++i) REQUIRE(sess.run({outs[5]}, feed).ok());
  REQUIRE(sess.run({outs[4]}, feed).ok());
  CHECK(af::runtime::node_actors_spawned() == spawned);
  REQUIRE(sess.run({outs[0]}, feed).ok());
  CHECK(af::runtime::node_actors_spawned() == spawned + 1);
}

// ---- input pipelines ----

namespace {

af::data::Dataset numbers(int64_t rows) {
  std::vector<float> v(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
  return af::data::Dataset::from_tensors({af::Tensor::from_vector<float>(v, {rows, 1})});
}

}  // namespace

TEST_CASE("a throwing map function fails next(), naming the stage") {
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    auto it = numbers(1000)
                  .map([](const af::data::Components&) -> af::Result<af::data::Components> {
                    throw std::runtime_error("parser exploded");
                  }, threads)
                  .batch(10)
                  .make_iterator();
    af::data::Components batch;
    auto t0 = Clock::now();
    auto r = it->next(&batch, 5000);
    CHECK(seconds_since(t0) < 1.0);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("Dataset stage 1 (map)") != std::string::npos);
    CHECK(r.status().message().find("parser exploded") != std::string::npos);
    // The iterator stays failed rather than hanging.
    auto again = it->next(&batch, 5000);
    CHECK((!again.ok() || !*again));
  }
}

TEST_CASE("ragged rows fail batching with TensorFlow's message instead of overflowing") {
  // Each 256-row source chunk maps to rows of a different width: [3], then [4].
  auto width = std::make_shared<int64_t>(3);
  auto it = numbers(600)
                .map([width](const af::data::Components& c) -> af::Result<af::data::Components> {
                  int64_t rows = c[0].dim(0);
                  af::Tensor out = af::Tensor::zeros(af::f32, af::Shape({rows, *width}));
                  ++*width;
                  return af::data::Components{out};
                })
                .batch(300)
                .make_iterator();
  af::data::Components batch;
  auto r = it->next(&batch, 5000);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("cannot batch rows of different shapes: [3] and [4] (row 256)") != std::string::npos);
  CHECK(r.status().message().find("Dataset stage 2 (batch)") != std::string::npos);

  // A parallel map whose parts disagree on the row shape fails the same way.
  auto it2 = numbers(100)
                 .map([](const af::data::Components& c) -> af::Result<af::data::Components> {
                   int64_t rows = c[0].dim(0);
                   int64_t w = c[0].data<float>()[0] < 50 ? 3 : 4;
                   return af::data::Components{af::Tensor::zeros(af::f32, af::Shape({rows, w}))};
                 }, 2)
                 .make_iterator();
  auto r2 = it2->next(&batch, 5000);
  REQUIRE_FALSE(r2.ok());
  CHECK(r2.status().message().find("cannot batch rows of different shapes: [3] and [4]") != std::string::npos);
}

TEST_CASE("next() with a deadline fails cleanly when the pipeline is slow") {
  auto it = numbers(10)
                .map([](const af::data::Components& c) -> af::Result<af::data::Components> {
                  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
                  return c;
                })
                .make_iterator();
  af::data::Components batch;
  auto t0 = Clock::now();
  auto r = it->next(&batch, 100);
  CHECK(seconds_since(t0) < 1.0);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == af::Code::deadline_exceeded);
  // Waiting longer gets the data.
  auto later = it->next(&batch, 5000);
  REQUIRE(later.ok());
  CHECK(*later);
  CHECK(batch[0].dim(0) == 10);
}
