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

AF_REGISTER_OP("TestRendezvous").inputs(1).shape_fn([](af::ShapeContext& c) {
  c.set_output(0, c.input_dtype(0), c.input_shape(0));
  return af::Status::OK();
});
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
  af::Session sess(g);
  auto out = sess.run({total}, {{x, af::Tensor::scalar(1.0f)}});
  REQUIRE(out.ok());
  CHECK((*out)[0].item<float>() == doctest::Approx(21.0));
  CHECK(rv.max_seen == kWanted);
}
