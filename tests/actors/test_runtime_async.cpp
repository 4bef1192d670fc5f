// Async kernels (the GPU-stream seam): a node actor waiting for its kernel must not hold
// a scheduler thread, so more kernels can be in flight than there are scheduler threads.
#include <doctest/doctest.h>

#include <actorflow/actorflow.h>
#include <actorflow/kernel.h>
#include <actorflow/op_registry.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "test_util.h"

namespace af = actorflow;

namespace {

// Every instance waits (on its own thread) until `kWanted` instances are in flight at
// once, or gives up after a while; it records the largest number seen in flight.
struct Rendezvous {
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0;
  int max_seen = 0;
};
Rendezvous rv;
constexpr int kWanted = 6;

class RendezvousKernel : public af::AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void compute_async(af::OpKernelContext& ctx, DoneCallback done) override {
    af::Tensor in = ctx.input(0);
    std::thread([&ctx, in, done = std::move(done)] {
      {
        std::unique_lock<std::mutex> lock(rv.mu);
        rv.in_flight++;
        rv.max_seen = std::max(rv.max_seen, rv.in_flight);
        rv.cv.notify_all();
        rv.cv.wait_for(lock, std::chrono::seconds(3), [] { return rv.max_seen >= kWanted; });
        rv.in_flight--;
      }
      ctx.set_output(0, in);
      done();
    }).detach();
  }
};

}  // namespace

AF_REGISTER_OP("TestRendezvous").inputs(1).shape_fn(aft::same_shape);
AF_REGISTER_KERNEL("TestRendezvous", af::DeviceType::CPU, RendezvousKernel);

TEST_CASE("async kernels overlap beyond the scheduler's threads") {
  af::Graph g;
  auto x = af::placeholder(g, af::f32, {}, "x");
  std::vector<af::Output> branches;
  for (int i = 0; i < kWanted; ++i) {
    af::NodeSpec spec;
    spec.op = "TestRendezvous";
    spec.inputs = {x * static_cast<double>(i + 1)};
    branches.push_back(g.add_node(spec)->output(0));
  }
  auto total = af::add_n(branches);
  auto sess = af::Session::create(g).value();
  auto out = sess.run({total}, {{x, af::Tensor::scalar(1.0f)}});
  REQUIRE(out.ok());
  CHECK((*out)[0].item<float>() == doctest::Approx(21.0));
  CHECK(rv.max_seen == kWanted);
}

// ---- back-pressure: a producer runs at most K steps ahead of a stalled consumer ----

namespace {

std::atomic<int> producer_fired{0};

class CountingKernel : public af::OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(af::OpKernelContext& ctx) override {
    producer_fired++;
    ctx.set_output(0, ctx.input(0));
  }
};

// Completes only once the gate opens.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
};
Gate gate;

class GatedKernel : public af::AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void compute_async(af::OpKernelContext& ctx, DoneCallback done) override {
    af::Tensor in = ctx.input(0);
    std::thread([&ctx, in, done = std::move(done)] {
      {
        std::unique_lock<std::mutex> lock(gate.mu);
        gate.cv.wait(lock, [] { return gate.open; });
      }
      ctx.set_output(0, in);
      done();
    }).detach();
  }
};

}  // namespace

AF_REGISTER_OP("TestCounting").inputs(1).shape_fn(aft::same_shape);
AF_REGISTER_KERNEL("TestCounting", af::DeviceType::CPU, CountingKernel);
AF_REGISTER_OP("TestGated").inputs(1).shape_fn(aft::same_shape);
AF_REGISTER_KERNEL("TestGated", af::DeviceType::CPU, GatedKernel);

TEST_CASE("credits bound how far a producer runs ahead of a stalled consumer") {
  for (int k : {1, 3}) {
    CAPTURE(k);
    producer_fired = 0;
    {
      std::lock_guard<std::mutex> lock(gate.mu);
      gate.open = false;
    }
    af::Graph g;
    auto x = af::placeholder(g, af::f32, {}, "x");
    af::NodeSpec p{"TestCounting", "producer", {x}, {}, {}};
    auto produced = g.add_node(p)->output(0);
    af::NodeSpec c{"TestGated", "consumer", {produced}, {}, {}};
    auto consumed = g.add_node(c)->output(0);
    af::SessionOptions opts;
    opts.edge_capacity = k;
    auto sess = af::Session::create(g, opts).value();
    constexpr int kSteps = 8;
    std::vector<std::thread> clients;
    std::atomic<int> ok{0};
    for (int i = 0; i < kSteps; ++i)
      clients.emplace_back([&, i] {
        auto out = sess.run({consumed}, {{x, af::Tensor::scalar(static_cast<float>(i))}});
        if (out.ok() && (*out)[0].item<float>() == static_cast<float>(i)) ok++;
      });
    // Give every step time to reach the actors; the producer must stall after k steps:
    // a credit comes back only when the consumer has finished with the tensor.
    for (int spin = 0; spin < 200 && producer_fired.load() < kSteps; ++spin)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    CHECK(producer_fired.load() == k);
    {
      std::lock_guard<std::mutex> lock(gate.mu);
      gate.open = true;
    }
    gate.cv.notify_all();
    for (auto& t : clients) t.join();
    CHECK(ok.load() == kSteps);
    CHECK(producer_fired.load() == kSteps);
  }
}
