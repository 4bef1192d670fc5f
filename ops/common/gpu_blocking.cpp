// Blocking front ends of the GPU API (ops/include/actorflow/ops/gpu.h): they run the
// copy kernels like any other kernel and wait with a deadline, so that tests and feeds
// take the same path as the runtime's copy nodes. Built with or without CUDA: without,
// gpu_device_context() reports that there is no GPU.
#include <condition_variable>
#include <memory>
#include <mutex>

#include "actorflow/ops/gpu.h"

namespace actorflow {

Status run_kernel_blocking(OpKernel& kernel, OpKernelContext& ctx, std::chrono::milliseconds timeout) {
  AsyncOpKernel* async = kernel.as_async();
  if (!async) {
    try {
      kernel.compute(ctx);
    } catch (...) {
      ctx.fail(status_from_current_exception());
    }
    return ctx.status();
  }
  // Shared with the callback: a late `done` after a timeout must not touch this frame.
  struct Wait {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto w = std::make_shared<Wait>();
  try {
    async->compute_async(ctx, [w] {
      std::lock_guard<std::mutex> lock(w->mu);
      w->done = true;
      w->cv.notify_all();
    });
  } catch (...) {
    ctx.fail(status_from_current_exception());
    return ctx.status();
  }
  std::unique_lock<std::mutex> lock(w->mu);
  if (!w->cv.wait_for(lock, timeout, [&] { return w->done; }))
    return deadline_exceeded("kernel '" + kernel.name() + "' (" + kernel.op() + ") did not finish within " +
                             std::to_string(timeout.count()) + " ms");
  return ctx.status();
}

namespace {

Result<Tensor> run_copy(const char* op, const Tensor& in, int index, std::chrono::milliseconds timeout) {
  AF_ASSIGN_OR_RETURN(DeviceContext * dev, gpu_device_context(index));
  auto n = std::make_unique<Node>();
  n->name = op;
  n->op = op;
  n->output_dtypes = {in.dtype()};
  n->output_shapes = {in.shape()};
  AF_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> k, KernelRegistry::global().create(*n, DeviceType::GPU));
  auto ctx = std::make_unique<OpKernelContext>(*n, std::vector<Tensor>{in}, dev, nullptr, 0);
  Status s = run_kernel_blocking(*k, *ctx, timeout);
  if (s.code() == Code::deadline_exceeded) {
    // The copy may still complete into them: leak rather than free under it.
    (void)n.release();
    (void)k.release();
    (void)ctx.release();
  }
  AF_RETURN_IF_ERROR(s);
  return ctx->output(0);
}

}  // namespace

Result<Tensor> copy_to_gpu(const Tensor& host, int index, std::chrono::milliseconds timeout) {
  return run_copy("_CopyToDevice", host, index, timeout);
}

Result<Tensor> copy_to_host(const Tensor& on_gpu, std::chrono::milliseconds timeout) {
  if (on_gpu.device().type != DeviceType::GPU)
    return invalid_argument("copy_to_host: the tensor is on " + on_gpu.device().to_string() + ", not a GPU");
  return run_copy("_CopyToHost", on_gpu, on_gpu.device().index, timeout);
}

}  // namespace actorflow
