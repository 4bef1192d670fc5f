// The f32 GPU kernels of the elementwise, BiasAdd and reduction ops: shape checks and
// index plans on the host, the arithmetic in gpu_elementwise.cu. Other dtypes fail with
// unimplemented rather than computing something wrong.
#include "common/broadcast.h"
#include "cuda/gpu_kernels.h"
#include "cuda/gpu_runtime.h"

namespace actorflow::gpu {
namespace {

template <UnaryOp Op>
class UnaryKernel final : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

 protected:
  Result<cudaStream_t> enqueue(OpKernelContext& ctx, GpuDevice& d) override {
    AF_RETURN_IF_ERROR(check_f32_inputs(ctx, d, 1));
    const Tensor& x = ctx.input(0);
    Tensor& y = ctx.allocate_output(0, DType::f32, x.shape());
    AF_CUDA_RETURN(launch_unary(Op, static_cast<const float*>(x.raw_data()), static_cast<float*>(y.raw_data()),
                                x.num_elements(), d.compute()),
                   "kernel launch");
    return d.compute();
  }
};

template <BinaryOp Op>
class BinaryKernel final : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

 protected:
  Result<cudaStream_t> enqueue(OpKernelContext& ctx, GpuDevice& d) override {
    AF_RETURN_IF_ERROR(check_f32_inputs(ctx, d, 2));
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    BroadcastPlan plan;
    if (!make_broadcast_plan({&a.shape(), &b.shape()}, &plan))
      return invalid_argument("shapes " + a.shape().to_string() + " and " + b.shape().to_string() + " do not broadcast");
    if (plan.dims.size() > static_cast<size_t>(kMaxDims))
      return unimplemented("broadcasting over more than " + std::to_string(kMaxDims) + " collapsed dims");
    BroadcastDims bd;
    bd.rank = static_cast<int>(plan.dims.size());
    bd.n = plan.num_elements;
    bd.same_shape = a.shape() == b.shape();
    for (int i = 0; i < bd.rank; ++i) {
      bd.dims[i] = plan.dims[static_cast<size_t>(i)];
      bd.stride_a[i] = plan.strides[0][static_cast<size_t>(i)];
      bd.stride_b[i] = plan.strides[1][static_cast<size_t>(i)];
    }
    Tensor& out = ctx.allocate_output(0, DType::f32, plan.out_shape);
    AF_CUDA_RETURN(launch_binary(Op, static_cast<const float*>(a.raw_data()), static_cast<const float*>(b.raw_data()),
                                 static_cast<float*>(out.raw_data()), bd, d.compute()),
                   "kernel launch");
    return d.compute();
  }
};

class BiasAddKernel final : public GpuOpKernel {
 public:
  explicit BiasAddKernel(const Node& n) : GpuOpKernel(n), nchw_(n.attr_string("data_format", "NHWC") == "NCHW") {}

 protected:
  Result<cudaStream_t> enqueue(OpKernelContext& ctx, GpuDevice& d) override {
    AF_RETURN_IF_ERROR(check_f32_inputs(ctx, d, 2));
    const Tensor& x = ctx.input(0);
    const Tensor& b = ctx.input(1);
    const int r = x.rank();
    if (r < (nchw_ ? 2 : 1))
      return invalid_argument("value of shape " + x.shape().to_string() + " must have rank >= " +
                              (nchw_ ? "2 for data_format NCHW" : "1"));
    const int axis = nchw_ ? 1 : r - 1;
    int64_t inner = 1;
    for (int i = axis + 1; i < r; ++i) inner *= x.dim(i);
    const int64_t channels = x.dim(axis);
    if (b.rank() != 1 || b.dim(0) != channels)
      return invalid_argument("bias " + b.type_string() + " does not match the " + std::to_string(channels) +
                              " channels of value " + x.type_string());
    Tensor& y = ctx.allocate_output(0, DType::f32, x.shape());
    AF_CUDA_RETURN(launch_bias_add(static_cast<const float*>(x.raw_data()), static_cast<const float*>(b.raw_data()),
                                   static_cast<float*>(y.raw_data()), x.num_elements(), channels, inner, d.compute()),
                   "kernel launch");
    return d.compute();
  }

 private:
  bool nchw_;
};

template <bool Mean>
class ReduceKernel final : public GpuOpKernel {
 public:
  explicit ReduceKernel(const Node& n)
      : GpuOpKernel(n), axes_(n.attr_ints("axes")), keepdims_(n.attr_bool("keepdims")) {}

 protected:
  Result<cudaStream_t> enqueue(OpKernelContext& ctx, GpuDevice& d) override {
    AF_RETURN_IF_ERROR(check_f32_inputs(ctx, d, 1));
    const Tensor& x = ctx.input(0);
    const Shape& s = x.shape();
    const int r = s.rank();
    // As on the CPU: no axes means every axis.
    std::vector<bool> red(static_cast<size_t>(r), axes_.empty());
    for (int64_t a : axes_) {
      const int64_t n = a < 0 ? a + r : a;
      if (n < 0 || n >= r)
        return invalid_argument("axis " + std::to_string(a) + " is out of range for input of shape " + s.to_string());
      red[static_cast<size_t>(n)] = true;
    }
    std::vector<int64_t> out_dims;
    ReduceDims rd;
    rd.out_n = 1;
    rd.reduced_n = 1;
    int64_t stride = 1;
    std::vector<int64_t> strides(static_cast<size_t>(r));
    for (int i = r - 1; i >= 0; --i) {
      strides[static_cast<size_t>(i)] = stride;
      stride *= s.dim(i);
    }
    for (int i = 0; i < r; ++i) {
      const int64_t dim = s.dim(i);
      if (red[static_cast<size_t>(i)]) {
        if (keepdims_) out_dims.push_back(1);
        rd.reduced_n *= dim;
        if (dim == 1) continue;  // contributes no index
        if (rd.reduced_rank == kMaxDims) return unimplemented("reducing more than 8 dims on a GPU");
        rd.reduced[rd.reduced_rank] = dim;
        rd.reduced_stride[rd.reduced_rank++] = strides[static_cast<size_t>(i)];
      } else {
        out_dims.push_back(dim);
        rd.out_n *= dim;
        if (dim == 1) continue;
        if (rd.kept_rank == kMaxDims) return unimplemented("keeping more than 8 dims in a GPU reduction");
        rd.kept[rd.kept_rank] = dim;
        rd.kept_stride[rd.kept_rank++] = strides[static_cast<size_t>(i)];
      }
    }
    Tensor& y = ctx.allocate_output(0, DType::f32, Shape(out_dims));
    AF_CUDA_RETURN(launch_reduce(Mean, static_cast<const float*>(x.raw_data()), static_cast<float*>(y.raw_data()), rd,
                                 d.compute()),
                   "kernel launch");
    return d.compute();
  }

 private:
  std::vector<int64_t> axes_;
  bool keepdims_;
};

AF_REGISTER_GPU_KERNEL("Neg", UnaryKernel<UnaryOp::neg>);
AF_REGISTER_GPU_KERNEL("Abs", UnaryKernel<UnaryOp::abs>);
AF_REGISTER_GPU_KERNEL("Sign", UnaryKernel<UnaryOp::sign>);
AF_REGISTER_GPU_KERNEL("Square", UnaryKernel<UnaryOp::square>);
AF_REGISTER_GPU_KERNEL("Relu", UnaryKernel<UnaryOp::relu>);
AF_REGISTER_GPU_KERNEL("Exp", UnaryKernel<UnaryOp::exp>);
AF_REGISTER_GPU_KERNEL("Log", UnaryKernel<UnaryOp::log>);
AF_REGISTER_GPU_KERNEL("Sqrt", UnaryKernel<UnaryOp::sqrt>);
AF_REGISTER_GPU_KERNEL("Rsqrt", UnaryKernel<UnaryOp::rsqrt>);
AF_REGISTER_GPU_KERNEL("Sigmoid", UnaryKernel<UnaryOp::sigmoid>);
AF_REGISTER_GPU_KERNEL("Tanh", UnaryKernel<UnaryOp::tanh>);
AF_REGISTER_GPU_KERNEL("Softplus", UnaryKernel<UnaryOp::softplus>);

AF_REGISTER_GPU_KERNEL("Add", BinaryKernel<BinaryOp::add>);
AF_REGISTER_GPU_KERNEL("Sub", BinaryKernel<BinaryOp::sub>);
AF_REGISTER_GPU_KERNEL("Mul", BinaryKernel<BinaryOp::mul>);
AF_REGISTER_GPU_KERNEL("Div", BinaryKernel<BinaryOp::div>);
AF_REGISTER_GPU_KERNEL("Pow", BinaryKernel<BinaryOp::pow>);
AF_REGISTER_GPU_KERNEL("Maximum", BinaryKernel<BinaryOp::maximum>);
AF_REGISTER_GPU_KERNEL("Minimum", BinaryKernel<BinaryOp::minimum>);
AF_REGISTER_GPU_KERNEL("SquaredDifference", BinaryKernel<BinaryOp::squared_difference>);

AF_REGISTER_GPU_KERNEL("BiasAdd", BiasAddKernel);
AF_REGISTER_GPU_KERNEL("Sum", ReduceKernel<false>);
AF_REGISTER_GPU_KERNEL("Mean", ReduceKernel<true>);

}  // namespace
}  // namespace actorflow::gpu
