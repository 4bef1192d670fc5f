// CPU kernels of Fill, ZerosLike, OnesLike and Shape.
#include <algorithm>

#include "actorflow/kernel.h"
#include "common/fill_util.h"

namespace actorflow {
namespace {

// Writes `value` (converted to the tensor's dtype) into every element of `out`.
bool fill_with(OpKernelContext& ctx, Tensor& out, double value) {
  return visit_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T v = fill_util::convert<T>(value);
    T* p = out.data<T>();
    ctx.device()->parallel_for(out.num_elements(), 1, [&](int64_t b, int64_t e) { std::fill(p + b, p + e, v); });
  });
}

class FillKernel : public OpKernel {
 public:
  explicit FillKernel(const Node& n)
      : OpKernel(n), shape_(n.attr_shape("shape")), value_(n.attr_float("value", 0)), dtype_(n.attr_dtype("dtype", DType::f32)) {}

  void compute(OpKernelContext& ctx) override {
    if (!shape_.is_fully_defined()) {
      ctx.fail("shape " + shape_.to_string() + " is not fully defined");
      return;
    }
    Tensor* out = fill_util::try_allocate(ctx, 0, dtype_, shape_);
    if (out && !fill_with(ctx, *out, value_)) ctx.fail(std::string("cannot fill dtype ") + dtype_name(dtype_));
  }

 private:
  Shape shape_;
  double value_;
  DType dtype_;
};

template <int kValue>
class FillLikeKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    Tensor* out = fill_util::try_allocate(ctx, 0, in.dtype(), in.shape());
    if (out && !fill_with(ctx, *out, kValue)) ctx.fail(std::string("cannot fill dtype ") + dtype_name(in.dtype()));
  }
};

class ShapeKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(OpKernelContext& ctx) override {
    const Shape& s = ctx.input(0).shape();
    Tensor* out = fill_util::try_allocate(ctx, 0, DType::i64, Shape{static_cast<int64_t>(s.rank())});
    if (!out) return;
    std::copy(s.dims().begin(), s.dims().end(), out->data<int64_t>());
  }
};

AF_REGISTER_KERNEL("Fill", DeviceType::CPU, FillKernel);
AF_REGISTER_KERNEL("ZerosLike", DeviceType::CPU, FillLikeKernel<0>);
AF_REGISTER_KERNEL("OnesLike", DeviceType::CPU, FillLikeKernel<1>);
AF_REGISTER_KERNEL("Shape", DeviceType::CPU, ShapeKernel);

}  // namespace
}  // namespace actorflow
