// The ops of the CUDA module's training kernels, registered for the GPU like
// kGpuKernelOps (gpu_module.h): gpu_module_loader.cpp offers both lists.
#pragma once

namespace actorflow::gpu {

inline constexpr const char* kGpuTrainingKernelOps[] = {
    // gpu_training.cpp
    "SparseSoftmaxCrossEntropyWithLogits", "SoftmaxCrossEntropyWithLogits", "BiasAddGrad", "Greater", "GreaterEqual",
    "Less", "LessEqual", "Select", "BroadcastReduced", "SumToShapeOf", "Cast", "ZerosLike", "OnesLike", "ApplyGradientDescent",
    "ApplyMomentum", "ApplyAdagrad", "ApplyAdadelta", "ApplyRMSProp", "ApplyAdam", "ApplyFtrl",
    // gpu_host_kernels.cpp
    "Identity", "StopGradient", "Reshape", "ExpandDims", "Squeeze", "NoOp", "VariableV2", "ReadVariable", "Assign",
    "Fill", "RandomNormal", "RandomUniform", "TruncatedNormal",
};

}  // namespace actorflow::gpu
