// CPU kernels of the collective ops (ops/defs/collective_ops.cpp). Async: the session's
// CollectiveGroup runs the reduction on its own thread and calls back, so a bucket
// waiting for the other processes holds no scheduler thread and the backward pass goes on.
#include "actorflow/collective.h"
#include "actorflow/kernel.h"
#include "actorflow/resource_mgr.h"

namespace actorflow {
namespace {

std::shared_ptr<CollectiveGroup> group_of(OpKernelContext& ctx) {
  auto g = ctx.resources() ? std::dynamic_pointer_cast<CollectiveGroup>(ctx.resources()->find_resource(kCollectiveGroupResource))
                           : nullptr;
  if (!g)
    ctx.fail(failed_precondition("this session has no collective group (SessionOptions::collective_group): "
                                 "collective ops run in all-reduce training's in-process sessions only"));
  return g;
}

// The outputs, allocated like the inputs.
void allocate_like_inputs(OpKernelContext& ctx, std::vector<Tensor>* in, std::vector<Tensor>* out) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    in->push_back(t);
    out->push_back(ctx.allocate_output(i, t.dtype(), t.shape()));
  }
}

class CollectiveAllReduceKernel final : public AsyncOpKernel {
 public:
  explicit CollectiveAllReduceKernel(const Node& n)
      : AsyncOpKernel(n), bucket_(static_cast<int>(n.attr_int("bucket", 0))),
        num_buckets_(static_cast<int>(n.attr_int("num_buckets", 1))), average_(n.attr_bool("average", true)) {}
  void compute_async(OpKernelContext& ctx, DoneCallback done) override {
    auto group = group_of(ctx);
    if (!group) return done();
    std::vector<Tensor> in, out;
    allocate_like_inputs(ctx, &in, &out);
    OpKernelContext* c = &ctx;
    group->all_reduce(std::move(in), std::move(out), bucket_, num_buckets_, average_, [c, done](Status s) {
      if (!s.ok()) c->fail(s);
      done();
    });
  }

 private:
  int bucket_, num_buckets_;
  bool average_;
};

class CollectiveBroadcastKernel final : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void compute_async(OpKernelContext& ctx, DoneCallback done) override {
    auto group = group_of(ctx);
    if (!group) return done();
    std::vector<Tensor> in, out;
    allocate_like_inputs(ctx, &in, &out);
    OpKernelContext* c = &ctx;
    group->broadcast(std::move(in), std::move(out), [c, done](Status s) {
      if (!s.ok()) c->fail(s);
      done();
    });
  }
};

AF_REGISTER_KERNEL("CollectiveAllReduce", DeviceType::CPU, CollectiveAllReduceKernel);
AF_REGISTER_KERNEL("CollectiveBroadcast", DeviceType::CPU, CollectiveBroadcastKernel);

}  // namespace
}  // namespace actorflow
