// The GPU module: with CUDA, the GPU device and its kernels (ops/cuda) are built as a
// shared module of their own, libactorflow_cuda.so, beside libactorflow.so, and only that
// module links CUDA's runtime and cuBLASLt. libactorflow loads it (dlopen) the first time
// a GPU is asked for and the machine has an NVIDIA device node, so a process without a
// GPU never maps or touches CUDA's libraries (libcublasLt alone is ~120 MB of pages).
//
// This header is the one contract between the two sides (same compiler, same build):
// libactorflow (ops/common/gpu_module_loader.cpp) registers a forwarding kernel factory
// for every op of kGpuKernelOps, and the module (ops/cuda/gpu_module.cpp) answers
// af_gpu_module() with the table below.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "actorflow/kernel.h"
#include "actorflow/ops/gpu.h"
#include "actorflow/ops/nccl_group.h"
#include "actorflow/status.h"

namespace actorflow::gpu {

// Bumped whenever GpuModule changes: a module of another build is refused.
inline constexpr int kGpuModuleAbi = 2;

// The file libactorflow loads; $AF_GPU_MODULE names another (a path), or "off" for none.
inline constexpr const char* kGpuModuleFile = "libactorflow_cuda.so";

// The ops with a GPU kernel in the module. The kernel registry answers has(op, GPU) for
// these without loading anything (soft placement asks it for graphs of any machine).
inline constexpr const char* kGpuKernelOps[] = {
    "_CopyToDevice", "_CopyToHost",                                                     // gpu_copy.cpp
    "Neg", "Abs", "Sign", "Square", "Relu", "Exp", "Log", "Sqrt", "Rsqrt", "Sigmoid",  // gpu_kernels.cpp
    "Tanh", "Softplus", "Add", "Sub", "Mul", "Div", "Pow", "Maximum", "Minimum", "SquaredDifference",
    "BiasAdd", "Sum", "Mean",
    "MatMul", "_FusedMatMul",  // gpu_matmul.cpp
    "CollectiveAllReduce", "CollectiveBroadcast",  // gpu_collective.cpp (NCCL, gpu_nccl.cpp)
#ifdef AF_HAVE_CUDNN
    // Built only where cuDNN was found (CMake says so when it is not).
    "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter",       // gpu_cudnn_conv.cpp
    "MaxPool", "AvgPool", "MaxPoolGrad", "AvgPoolGrad",            // gpu_cudnn_pool.cpp
    "FusedBatchNorm", "FusedBatchNormGrad",                        // gpu_cudnn_batchnorm.cpp
    "Dropout",                                                     // gpu_cudnn_dropout.cpp
#endif
};

struct GpuModule {
  int abi = kGpuModuleAbi;
  int (*device_count)() = nullptr;
  std::string (*device_name)(int index) = nullptr;
  Status (*self_test)(int index) = nullptr;
  Result<DeviceContext*> (*device_context)(int index) = nullptr;
  Result<GpuMemoryStats> (*memory_stats)(int index) = nullptr;
  // not_found for an op the module has no kernel for.
  Result<std::unique_ptr<OpKernel>> (*create_kernel)(const Node& node) = nullptr;
  std::vector<std::string> (*kernel_ops)() = nullptr;
  Result<std::shared_ptr<NcclGroup>> (*nccl_group)(std::shared_ptr<CollectiveGroup> host,
                                                   const NcclGroupOptions& options) = nullptr;
};

// The loaded module, or nullptr with the reason in *why (no GPU device on this machine,
// CUDA's libraries not found, ...). Loads it on the first call; thread-safe.
const GpuModule* gpu_module(std::string* why = nullptr);

}  // namespace actorflow::gpu

// Exported by libactorflow_cuda.so.
extern "C" const actorflow::gpu::GpuModule* af_gpu_module();
