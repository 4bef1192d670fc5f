// CPU kernels of _CopyToDevice and _CopyToHost: a copy node that soft placement puts on
// the host (its GPU is missing, or the build has no CUDA) has nothing to move, so the
// value passes through and a graph written with copies still runs. A GPU tensor reaching
// the host's kernel is a placement error, reported rather than read as host memory.
#include "actorflow/kernel.h"

namespace actorflow {
namespace {

class HostCopyKernel final : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    if (in.valid() && in.device().type != DeviceType::CPU)
      return ctx.fail("the CPU kernel got a tensor on " + in.device().to_string() +
                      ": the copy must run on that device");
    ctx.set_output(0, in);
  }
};

AF_REGISTER_KERNEL("_CopyToDevice", DeviceType::CPU, HostCopyKernel);
AF_REGISTER_KERNEL("_CopyToHost", DeviceType::CPU, HostCopyKernel);

}  // namespace
}  // namespace actorflow
