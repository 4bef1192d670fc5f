#include "device.h"

#include <actorflow/ops/cuda_info.h>

#include <cstdlib>
#include <iostream>

namespace kit {

namespace af = actorflow;

std::string device_error(const Flags& f, bool distributed) {
  if (f.device != "gpu") return "";
  // All-reduce replicas each hold the whole model on their GPU and reduce with NCCL; a
  // ps cluster would split one model between host and GPU processes.
  if (distributed && f.strategy != "allreduce")
    return "--device gpu in a cluster needs --strategy allreduce (every worker's replica on its GPU, gradients "
           "all-reduced with NCCL); a ps cluster trains on the CPU";
  if (!af::built_with_cuda()) return "--device gpu: no GPU found (this build of ActorFlow has no CUDA support)";
  if (af::cuda_device_count() == 0)
    return "--device gpu: no GPU found (no usable NVIDIA GPU, driver or CUDA 13 library on this machine; "
           "use --device cpu)";
  return "";
}

std::unique_ptr<af::DeviceScope> device_scope(af::Graph& g, const Flags& f, bool distributed) {
  // Exports and inference keep device-free graphs (checkpoints do not record devices).
  if (f.device != "gpu" || f.mode.rfind("train", 0) != 0) return nullptr;
  std::string error = device_error(f, distributed);
  if (!error.empty()) {
    std::cerr << error << "\n";
    std::exit(2);
  }
  return std::make_unique<af::DeviceScope>(g, "/gpu:0");
}

}  // namespace kit
