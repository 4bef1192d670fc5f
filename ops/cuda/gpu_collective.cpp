// GPU kernels of the collective ops (ops/defs/collective_ops.cpp): the outputs are
// allocated on the GPU and the session's NcclGroup reduces or broadcasts into them on the
// compute stream; the kernel is done when that work is (the group's timeout bounds it).
// A session whose group reduces host tensors only (a Gloo group) cannot run them.
#include "actorflow/ops/nccl_group.h"
#include "actorflow/resource_mgr.h"
#include "cuda/gpu_runtime.h"

namespace actorflow::gpu {
namespace {

std::shared_ptr<NcclGroup> nccl_group_of(OpKernelContext& ctx) {
  auto found = ctx.resources() ? ctx.resources()->find_resource(kCollectiveGroupResource) : nullptr;
  auto g = std::dynamic_pointer_cast<NcclGroup>(found);
  if (!g)
    ctx.fail(failed_precondition(
        found ? "this session's collective group reduces host tensors only: a collective op on a GPU needs an NCCL "
                "group (nccl_group in actorflow/ops/nccl_group.h) as SessionOptions::collective_group"
              : "this session has no collective group (SessionOptions::collective_group): collective ops run in "
                "all-reduce training's in-process sessions only"));
  return g;
}

// Starts `op` with the inputs and their outputs, allocated on this GPU like the inputs.
template <typename Op>
void start(OpKernelContext& ctx, AsyncOpKernel::DoneCallback done, Op op) {
  auto group = nccl_group_of(ctx);
  if (!group) return done();
  std::vector<Tensor> in, out;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    in.push_back(t);
    out.push_back(ctx.allocate_output(i, t.dtype(), t.shape()));
  }
  OpKernelContext* c = &ctx;
  op(*group, std::move(in), std::move(out), [c, done = std::move(done)](Status s) {
    if (!s.ok()) c->fail(s);
    done();
  });
}

class GpuCollectiveAllReduceKernel final : public AsyncOpKernel {
 public:
  explicit GpuCollectiveAllReduceKernel(const Node& n)
      : AsyncOpKernel(n), bucket_(static_cast<int>(n.attr_int("bucket", 0))),
        num_buckets_(static_cast<int>(n.attr_int("num_buckets", 1))), average_(n.attr_bool("average", true)) {}
  void compute_async(OpKernelContext& ctx, DoneCallback done) override {
    start(ctx, std::move(done), [this](NcclGroup& g, std::vector<Tensor> in, std::vector<Tensor> out, CollectiveGroup::Done d) {
      g.all_reduce(std::move(in), std::move(out), bucket_, num_buckets_, average_, std::move(d));
    });
  }

 private:
  int bucket_, num_buckets_;
  bool average_;
};

class GpuCollectiveBroadcastKernel final : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void compute_async(OpKernelContext& ctx, DoneCallback done) override {
    start(ctx, std::move(done), [](NcclGroup& g, std::vector<Tensor> in, std::vector<Tensor> out, CollectiveGroup::Done d) {
      g.broadcast(std::move(in), std::move(out), std::move(d));
    });
  }
};

AF_REGISTER_GPU_KERNEL("CollectiveAllReduce", GpuCollectiveAllReduceKernel);
AF_REGISTER_GPU_KERNEL("CollectiveBroadcast", GpuCollectiveBroadcastKernel);

}  // namespace
}  // namespace actorflow::gpu
