// FusedBatchNorm and FusedBatchNormGrad on the GPU, f32, with the CPU kernels' semantics
// (ops/cpu/batchnorm_kernels.cpp): x [..., C] channels last, seen as [M, C].
//
// Training runs cuDNN's spatial batch norm on x as an [M, C, 1, 1] tensor. Its running
// averages with an update factor of 1 are the batch mean and the Bessel-corrected
// variance M/(M-1) var, exactly outputs 1 and 2. Inference runs cuDNN's inference call and
// passes the given mean and variance through as outputs 1 and 2, as the CPU does.
// The gradient in training is cuDNN's backward (which recomputes the batch statistics
// from x), plus, when the 7-input form brings gradients for outputs 1 and 2, their
// direct terms; dmean and dvariance are zero. The gradient in inference has no cuDNN
// call: gpu_cudnn_kernels.cu sums per channel in double, as the CPU.
//
// is_training as an input (FusedBatchNorm's 6th, the grad's 8th) must be host memory:
// reading a device bool would block this thread until the GPU gets there. Placement
// keeps it there (gpu_input_in_host_memory, ops/common/gpu_placement.cpp).
#include "cuda/gpu_cudnn_common.h"
#include "cuda/gpu_kernels.h"

namespace actorflow::gpu {
namespace {

const float* cf(const Tensor& t) { return static_cast<const float*>(t.raw_data()); }
float* mf(Tensor& t) { return static_cast<float*>(t.raw_data()); }

Status zero(Tensor& t, GpuDevice& d) {
  return cuda_status(cudaMemsetAsync(t.raw_data(), 0, t.bytes(), d.compute()), "cudaMemsetAsync");
}

Result<bool> training_flag(const OpKernelContext& ctx, int i, bool dflt) {
  if (ctx.num_inputs() <= i) return dflt;
  const Tensor& t = ctx.input(i);
  if (t.dtype() != DType::boolean || t.num_elements() != 1)
    return invalid_argument("is_training must be a bool scalar, got " + t.type_string());
  if (t.device().type != DeviceType::CPU)
    return unimplemented("is_training on " + t.device().to_string() +
                         ": the GPU batch norm reads it on the host (keep it in host memory)");
  return t.item<bool>();
}

// x f32 [..., C] on the device and the per-channel f32 inputs `vec`; sets M and C.
Status check_inputs(const OpKernelContext& ctx, const GpuDevice& d, int x_i, std::initializer_list<int> vec,
                    int64_t* M, int64_t* C) {
  AF_RETURN_IF_ERROR(check_f32_inputs(ctx, d, x_i + 1));
  const Tensor& x = ctx.input(x_i);
  if (x.rank() < 2) return invalid_argument("input " + x.shape().to_string() + " must have rank >= 2 (channels last)");
  *C = x.dim(x.rank() - 1);
  *M = *C == 0 ? 0 : x.num_elements() / *C;
  for (int i : vec) {
    const Tensor& v = ctx.input(i);
    if (v.dtype() != DType::f32 || v.device() != x.device() || v.rank() != 1 || v.dim(0) != *C)
      return invalid_argument("input " + std::to_string(i) + " " + v.type_string() + " on " + v.device().to_string() +
                              " must be float32[" + std::to_string(*C) + "] on " + x.device().to_string() +
                              " (one value per channel of x " + x.shape().to_string() + ")");
  }
  return Status::OK();
}

// [M, C, 1, 1] and [1, C, 1, 1] descriptors.
Status set_bn_descs(TensorDesc& x, TensorDesc& bn, int64_t M, int64_t C) {
  int m, c;
  AF_RETURN_IF_ERROR(cudnn_dim(M, &m, "rows"));
  AF_RETURN_IF_ERROR(cudnn_dim(C, &c, "channels"));
  AF_RETURN_IF_ERROR(x.create());
  AF_RETURN_IF_ERROR(bn.create());
  AF_CUDNN_RETURN(cudnnSetTensor4dDescriptor(x.get(), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, m, c, 1, 1),
                  "cudnnSetTensor4dDescriptor");
  AF_CUDNN_RETURN(cudnnSetTensor4dDescriptor(bn.get(), CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, c, 1, 1),
                  "cudnnSetTensor4dDescriptor");
  return Status::OK();
}

// FusedBatchNorm(x, scale, offset, mean, variance[, is_training]) -> y, batch_mean, batch_variance.
class FusedBatchNormKernel final : public GpuOpKernel {
 public:
  explicit FusedBatchNormKernel(const Node& n)
      : GpuOpKernel(n), epsilon_(n.attr_float("epsilon", 0.001)), training_(n.attr_bool("is_training", true)) {}

 protected:
  Result<cudaStream_t> enqueue(OpKernelContext& ctx, GpuDevice& d) override {
    int64_t M, C;
    AF_RETURN_IF_ERROR(check_inputs(ctx, d, 0, {1, 2, 3, 4}, &M, &C));
    AF_ASSIGN_OR_RETURN(bool training, training_flag(ctx, 5, training_));
    const Tensor& x = ctx.input(0);
    Tensor& y = ctx.allocate_output(0, DType::f32, x.shape());
    if (!training) {
      ctx.set_output(1, ctx.input(3));
      ctx.set_output(2, ctx.input(4));
    }
    if (training && M == 1)
      return unimplemented("a training batch norm over one row per channel (cuDNN's variance needs M > 1)");
    if (M == 0 || C == 0) {
      if (training) {
        AF_RETURN_IF_ERROR(zero(ctx.allocate_output(1, DType::f32, Shape{C}), d));
        AF_RETURN_IF_ERROR(zero(ctx.allocate_output(2, DType::f32, Shape{C}), d));
      }
      return d.compute();
    }
    TensorDesc xd, bn;
    AF_RETURN_IF_ERROR(set_bn_descs(xd, bn, M, C));
    AF_ASSIGN_OR_RETURN(cudnnHandle_t h, d.dnn());
    std::lock_guard<std::mutex> lock(d.dnn_mutex());
    const float one = 1.f, zero_f = 0.f;
    if (training) {
      Tensor& mean = ctx.allocate_output(1, DType::f32, Shape{C});
      Tensor& var = ctx.allocate_output(2, DType::f32, Shape{C});
      // The "running" averages start at 0 and take all of the batch's (factor 1).
      AF_RETURN_IF_ERROR(zero(mean, d));
      AF_RETURN_IF_ERROR(zero(var, d));
      AF_CUDNN_RETURN(cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero_f, xd.get(), cf(x),
                                                             xd.get(), mf(y), bn.get(), cf(ctx.input(1)),
                                                             cf(ctx.input(2)), 1.0, mf(mean), mf(var), epsilon_,
                                                             nullptr, nullptr),
                      "cudnnBatchNormalizationForwardTraining");
    } else {
      AF_CUDNN_RETURN(cudnnBatchNormalizationForwardInference(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero_f, xd.get(),
                                                              cf(x), xd.get(), mf(y), bn.get(), cf(ctx.input(1)),
                                                              cf(ctx.input(2)), cf(ctx.input(3)), cf(ctx.input(4)),
                                                              epsilon_),
                      "cudnnBatchNormalizationForwardInference");
    }
    return d.compute();
  }

 private:
  double epsilon_;
  bool training_;
};

// FusedBatchNormGrad(dy, x, scale, mean, variance[, d_batch_mean, d_batch_variance
// [, is_training]]) -> dx, dscale, doffset, dmean, dvariance.
class FusedBatchNormGradKernel final : public GpuOpKernel {
 public:
  explicit FusedBatchNormGradKernel(const Node& n)
      : GpuOpKernel(n), epsilon_(n.attr_float("epsilon", 0.001)), training_(n.attr_bool("is_training", true)) {}

 protected:
  Result<cudaStream_t> enqueue(OpKernelContext& ctx, GpuDevice& d) override {
    const int n = ctx.num_inputs();
    if (n != 5 && n != 7 && n != 8) return invalid_argument("takes 5, 7 or 8 inputs, got " + std::to_string(n));
    AF_RETURN_IF_ERROR(check_f32_inputs(ctx, d, 1));
    const Tensor& dy = ctx.input(0);
    const Tensor& x = ctx.input(1);
    if (dy.shape() != x.shape())
      return invalid_argument("dy " + dy.type_string() + " must be shaped like x " + x.type_string());
    int64_t M, C;
    if (n >= 7) AF_RETURN_IF_ERROR(check_inputs(ctx, d, 1, {2, 3, 4, 5, 6}, &M, &C));
    else AF_RETURN_IF_ERROR(check_inputs(ctx, d, 1, {2, 3, 4}, &M, &C));
    AF_ASSIGN_OR_RETURN(bool training, training_flag(ctx, 7, training_));
    Tensor& dx = ctx.allocate_output(0, DType::f32, x.shape());
    Tensor& dscale = ctx.allocate_output(1, DType::f32, Shape{C});
    Tensor& doffset = ctx.allocate_output(2, DType::f32, Shape{C});
    Tensor& dmean = ctx.allocate_output(3, DType::f32, Shape{C});
    Tensor& dvar = ctx.allocate_output(4, DType::f32, Shape{C});
    const float* gm = n >= 7 ? cf(ctx.input(5)) : nullptr;
    const float* gv = n >= 7 ? cf(ctx.input(6)) : nullptr;
    if (!training) {
      if (M == 0) {
        for (Tensor* t : {&dscale, &doffset}) AF_RETURN_IF_ERROR(zero(*t, d));
        // dmean = gm, dvariance = gv when nothing was normalized.
        if (gm) {
          AF_CUDA_RETURN(cudaMemcpyAsync(mf(dmean), gm, dmean.bytes(), cudaMemcpyDeviceToDevice, d.compute()), "copy");
          AF_CUDA_RETURN(cudaMemcpyAsync(mf(dvar), gv, dvar.bytes(), cudaMemcpyDeviceToDevice, d.compute()), "copy");
        } else {
          for (Tensor* t : {&dmean, &dvar}) AF_RETURN_IF_ERROR(zero(*t, d));
        }
        return d.compute();
      }
      AF_CUDA_RETURN(launch_bn_inference_grad(cf(dy), cf(x), cf(ctx.input(2)), cf(ctx.input(3)), cf(ctx.input(4)), gm,
                                              gv, mf(dx), mf(dscale), mf(doffset), mf(dmean), mf(dvar), M, C,
                                              epsilon_, d.compute()),
                     "kernel launch");
      return d.compute();
    }
    // Training: the batch statistics come from x; dmean and dvariance are zero.
    AF_RETURN_IF_ERROR(zero(dmean, d));
    AF_RETURN_IF_ERROR(zero(dvar, d));
    if (M == 0 || C == 0) {
      AF_RETURN_IF_ERROR(zero(dscale, d));
      AF_RETURN_IF_ERROR(zero(doffset, d));
      return d.compute();
    }
    if (M == 1) return unimplemented("a training batch norm gradient over one row per channel");
    TensorDesc xd, bn;
    AF_RETURN_IF_ERROR(set_bn_descs(xd, bn, M, C));
    AF_ASSIGN_OR_RETURN(cudnnHandle_t h, d.dnn());
    {
      std::lock_guard<std::mutex> lock(d.dnn_mutex());
      const float one = 1.f, zero_f = 0.f;
      AF_CUDNN_RETURN(cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero_f, &one, &zero_f,
                                                      xd.get(), cf(x), xd.get(), cf(dy), xd.get(), mf(dx), bn.get(),
                                                      cf(ctx.input(2)), mf(dscale), mf(doffset), epsilon_, nullptr,
                                                      nullptr),
                      "cudnnBatchNormalizationBackward");
    }
    if (gm) {
      // The direct paths of outputs 1 and 2 need the batch mean: a column mean of x.
      Scratch mean;
      AF_RETURN_IF_ERROR(mean.allocate(d, size_t(C) * sizeof(float), "the batch mean"));
      ReduceDims rd;
      rd.out_n = C;
      rd.reduced_n = M;
      if (C > 1) {
        rd.kept_rank = 1;
        rd.kept[0] = C;
        rd.kept_stride[0] = 1;
      }
      if (M > 1) {
        rd.reduced_rank = 1;
        rd.reduced[0] = M;
        rd.reduced_stride[0] = C;
      }
      AF_CUDA_RETURN(launch_reduce(true, cf(x), mean.f32(), rd, d.compute()), "kernel launch");
      AF_CUDA_RETURN(launch_bn_stat_grads(cf(x), mean.f32(), gm, gv, mf(dx), M, C, d.compute()), "kernel launch");
    }
    return d.compute();
  }

 private:
  double epsilon_;
  bool training_;
};

AF_REGISTER_GPU_KERNEL("FusedBatchNorm", FusedBatchNormKernel);
AF_REGISTER_GPU_KERNEL("FusedBatchNormGrad", FusedBatchNormGradKernel);

}  // namespace
}  // namespace actorflow::gpu
