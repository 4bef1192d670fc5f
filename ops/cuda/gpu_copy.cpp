// The copy kernels: host -> GPU on the host-to-device stream, GPU -> host on the
// device-to-host stream, both through pinned memory so that cudaMemcpyAsync is truly
// asynchronous. Ordering with the compute stream goes through events, never the host.
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "cuda/gpu_runtime.h"

namespace actorflow::gpu {
namespace {

Status check_copyable(const Tensor& t) {
  if (!t.valid()) return invalid_argument("cannot copy an empty Tensor");
  if (t.dtype() == DType::string) return unimplemented("string tensors cannot live on a GPU");
  return Status::OK();
}

struct PinnedBlock {
  PinnedPool* pool;
  void* data;
  size_t bytes;
};

void release_pinned(void*, void* arg) {
  auto* b = static_cast<PinnedBlock*>(arg);
  b->pool->deallocate(b->data, b->bytes);
  delete b;
}

// Stages `host` in pinned memory and queues its copy into a fresh device tensor. The
// staging block goes back to the pool from the returned release callback, which the
// caller runs once the copy stream has passed the copy.
Result<Tensor> enqueue_to_device(const Tensor& host, GpuDevice& d, std::function<void()>* release) {
  AF_RETURN_IF_ERROR(check_copyable(host));
  if (host.device().type != DeviceType::CPU)
    return invalid_argument("_CopyToDevice takes a host tensor, got one on " + host.device().to_string());
  AF_RETURN_IF_ERROR(d.activate());
  Tensor out(host.dtype(), host.shape(), d.allocator());
  const size_t n = host.bytes();
  if (n == 0) return out;
  size_t block = 0;
  void* staging = d.pinned().allocate(n, &block);
  if (!staging) return resource_exhausted("no pinned host memory for a " + std::to_string(n) + "-byte copy");
  *release = [&d, staging, block] { d.pinned().deallocate(staging, block); };
  std::memcpy(staging, host.raw_data(), n);
  // The block was allocated in the compute stream's order.
  AF_RETURN_IF_ERROR(d.order_after(d.h2d(), d.compute()));
  AF_CUDA_RETURN(cudaMemcpyAsync(out.raw_data(), staging, n, cudaMemcpyHostToDevice, d.h2d()), "cudaMemcpyAsync (to GPU)");
  return out;
}

// Queues the copy of `dev_tensor` into a host tensor backed by pinned memory, so that
// the host needs no second copy once the stream is done.
Result<Tensor> enqueue_to_host(const Tensor& dev_tensor, GpuDevice& d) {
  AF_RETURN_IF_ERROR(check_copyable(dev_tensor));
  if (dev_tensor.device().type != DeviceType::GPU || dev_tensor.device().index != d.index())
    return invalid_argument("_CopyToHost on gpu:" + std::to_string(d.index()) + " got a tensor on " +
                            dev_tensor.device().to_string());
  AF_RETURN_IF_ERROR(d.activate());
  const size_t n = dev_tensor.bytes();
  if (n == 0) return Tensor(dev_tensor.dtype(), dev_tensor.shape());
  size_t block = 0;
  void* p = d.pinned().allocate(n, &block);
  if (!p) return resource_exhausted("no pinned host memory for a " + std::to_string(n) + "-byte copy");
  auto buf = std::make_shared<Buffer>(p, n, DeviceId{DeviceType::CPU, 0}, &release_pinned,
                                      new PinnedBlock{&d.pinned(), p, block});
  Tensor out(dev_tensor.dtype(), dev_tensor.shape(), std::move(buf));
  // The producer of the value ran on the compute stream.
  AF_RETURN_IF_ERROR(d.order_after(d.d2h(), d.compute()));
  AF_CUDA_RETURN(cudaMemcpyAsync(out.raw_data(), dev_tensor.raw_data(), n, cudaMemcpyDeviceToHost, d.d2h()),
                 "cudaMemcpyAsync (to host)");
  return out;
}

class CopyToDeviceKernel final : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void compute_async(OpKernelContext& ctx, DoneCallback done) override {
    Result<GpuDevice*> dev = device_of(ctx);
    if (!dev.ok()) {
      ctx.fail(dev.status());
      return done();
    }
    GpuDevice& d = **dev;
    std::function<void()> release;
    Result<Tensor> out = Status(Code::internal, "not enqueued");
    try {
      out = enqueue_to_device(ctx.input(0), d, &release);
    } catch (...) {
      out = status_from_current_exception();
    }
    if (!out.ok()) ctx.fail(out.status());
    else ctx.set_output(0, std::move(*out));
    // Consumers on the compute stream must see the copy: they are ordered after it
    // here, on the device, so the kernel is done at once (the host's tensor is already
    // in the staging block); the block goes back once the copy stream has passed it.
    if (out.ok()) {
      Status s = d.order_after(d.compute(), d.h2d());
      if (!s.ok()) ctx.fail(s);
    }
    if (ctx.ok()) {
      d.when_done(d.h2d(), [release = std::move(release)](Status) {
        if (release) release();
      });
      return done();
    }
    d.when_done(d.h2d(), [&ctx, release = std::move(release), done = std::move(done)](Status s) {
      if (release) release();
      if (!s.ok()) ctx.fail(s);
      done();
    });
  }
};

class CopyToHostKernel final : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void compute_async(OpKernelContext& ctx, DoneCallback done) override {
    Result<GpuDevice*> dev = device_of(ctx);
    if (!dev.ok()) {
      ctx.fail(dev.status());
      return done();
    }
    GpuDevice& d = **dev;
    Result<Tensor> out = Status(Code::internal, "not enqueued");
    try {
      out = enqueue_to_host(ctx.input(0), d);
    } catch (...) {
      out = status_from_current_exception();
    }
    if (!out.ok()) ctx.fail(out.status());
    else ctx.set_output(0, std::move(*out));
    // The host may read the output only after the poller has seen the copy finish.
    d.when_done(d.d2h(), [&ctx, done = std::move(done)](Status s) {
      if (!s.ok()) ctx.fail(s);
      done();
    });
  }
};

AF_REGISTER_GPU_KERNEL("_CopyToDevice", CopyToDeviceKernel);
AF_REGISTER_GPU_KERNEL("_CopyToHost", CopyToHostKernel);

}  // namespace
}  // namespace actorflow::gpu
