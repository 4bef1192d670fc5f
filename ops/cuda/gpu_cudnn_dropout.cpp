// Dropout(x[, training]) -> y, mask on the GPU, f32, drawing the CPU kernel's stream
// (ops/cpu/dropout_kernels.cpp): the same Philox4x32-10 key from (seed, seed2), one block
// per group of 4 elements, a block counter that lives as long as the kernel and starts
// at 0. So a GPU kernel and a CPU kernel of the same node give identical masks run after
// run. (cuDNN's own dropout draws another stream; it is not used.)
//
// The counter lives in device memory and is advanced on the compute stream after each
// draw, so a `training` flag in device memory needs no host read: when it is false,
// y = x, the mask is ones and the counter stays, as on the CPU. A flag in host memory is
// read here and the kernel then sees none.

#include "cpu/random_philox.h"
#include "cuda/gpu_cudnn_common.h"

namespace actorflow::gpu {
namespace {

class DropoutKernel final : public GpuOpKernel {
 public:
  explicit DropoutKernel(const Node& n) : GpuOpKernel(n), keep_prob_(n.attr_float("keep_prob", 0.5)) {
    const rng::PhiloxKey key = rng::philox_key(n.attr_int("seed", 0), n.attr_int("seed2", 0));
    key0_ = key[0];
    key1_ = key[1];
  }

  ~DropoutKernel() override {
    if (counter_) counter_alloc_->deallocate(counter_, sizeof(unsigned long long));
  }

 protected:
  Result<cudaStream_t> enqueue(OpKernelContext& ctx, GpuDevice& d) override {
    AF_RETURN_IF_ERROR(check_f32_inputs(ctx, d, 1));
    if (!(keep_prob_ > 0 && keep_prob_ <= 1)) return invalid_argument("keep_prob must be in (0, 1], got " + std::to_string(keep_prob_));
    const Tensor& x = ctx.input(0);
    const bool* device_flag = nullptr;
    bool training = true;
    if (ctx.num_inputs() == 2) {
      const Tensor& t = ctx.input(1);
      if (t.dtype() != DType::boolean || t.num_elements() != 1)
        return invalid_argument("training must be a bool scalar, got " + t.type_string());
      if (t.device().type == DeviceType::CPU) training = t.item<bool>();
      else if (t.device() == x.device()) device_flag = static_cast<const bool*>(t.raw_data());
      else return invalid_argument("training is on " + t.device().to_string() + ", x on " + x.device().to_string());
    }
    Tensor& mask = ctx.allocate_output(1, DType::f32, x.shape());
    const int64_t n = x.num_elements();
    if (!training || keep_prob_ == 1.0) {
      AF_CUDA_RETURN(launch_fill(static_cast<float*>(mask.raw_data()), 1.f, n, d.compute()), "kernel launch");
      ctx.set_output(0, x);
      return d.compute();
    }
    Tensor& y = ctx.allocate_output(0, DType::f32, x.shape());
    if (n == 0) return d.compute();
    std::lock_guard<std::mutex> lock(mu_);
    if (!counter_) {
      counter_alloc_ = d.allocator();
      counter_ = counter_alloc_->allocate(sizeof(unsigned long long));
      if (!counter_) return resource_exhausted("out of GPU memory for dropout's block counter");
      AF_CUDA_RETURN(cudaMemsetAsync(counter_, 0, sizeof(unsigned long long), d.compute()), "cudaMemsetAsync");
    }
    AF_CUDA_RETURN(launch_dropout(static_cast<const float*>(x.raw_data()), static_cast<float*>(y.raw_data()),
                                  static_cast<float*>(mask.raw_data()), n, key0_, key1_, 1.0 - keep_prob_,
                                  static_cast<float>(1.0 / keep_prob_), static_cast<unsigned long long*>(counter_),
                                  device_flag, d.compute()),
                   "kernel launch");
    return d.compute();
  }

 private:
  double keep_prob_;
  uint32_t key0_ = 0, key1_ = 0;
  std::mutex mu_;
  Allocator* counter_alloc_ = nullptr;
  void* counter_ = nullptr;  // the next Philox block, in device memory
};

AF_REGISTER_GPU_KERNEL("Dropout", DropoutKernel);

}  // namespace
}  // namespace actorflow::gpu
