// The GPU device behind ops/include/actorflow/ops/gpu.h, for the CUDA kernels of this
// folder: streams, the cuBLASLt handle and workspace, the event pool and the poller.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>
#ifdef AF_HAVE_CUDNN
#include <cudnn.h>
#endif

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "actorflow/ops/gpu.h"

namespace actorflow::gpu {

Status cuda_status(cudaError_t e, const char* what);
Status cublas_status(cublasStatus_t s, const char* what);
#ifdef AF_HAVE_CUDNN
Status cudnn_status(cudnnStatus_t s, const char* what);
#define AF_CUDNN_RETURN(expr, what) AF_RETURN_IF_ERROR(::actorflow::gpu::cudnn_status((expr), (what)))
#endif

#define AF_CUDA_RETURN(expr, what) AF_RETURN_IF_ERROR(::actorflow::gpu::cuda_status((expr), (what)))
#define AF_CUBLAS_RETURN(expr, what) AF_RETURN_IF_ERROR(::actorflow::gpu::cublas_status((expr), (what)))

// Page-locked host blocks for the copy streams (cudaMemcpyAsync from pageable memory
// would stage through the driver and block the caller). Blocks come in power-of-two
// size classes and are kept for reuse up to a cap.
class PinnedPool {
 public:
  explicit PinnedPool(size_t cache_cap_bytes) : cap_(cache_cap_bytes) {}
  // nullptr when page-locked memory is exhausted.
  void* allocate(size_t bytes, size_t* block_bytes);
  void deallocate(void* p, size_t block_bytes);
  int64_t bytes_cached() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<size_t, void*>> free_;  // (block size, block)
  size_t cached_ = 0;
  size_t cap_;
};

class GpuDevice;

// Calls `fn` on the one poller thread once every operation recorded before `event` has
// finished, or with the error that the event reports. `fn` must be short (it runs on the
// thread that serves every GPU) and must not throw. After the deadline without completion
// fn gets deadline_exceeded and the event is abandoned, not reused: the device is hung.
// The deadline is the caller's (a collective's timeout) or, when none is given, the
// poller's own (AF_GPU_WATCH_TIMEOUT_S).
void watch_event(GpuDevice* device, cudaEvent_t event, std::function<void(Status)> fn,
                 std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

class GpuDevice {
 public:
  static Result<GpuDevice*> get(int index);

  int index() const { return index_; }
  DeviceContext* context() const { return context_.get(); }
  Allocator* allocator() const { return allocator_.get(); }
  PinnedPool& pinned() { return pinned_; }
  cudaStream_t compute() const { return compute_; }
  cudaStream_t h2d() const { return h2d_; }
  cudaStream_t d2h() const { return d2h_; }
  cublasLtHandle_t lt() const { return lt_; }
  void* lt_workspace() const { return lt_workspace_; }
  size_t lt_workspace_bytes() const { return lt_workspace_bytes_; }
#ifdef AF_HAVE_CUDNN
  // The cuDNN handle of the compute stream, made on first use (an MLP never loads cuDNN's
  // sub-libraries). A handle serves one thread at a time: get it, then hold dnn_mutex()
  // while calling cuDNN with it.
  Result<cudnnHandle_t> dnn();
  std::mutex& dnn_mutex() { return dnn_mu_; }
#endif

  // Makes this GPU current on the calling thread (scheduler threads serve every GPU).
  Status activate() const { return cuda_status(cudaSetDevice(index_), "cudaSetDevice"); }
  // Records an event on `stream` and has the poller call fn when the work before it is
  // done, or with deadline_exceeded past `deadline` (watch_event's). If the event cannot
  // be recorded fn is called here, with the error.
  void when_done(cudaStream_t stream, std::function<void(Status)> fn,
                 std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);
  // Makes `waiter` wait (on the device, not the host) for the work queued on `producer`.
  Status order_after(cudaStream_t waiter, cudaStream_t producer);

  Result<cudaEvent_t> take_event();
  void return_event(cudaEvent_t e);

 private:
  GpuDevice() : pinned_(256u << 20) {}
  Status init(int index);

  int index_ = -1;
  cudaStream_t compute_ = nullptr, h2d_ = nullptr, d2h_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* lt_workspace_ = nullptr;
  size_t lt_workspace_bytes_ = 0;
#ifdef AF_HAVE_CUDNN
  std::mutex dnn_mu_, dnn_init_mu_;
  cudnnHandle_t dnn_ = nullptr;
#endif
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<DeviceContext> context_;
  PinnedPool pinned_;
  std::mutex events_mu_;
  std::vector<cudaEvent_t> events_;
};

// The device of a kernel's context, or an error naming the context's device.
Result<GpuDevice*> device_of(const OpKernelContext& ctx);

// Base of the GPU kernels: enqueue() queues work on the device's streams and sets the
// outputs. Work on the compute stream finishes the kernel as soon as it is queued (later
// work is ordered after it there); work on another stream finishes it when the poller
// sees that work done. Errors of enqueue() and of the device come back through ctx.fail,
// which names the node and op.
class GpuOpKernel : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void compute_async(OpKernelContext& ctx, DoneCallback done) final;

 protected:
  // Returns the stream whose completion finishes the kernel (usually compute()).
  virtual Result<cudaStream_t> enqueue(OpKernelContext& ctx, GpuDevice& dev) = 0;
};

// The module's kernel table (gpu_module.cpp), which libactorflow reads through
// af_gpu_module(): the module never writes to the process's KernelRegistry, where
// libactorflow has registered a forwarding factory for each op of kGpuKernelOps.
void register_module_kernel(const std::string& op, KernelFactory factory);
struct ModuleKernelRegistrar {
  ModuleKernelRegistrar(const char* op, KernelFactory factory) { register_module_kernel(op, std::move(factory)); }
};

// Fails unless every input is float32 and on `dev`'s GPU (the first kernels are f32 only).
Status check_f32_inputs(const OpKernelContext& ctx, const GpuDevice& dev, int count);

}  // namespace actorflow::gpu

// AF_REGISTER_KERNEL(op, DeviceType::GPU, Class) for the module (see above).
#define AF_REGISTER_GPU_KERNEL(op, Class)                                                                     \
  static ::actorflow::gpu::ModuleKernelRegistrar AF_CONCAT(af_gpu_kernel_registrar_, __COUNTER__)(              \
      op, [](const ::actorflow::Node& n) -> ::actorflow::Result<std::unique_ptr<::actorflow::OpKernel>> { \
        return std::unique_ptr<::actorflow::OpKernel>(new Class(n));                                        \
      })
