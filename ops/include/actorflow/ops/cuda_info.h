// What CUDA this build and this machine offer. Builds without CUDA report no devices.
//
// With CUDA, the GPU device and kernels live in a module of their own,
// libactorflow_cuda.so (beside libactorflow.so), the only part that links CUDA's runtime
// and cuBLASLt. It is loaded on the first question about GPUs (these functions,
// gpu_device_context, creating a GPU kernel) and only where the machine has an NVIDIA
// device node (/dev/nvidiactl, /dev/nvidia0 or WSL's /dev/dxg): a process on a machine
// without a GPU never maps CUDA's libraries. $AF_GPU_MODULE=<path> loads that module file
// without looking for device nodes; $AF_GPU_MODULE=off never loads one (no GPUs).
#pragma once
#include "actorflow/api.h"
#include <string>

#include "actorflow/status.h"

AF_PUBLIC_BEGIN

namespace actorflow {

// True if this library was built with AF_WITH_CUDA.
bool built_with_cuda();
// Number of usable GPUs; 0 without CUDA, without a driver, or without devices
// (cudaGetDeviceCount fails rather than returning 0 where no driver is installed).
int cuda_device_count();
// Name and compute capability of GPU `index`, e.g. "NVIDIA H200 (sm_90)".
std::string cuda_device_name(int index);
// True once this process has loaded the CUDA module (and with it CUDA's libraries).
bool cuda_module_loaded();
// Runs a small kernel on GPU `index` and checks its result: proves the toolchain,
// driver and device work together.
Status cuda_self_test(int index);

}  // namespace actorflow

AF_PUBLIC_END
