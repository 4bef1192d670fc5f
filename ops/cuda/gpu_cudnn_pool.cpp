// MaxPool, AvgPool, MaxPoolGrad and AvgPoolGrad on the GPU, f32, NHWC, with the CPU
// kernels' semantics (ops/cpu/pool_kernels.cpp).
//
// These are not cuDNN calls, although they belong to the cuDNN group of kernels: cuDNN
// pads both sides of an axis alike, while TF's SAME padding puts the odd one after, and
// cuDNN's max-pooling gradient need not route ties to the first maximum in row-major
// order as the CPU kernel does. The kernels of gpu_cudnn_kernels.cu follow the CPU loops
// instead (same clipping, same first maximum, same summation order, no fused
// multiply-adds), so the GPU gives the CPU's values. Pooling is memory-bound: a direct
// kernel reads each input about ksize/stride times, as cuDNN's does.
#include "common/conv_geometry.h"
#include "cuda/gpu_cudnn_common.h"

namespace actorflow::gpu {
namespace {

enum class Kind { max, avg, max_grad, avg_grad };

template <Kind K>
class PoolKernel final : public GpuOpKernel {
 public:
  explicit PoolKernel(const Node& n) : GpuOpKernel(n) {
    if (conv_geom::parse_hw(n, "ksize", &kh_, &kw_, &attr_error_) &&
        conv_geom::parse_hw(n, "strides", &sh_, &sw_, &attr_error_))
      conv_geom::parse_padding(n, &padding_, &attr_error_);
  }

 protected:
  Result<cudaStream_t> enqueue(OpKernelContext& ctx, GpuDevice& d) override {
    constexpr int kInputs = K == Kind::max ? 1 : K == Kind::avg ? 1 : K == Kind::max_grad ? 3 : 2;
    AF_RETURN_IF_ERROR(check_f32_inputs(ctx, d, kInputs));
    if (!attr_error_.empty()) return invalid_argument(attr_error_);
    const Tensor& x = ctx.input(0);
    if (x.rank() != 4) return invalid_argument("input " + x.shape().to_string() + " must have rank 4 (NHWC)");
    conv_geom::Axis ah, aw;
    std::string err;
    if (!conv_geom::window(x.dim(1), kh_, sh_, padding_, &ah, &err) ||
        !conv_geom::window(x.dim(2), kw_, sw_, padding_, &aw, &err))
      return invalid_argument("input " + x.shape().to_string() + ": " + err);
    PoolGeom g;
    g.n = x.dim(0);
    g.h = x.dim(1);
    g.w = x.dim(2);
    g.c = x.dim(3);
    g.kh = kh_;
    g.kw = kw_;
    g.sh = sh_;
    g.sw = sw_;
    g.oh = ah.out;
    g.ow = aw.out;
    g.pad_t = ah.pad_before;
    g.pad_l = aw.pad_before;
    const Shape pooled{g.n, g.oh, g.ow, g.c};
    auto check_like = [&](int i, const char* what, const Shape& shape) -> Status {
      const Tensor& v = ctx.input(i);
      if (v.shape() != shape)
        return invalid_argument(std::string(what) + " " + v.type_string() + " must be float32" + shape.to_string());
      return Status::OK();
    };
    const float* px = static_cast<const float*>(x.raw_data());
    if constexpr (K == Kind::max || K == Kind::avg) {
      Tensor& y = ctx.allocate_output(0, DType::f32, pooled);
      float* py = static_cast<float*>(y.raw_data());
      AF_CUDA_RETURN(K == Kind::max ? launch_max_pool(px, py, g, d.compute()) : launch_avg_pool(px, py, g, d.compute()),
                     "kernel launch");
    } else if constexpr (K == Kind::max_grad) {
      // MaxPoolGrad(orig_input, orig_output, grad).
      AF_RETURN_IF_ERROR(check_like(1, "orig_output", pooled));
      AF_RETURN_IF_ERROR(check_like(2, "grad", pooled));
      Tensor& dx = ctx.allocate_output(0, DType::f32, x.shape());
      AF_CUDA_RETURN(launch_max_pool_grad(px, static_cast<const float*>(ctx.input(2).raw_data()),
                                          static_cast<float*>(dx.raw_data()), g, d.compute()),
                     "kernel launch");
    } else {
      // AvgPoolGrad(orig_input, grad): orig_input lends only its shape.
      AF_RETURN_IF_ERROR(check_like(1, "grad", pooled));
      Tensor& dx = ctx.allocate_output(0, DType::f32, x.shape());
      AF_CUDA_RETURN(launch_avg_pool_grad(static_cast<const float*>(ctx.input(1).raw_data()),
                                          static_cast<float*>(dx.raw_data()), g, d.compute()),
                     "kernel launch");
    }
    return d.compute();
  }

 private:
  int64_t kh_ = 1, kw_ = 1, sh_ = 1, sw_ = 1;
  conv_geom::Padding padding_ = conv_geom::Padding::valid;
  std::string attr_error_;
};

AF_REGISTER_GPU_KERNEL("MaxPool", PoolKernel<Kind::max>);
AF_REGISTER_GPU_KERNEL("AvgPool", PoolKernel<Kind::avg>);
AF_REGISTER_GPU_KERNEL("MaxPoolGrad", PoolKernel<Kind::max_grad>);
AF_REGISTER_GPU_KERNEL("AvgPoolGrad", PoolKernel<Kind::avg_grad>);

}  // namespace
}  // namespace actorflow::gpu
