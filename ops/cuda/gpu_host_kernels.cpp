// GPU kernels whose work is on the host:
//  - ops that only move a tensor handle (Identity, StopGradient, Reshape, ExpandDims,
//    Squeeze share the input's buffer; NoOp) and the state ops of a variable placed on a
//    GPU (VariableV2 and ReadVariable hand out its value, Assign stores a device tensor):
//    their CPU kernels are device-agnostic, so the GPU kernel runs the same code, and
//    the tensors stay in device memory;
//  - initializers (Fill, RandomNormal, RandomUniform, TruncatedNormal): computed by the
//    CPU kernel, so the GPU gets the very values (the same Philox streams) of the host,
//    then uploaded on the compute stream. They run once per variable, at init.
#include <cstring>
#include <mutex>

#include "actorflow/ops/cpu_device.h"
#include "cuda/gpu_runtime.h"

namespace actorflow::gpu {
namespace {

Result<std::unique_ptr<OpKernel>> cpu_kernel(const Node& n) { return KernelRegistry::global().create(n, DeviceType::CPU); }

class HandleKernel final : public OpKernel {
 public:
  explicit HandleKernel(const Node& n) : OpKernel(n), assign_(n.op == "Assign") {
    auto k = cpu_kernel(n);
    if (k.ok()) cpu_ = std::move(*k);
    else error_ = k.status();
  }
  void compute(OpKernelContext& ctx) override {
    if (!cpu_) return ctx.fail(error_);
    if (assign_) {
      const DeviceContext* d = ctx.device();
      const Tensor& v = ctx.input(0);
      if (!d || !(v.device() == d->id())) {
        ctx.fail(invalid_argument("Assign of a variable on " + (d ? d->id().to_string() : std::string("?")) +
                                  " got a value on " + v.device().to_string()));
        return;
      }
      // A value held elsewhere too (one initializer feeding several variables, a
      // constant) is copied, as the CPU kernel does, but on the device: the CPU kernel's
      // clone would read device memory on the host.
      if (v.buffer_use_count() > 1) return assign_own_copy(ctx);
    }
    cpu_->compute(ctx);
  }

 private:
  void assign_own_copy(OpKernelContext& ctx) {
    Result<GpuDevice*> dev = device_of(ctx);
    if (!dev.ok()) return ctx.fail(dev.status());
    GpuDevice& d = **dev;
    const Tensor& v = ctx.input(0);
    Status s = d.activate();
    Tensor own(v.dtype(), v.shape(), d.allocator());
    // On the compute stream: every later reader of the variable is ordered after it.
    if (s.ok() && v.bytes() > 0)
      s = cuda_status(cudaMemcpyAsync(own.raw_data(), v.raw_data(), v.bytes(), cudaMemcpyDeviceToDevice, d.compute()),
                      "cudaMemcpyAsync (a variable's own copy)");
    if (!s.ok()) return ctx.fail(s);
    OpKernelContext inner(ctx.node(), {std::move(own)}, ctx.device(), ctx.resources(), ctx.step_id());
    cpu_->compute(inner);
    if (!inner.ok()) return ctx.fail(inner.status());
    ctx.set_output(0, std::move(inner.output(0)));
  }

  bool assign_;
  std::unique_ptr<OpKernel> cpu_;
  Status error_;
};

void release_pinned(GpuDevice* d, void* p, size_t block) { d->pinned().deallocate(p, block); }

class HostComputedKernel final : public AsyncOpKernel {
 public:
  explicit HostComputedKernel(const Node& n) : AsyncOpKernel(n), node_(n) {
    auto k = cpu_kernel(n);
    if (k.ok()) cpu_ = std::move(*k);
    else error_ = k.status();
  }
  void compute_async(OpKernelContext& ctx, DoneCallback done) override {
    Result<GpuDevice*> dev = device_of(ctx);
    if (!dev.ok()) {
      ctx.fail(dev.status());
      return done();
    }
    GpuDevice& d = **dev;
    if (!cpu_) {
      ctx.fail(error_);
      return done();
    }
    std::vector<std::pair<void*, size_t>> staging;
    Status s = [&]() -> Status {
      OpKernelContext host(node_, {}, default_cpu_device(), ctx.resources(), ctx.step_id());
      {
        // The random kernels advance their streams: one firing at a time.
        std::lock_guard<std::mutex> lock(mu_);
        cpu_->compute(host);
      }
      AF_RETURN_IF_ERROR(host.status());
      AF_RETURN_IF_ERROR(d.activate());
      for (int i = 0; i < node_.num_outputs(); ++i) {
        const Tensor& t = host.output(i);
        Tensor out(t.dtype(), t.shape(), d.allocator());
        const size_t n = t.bytes();
        if (n > 0) {
          size_t block = 0;
          void* p = d.pinned().allocate(n, &block);
          if (!p) return resource_exhausted("no pinned host memory for a " + std::to_string(n) + "-byte upload");
          staging.emplace_back(p, block);
          std::memcpy(p, t.raw_data(), n);
          AF_CUDA_RETURN(cudaMemcpyAsync(out.raw_data(), p, n, cudaMemcpyHostToDevice, d.compute()),
                         "cudaMemcpyAsync (to GPU)");
        }
        ctx.set_output(i, std::move(out));
      }
      return Status::OK();
    }();
    if (!s.ok()) ctx.fail(s);
    d.when_done(d.compute(), [&ctx, &d, staging = std::move(staging), done = std::move(done)](Status st) {
      for (auto [p, block] : staging) release_pinned(&d, p, block);
      if (!st.ok()) ctx.fail(st);
      done();
    });
  }

 private:
  Node node_;
  std::unique_ptr<OpKernel> cpu_;
  Status error_;
  std::mutex mu_;
};

AF_REGISTER_GPU_KERNEL("Identity", HandleKernel);
AF_REGISTER_GPU_KERNEL("StopGradient", HandleKernel);
AF_REGISTER_GPU_KERNEL("Reshape", HandleKernel);
AF_REGISTER_GPU_KERNEL("ExpandDims", HandleKernel);
AF_REGISTER_GPU_KERNEL("Squeeze", HandleKernel);
AF_REGISTER_GPU_KERNEL("NoOp", HandleKernel);
AF_REGISTER_GPU_KERNEL("VariableV2", HandleKernel);
AF_REGISTER_GPU_KERNEL("ReadVariable", HandleKernel);
AF_REGISTER_GPU_KERNEL("Assign", HandleKernel);

AF_REGISTER_GPU_KERNEL("Fill", HostComputedKernel);
AF_REGISTER_GPU_KERNEL("RandomNormal", HostComputedKernel);
AF_REGISTER_GPU_KERNEL("RandomUniform", HostComputedKernel);
AF_REGISTER_GPU_KERNEL("TruncatedNormal", HostComputedKernel);

}  // namespace
}  // namespace actorflow::gpu
