// Builds without CUDA: the GPU API exists and reports that there is no GPU.
#ifndef AF_WITH_CUDA
#include "actorflow/ops/gpu.h"
#include "actorflow/ops/nccl_group.h"

namespace actorflow {
namespace {
Status no_cuda() { return Status(Code::unavailable, "ActorFlow was built without CUDA (AF_WITH_CUDA=OFF)"); }
}  // namespace

Result<DeviceContext*> gpu_device_context(int) { return no_cuda(); }
Result<GpuMemoryStats> gpu_memory_stats(int) { return no_cuda(); }
Result<std::shared_ptr<NcclGroup>> nccl_group(std::shared_ptr<CollectiveGroup>, const NcclGroupOptions&) { return no_cuda(); }

}  // namespace actorflow
#endif
