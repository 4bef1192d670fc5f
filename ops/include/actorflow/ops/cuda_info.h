// What CUDA this build and this machine offer. Builds without CUDA report no devices.
#pragma once
#include <string>

#include "actorflow/status.h"

namespace actorflow {

// True if this library was built with AF_WITH_CUDA.
bool built_with_cuda();
// Number of usable GPUs; 0 without CUDA, without a driver, or without devices
// (cudaGetDeviceCount fails rather than returning 0 where no driver is installed).
int cuda_device_count();
// Name and compute capability of GPU `index`, e.g. "NVIDIA H200 (sm_90)".
std::string cuda_device_name(int index);
// Runs a small kernel on GPU `index` and checks its result: proves the toolchain,
// driver and device work together.
Status cuda_self_test(int index);

}  // namespace actorflow
