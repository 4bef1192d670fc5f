// Builds without CUDA: there is no GPU to offer.
#ifndef AF_WITH_CUDA
#include "actorflow/ops/cuda_info.h"

namespace actorflow {

bool built_with_cuda() { return false; }
bool cuda_module_loaded() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_device_name(int) { return "none"; }
Status cuda_self_test(int) { return Status(Code::unavailable, "ActorFlow was built without CUDA (AF_WITH_CUDA=OFF)"); }

}  // namespace actorflow
#endif
