// CPU kernels of the collective ops (ops/defs/collective_ops.cpp). Async: the session's
// CollectiveGroup runs the reduction on its own thread and calls back, so a bucket
// waiting for the other processes holds no scheduler thread and the backward pass goes on.
#include <algorithm>

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

// The outputs as consecutive pieces of one buffer, each starting 64-byte aligned as every
// tensor does: a group can then reduce that buffer in place (the bucket copied into it
// once) instead of copying the bucket into a buffer of its own and back out.
void allocate_fused_outputs(OpKernelContext& ctx, std::vector<Tensor>* in, std::vector<Tensor>* out) {
  constexpr size_t kAlign = 64;
  auto padded = [](size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; };
  size_t total = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) total += padded(ctx.input(i).bytes());
  auto buffer = std::make_shared<Buffer>(ctx.device() ? ctx.device()->allocator() : cpu_allocator(),
                                         std::max(total, kAlign));
  size_t at = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    in->push_back(t);
    ctx.set_output(i, Tensor(t.dtype(), t.shape(), buffer, at));
    out->push_back(ctx.output(i));
    at += padded(t.bytes());
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
    allocate_fused_outputs(ctx, &in, &out);
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
