// The run path for training steps: a plan of synchronous kernels that holds
// stateful ones (variable reads, their Apply updates) runs on the caller's thread when it
// is mostly serial, as an MLP's training step is, unless its step has a deadline. It must
// give what the actors give, bit for bit and step by step; concurrent callers each run
// their own step and every update lands once; close() during a step stops it before its
// next kernel; an error names its node and leaves the later updates undone; a plan with
// independent heavy branches stays on the actors; the switches turn it off.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/runtime/actor_count.h>
#include <actorflow/kernel.h>
#include <actorflow/op_registry.h>
#include <actorflow/runtime/run_path.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "test_util.h"

namespace af = actorflow;
using aft::unary;
using af::runtime::RunPath;
using af::runtime::ScopedRunPath;

namespace {

// Set on the threads a test calls run() from.
thread_local bool t_caller = false;
std::atomic<int> g_on_caller{0}, g_elsewhere{0};
std::atomic<int> g_sleep_ms{0};
std::atomic<bool> g_sleeping{false};  // set when a SleepKernel starts its sleep
std::atomic<bool> g_slept{false};     // set when it has finished it
std::atomic<bool> g_fail{false};

// Passes its input through and counts where it ran: on a caller's thread or not.
class RecordKernel : public af::OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(af::OpKernelContext& ctx) override {
    (t_caller ? g_on_caller : g_elsewhere).fetch_add(1);
    ctx.set_output(0, ctx.input(0));
  }
};

// Sleeps g_sleep_ms, then passes its input through.
class SleepKernel : public af::OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(af::OpKernelContext& ctx) override {
    g_sleeping = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(g_sleep_ms.load()));
    g_slept = true;
    ctx.set_output(0, ctx.input(0));
  }
};

// Fails while g_fail is set, else passes its input through.
class FailKernel : public af::OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(af::OpKernelContext& ctx) override {
    if (g_fail.load()) {
      ctx.fail("asked to fail");
      return;
    }
    ctx.set_output(0, ctx.input(0));
  }
};

}  // namespace

AF_REGISTER_OP("TestTrainRecord").inputs(1).shape_fn(aft::same_shape);
AF_REGISTER_KERNEL("TestTrainRecord", af::DeviceType::CPU, RecordKernel);
AF_REGISTER_OP("TestTrainSleep").inputs(1).shape_fn(aft::same_shape);
AF_REGISTER_KERNEL("TestTrainSleep", af::DeviceType::CPU, SleepKernel);
AF_REGISTER_OP("TestTrainFail").inputs(1).shape_fn(aft::same_shape);
AF_REGISTER_KERNEL("TestTrainFail", af::DeviceType::CPU, FailKernel);

namespace {

constexpr RunPath kTrainingOff{true, true, true, false};

af::Tensor random_tensor(af::Shape shape, std::mt19937& rng, float scale) {
  af::Tensor t(af::f32, shape);
  std::uniform_real_distribution<float> u(-scale, scale);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// The bench's MLP, 784-256-128-10 with ReLUs, squared error, SGD; `towers` > 1 builds that
// many first layers side by side instead (independent heavy branches). The recorder reads
// the loss off the gradient's path.
struct Mlp {
  af::Graph g;
  af::Output x, y, loss, rec;
  af::Operation train;
  std::vector<af::Output> vars;
  explicit Mlp(int towers = 1) {
    std::mt19937 rng(7);
    x = af::placeholder(g, af::f32, {-1, 784}, "x");
    y = af::placeholder(g, af::f32, {-1, 10}, "y");
    auto var = [&](af::Shape s, const std::string& name) {
      vars.push_back(af::variable(g, random_tensor(s, rng, 0.05f), name));
      return vars.back();
    };
    af::Output h;
    for (int t = 0; t < towers; ++t) {
      auto ht = af::relu(af::bias_add(af::matmul(x, var({784, 256}, "w1_" + std::to_string(t))),
                                      var({256}, "b1_" + std::to_string(t))));
      h = t == 0 ? ht : h + ht;
    }
    auto h2 = af::relu(af::bias_add(af::matmul(h, var({256, 128}, "w2")), var({128}, "b2")));
    auto logits = af::bias_add(af::matmul(h2, var({128, 10}, "w3")), var({10}, "b3"));
    loss = af::reduce_mean(af::square(logits - y));
    rec = unary(g, "TestTrainRecord", loss, "rec");
    train = af::optim::GradientDescent(0.05).minimize(loss);
  }
};

struct Batches {
  std::vector<af::Tensor> xs, ys;
  explicit Batches(int n) {
    std::mt19937 rng(11);
    for (int i = 0; i < n; ++i) {
      xs.push_back(random_tensor({64, 784}, rng, 1.0f));
      ys.push_back(random_tensor({64, 10}, rng, 1.0f));
    }
  }
};

bool same_bits(const af::Tensor& a, const af::Tensor& b) { return a.equals(b); }

// Where the training steps ran: by the run path on the caller's thread, or on the plan's
// node actors (whose turns the caller's thread may take too while it waits).
struct Trained {
  std::vector<af::Tensor> losses, vars;
  int64_t on_caller = 0, on_actors = 0;
};

// Runs `steps` training steps on a fresh session (every `deadline_every`-th with a
// deadline when > 0) and reads the variables after.
Trained train(Mlp& m, const Batches& data, int steps, const af::SessionOptions& opts = {}, int deadline_every = 0) {
  auto sess = af::Session::create(m.g, opts).value();
  REQUIRE(sess.run_init().ok());
  Trained out;
  const int64_t before = af::runtime::steps_on_actors();
  for (int s = 0; s < steps; ++s) {
    af::RunOptions ro;
    if (deadline_every > 0 && s % deadline_every == 0) ro.timeout_ms = 60000;
    const size_t b = static_cast<size_t>(s) % data.xs.size();
    auto r = sess.run(ro, {m.rec}, {{m.x, data.xs[b]}, {m.y, data.ys[b]}}, {m.train});
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    out.losses.push_back((*r)[0]);
  }
  out.on_actors = af::runtime::steps_on_actors() - before;
  out.on_caller = steps - out.on_actors;
  std::vector<af::Fetch> fetches(m.vars.begin(), m.vars.end());
  auto v = sess.run(fetches);
  REQUIRE(v.ok());
  out.vars = *v;
  return out;
}

void check_same(const Trained& a, const Trained& b) {
  REQUIRE(a.losses.size() == b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i) CHECK(same_bits(a.losses[i], b.losses[i]));
  REQUIRE(a.vars.size() == b.vars.size());
  for (size_t i = 0; i < a.vars.size(); ++i) CHECK(same_bits(a.vars[i], b.vars[i]));
}

}  // namespace

TEST_CASE("an MLP's training step runs on the caller's thread with the actors' values, bit for bit") {
  Mlp m;
  Batches data(2);
  Trained actors;
  {
    ScopedRunPath off(kTrainingOff);
    actors = train(m, data, 12);
  }
  CHECK(actors.on_caller == 0);
  CHECK(actors.on_actors == 12);
  Trained here = train(m, data, 12);
  CHECK(here.on_caller == 12);
  CHECK(here.on_actors == 0);
  check_same(actors, here);
  // The loss on the first batch falls: the updates land.
  CHECK(here.losses[10].item<float>() < here.losses[0].item<float>());

  // Steps with a deadline run on the actors, interleaved with the caller's: the same values.
  Trained mixed = train(m, data, 12, {}, 3);
  CHECK(mixed.on_actors == 4);
  CHECK(mixed.on_caller == 8);
  check_same(actors, mixed);

  // The session option and the process switch each turn it off.
  af::SessionOptions apart;
  apart.optimizer.caller_runs_small_steps = false;
  Trained opt_off = train(m, data, 4, apart);
  CHECK(opt_off.on_caller == 0);
  {
    ScopedRunPath serial_off(RunPath{true, true, false, true});
    Trained process_off = train(m, data, 4);
    CHECK(process_off.on_caller == 0);
  }
}

TEST_CASE("a training step with independent heavy branches stays on the actors") {
  Mlp towers(2);  // two 784x256 first layers side by side: half the work could overlap
  Batches data(3);
  Trained t = train(towers, data, 3);
  CHECK(t.on_caller == 0);
  CHECK(t.on_actors == 3);
}

TEST_CASE("the sample's CNN training step stays on the actors: input and filter gradients side by side") {
  af::Graph g;
  std::mt19937 rng(5);
  auto x = af::placeholder(g, af::f32, {-1, 28, 28, 1}, "x");
  auto y = af::placeholder(g, af::f32, {-1, 10}, "y");
  auto c1 = af::max_pool2d(af::relu(af::conv2d(x, af::variable(g, random_tensor({5, 5, 1, 32}, rng, 0.1f), "k1"))),
                           {2, 2}, {2, 2});
  auto c2 = af::max_pool2d(af::relu(af::conv2d(c1, af::variable(g, random_tensor({5, 5, 32, 64}, rng, 0.05f), "k2"))),
                           {2, 2}, {2, 2});
  auto flat = af::reshape(c2, {-1, 7 * 7 * 64});
  auto h = af::relu(af::matmul(flat, af::variable(g, random_tensor({7 * 7 * 64, 1024}, rng, 0.01f), "w1")));
  auto logits = af::matmul(h, af::variable(g, random_tensor({1024, 10}, rng, 0.05f), "w2"));
  auto loss = af::reduce_mean(af::square(logits - y));
  auto rec = unary(g, "TestTrainRecord", loss, "rec");
  auto train = af::optim::GradientDescent(0.01).minimize(loss);
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  const int64_t before = af::runtime::steps_on_actors();
  auto r = sess.run({rec}, {{x, random_tensor({2, 28, 28, 1}, rng, 1.0f)}, {y, random_tensor({2, 10}, rng, 1.0f)}}, {train});
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  CHECK(af::runtime::steps_on_actors() - before == 1);
}

TEST_CASE("concurrent callers each run their own stateful steps: every update lands once") {
  af::Graph g;
  auto v = af::variable(g, af::zeros(g, {2}), "v");
  auto x = af::placeholder(g, af::f32, {2}, "x");
  auto inc = af::assign_add(v, unary(g, "TestTrainRecord", x, "rec"));
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  auto step = sess.make_callable({inc}, {x}).value();
  g_on_caller = 0;
  g_elsewhere = 0;
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      t_caller = true;
      for (int i = 0; i < 250; ++i)
        if (!step({af::Tensor::from_vector<float>({1, 2}, {2})}).ok()) ++failed;
    });
  for (auto& th : threads) th.join();
  CHECK(failed.load() == 0);
  CHECK(g_on_caller.load() == 1000);
  CHECK(g_elsewhere.load() == 0);
  auto out = sess.run({v});
  REQUIRE(out.ok());
  CHECK((*out)[0].to_vector<float>() == std::vector<float>{1000, 2000});
}

TEST_CASE("an error in a training step on the caller's thread names the node and skips the updates after it") {
  af::Graph g;
  auto v = af::variable(g, af::zeros(g, {2}), "v");
  auto x = af::placeholder(g, af::f32, {2}, "x");
  auto inc = af::assign_add(v, unary(g, "TestTrainFail", unary(g, "TestTrainRecord", x, "rec"), "fail_here"));
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  auto feed = af::FeedDict{{x, af::Tensor::from_vector<float>({1, 2}, {2})}};
  t_caller = true;
  g_on_caller = 0;
  REQUIRE(sess.run({inc}, feed).ok());
  g_fail = true;
  auto bad = sess.run({inc}, feed);
  g_fail = false;
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("fail_here") != std::string::npos);
  CHECK(bad.status().message().find("asked to fail") != std::string::npos);
  REQUIRE(sess.run({inc}, feed).ok());
  CHECK(g_on_caller.load() == 3);
  t_caller = false;
  auto out = sess.run({v});
  REQUIRE(out.ok());
  CHECK((*out)[0].to_vector<float>() == std::vector<float>{2, 4});  // the failed step added nothing
}

TEST_CASE("close() during a training step on the caller's thread: no kernel runs after it, the step fails cleanly") {
  af::Graph g;
  auto v = af::variable(g, af::zeros(g, {2}), "v");
  auto x = af::placeholder(g, af::f32, {2}, "x");
  // sleep -> record -> assign_add: close() lands during the sleep.
  auto inc = af::assign_add(v, unary(g, "TestTrainRecord", unary(g, "TestTrainSleep", x, "sleep"), "rec"));
  auto sess = af::Session::create(g).value();
  REQUIRE(sess.run_init().ok());
  auto feed = af::FeedDict{{x, af::Tensor::from_vector<float>({1, 2}, {2})}};
  g_sleep_ms = 0;
  t_caller = true;
  g_on_caller = 0;
  REQUIRE(sess.run({inc}, feed).ok());
  REQUIRE(g_on_caller.load() == 1);
  g_sleep_ms = 300;
  std::optional<af::Result<std::vector<af::Tensor>>> during;
  g_sleeping = false;
  g_slept = false;
  std::thread caller([&] {
    t_caller = true;
    during = sess.run({inc}, feed);
  });
  // close() once the step is inside its sleep (however loaded the machine is).
  for (int i = 0; i < 10000 && !g_sleeping.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(g_sleeping.load());
  REQUIRE(sess.close().ok());
  // close() waited for the kernel inside its sleep, as it waits for kernels in actors
  // (the kernel's own flag, not a clock: on a loaded machine this thread may see the
  // sleep begin late).
  CHECK(g_slept.load());
  caller.join();
  g_sleep_ms = 0;
  REQUIRE(during.has_value());
  REQUIRE_FALSE(during->ok());
  CHECK(during->status().code() == af::Code::cancelled);
  CHECK(g_on_caller.load() == 1);  // the recorder after the sleep never ran
  t_caller = false;
}
