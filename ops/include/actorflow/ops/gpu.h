// GPUs as the rest of the engine sees them, without CUDA's headers: one device per GPU
// (a compute stream, a host-to-device and a device-to-host copy stream, a stream-ordered
// memory pool, a pinned host pool) and one process-wide poller thread that turns finished
// CUDA events into callbacks, so that no scheduler thread waits on a stream. The device
// and its allocator live as long as the process: device tensors may outlive any session.
// Builds without CUDA compile this API and report every GPU as unavailable.
//
// GPU kernels (ops/cuda) are AsyncOpKernels registered for DeviceType::GPU; they expect
// a DeviceContext from gpu_device_context(), inputs in that GPU's memory, and produce
// outputs there. _CopyToDevice and _CopyToHost (ops/defs/copy_ops.cpp) move tensors
// across, on the copy streams.
#pragma once
#include "actorflow/api.h"
#include <chrono>

#include "actorflow/kernel.h"
#include "actorflow/status.h"
#include "actorflow/tensor.h"

AF_PUBLIC_BEGIN

namespace actorflow {

// The context that GPU kernels of GPU `index` run with; its allocator() hands out that
// GPU's memory. Created on first use (streams, pool, cuBLASLt handle); unavailable
// without CUDA, without a driver, or past the last device.
Result<DeviceContext*> gpu_device_context(int index);

struct GpuMemoryStats {
  int64_t bytes_in_use = 0;
  int64_t peak_bytes_in_use = 0;
  int64_t pinned_bytes_cached = 0;
};
Result<GpuMemoryStats> gpu_memory_stats(int index);

// Blocking copies for feeds, fetches and tests: they wait for the copy stream, at most
// `timeout`, and never run on a scheduler thread of the runtime. The runtime's copies
// are the _CopyToDevice/_CopyToHost kernels, which do not block.
Result<Tensor> copy_to_gpu(const Tensor& host, int index,
                           std::chrono::milliseconds timeout = std::chrono::seconds(60));
Result<Tensor> copy_to_host(const Tensor& on_gpu, std::chrono::milliseconds timeout = std::chrono::seconds(60));

// Runs a kernel (sync or async) on `device` until it is done, waiting at most `timeout`:
// tests and tools that run kernels outside a session. A GPU kernel on the compute stream
// is done once queued; copy_to_host of its outputs waits for the stream. On timeout the context must stay
// alive (the kernel may still finish), so it is leaked and the status says so.
Status run_kernel_blocking(OpKernel& kernel, OpKernelContext& ctx,
                           std::chrono::milliseconds timeout = std::chrono::seconds(60));

}  // namespace actorflow

AF_PUBLIC_END
