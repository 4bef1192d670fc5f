// CPU kernels of elementwise binary ops (broadcasting via common/broadcast.h).
#include <cmath>

#include "actorflow/kernel.h"
#include "common/broadcast.h"

namespace actorflow {
namespace {

enum class Bin { add, sub, mul, div, pow, max, min, sqdiff, eq, ne, lt, le, gt, ge, land, lor };

template <typename T>
T pow_of(T a, T b) {
  return static_cast<T>(std::pow(static_cast<double>(a), static_cast<double>(b)));
}

template <Bin K>
class BinaryKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  static constexpr bool kComparison = K >= Bin::eq;

  void compute(OpKernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    BroadcastPlan plan;
    if (!make_broadcast_plan({&a.shape(), &b.shape()}, &plan)) {
      ctx.fail("shapes " + a.shape().to_string() + " and " + b.shape().to_string() + " cannot be broadcast together");
      return;
    }
    DType out_dtype = kComparison ? DType::boolean : a.dtype();
    Tensor& out = ctx.allocate_output(0, out_dtype, plan.out_shape);
    bool ok = visit_dtype(a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        if constexpr (K == Bin::div) {
          const T* pb = b.data<T>();
          for (int64_t i = 0; i < b.num_elements(); ++i)
            if (pb[i] == 0) {
              ctx.fail(invalid_argument("integer division by zero"));
              return;
            }
        }
      }
      run<T>(a, b, out, plan, ctx.device());
    });
    if (!ok) ctx.fail(std::string("unsupported dtype ") + dtype_name(a.dtype()));
  }

 private:
  template <typename T>
  static void run(const Tensor& a, const Tensor& b, Tensor& out, const BroadcastPlan& plan, const DeviceContext* dev) {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    if constexpr (kComparison) {
      bool* po = out.data<bool>();
      if constexpr (K == Bin::eq) broadcast_binary(plan, pa, pb, po, dev, [](T x, T y) { return x == y; });
      else if constexpr (K == Bin::ne) broadcast_binary(plan, pa, pb, po, dev, [](T x, T y) { return x != y; });
      else if constexpr (K == Bin::lt) broadcast_binary(plan, pa, pb, po, dev, [](T x, T y) { return x < y; });
      else if constexpr (K == Bin::le) broadcast_binary(plan, pa, pb, po, dev, [](T x, T y) { return x <= y; });
      else if constexpr (K == Bin::gt) broadcast_binary(plan, pa, pb, po, dev, [](T x, T y) { return x > y; });
      else if constexpr (K == Bin::ge) broadcast_binary(plan, pa, pb, po, dev, [](T x, T y) { return x >= y; });
      else if constexpr (K == Bin::land) broadcast_binary(plan, pa, pb, po, dev, [](T x, T y) { return static_cast<bool>(x) && static_cast<bool>(y); });
      else broadcast_binary(plan, pa, pb, po, dev, [](T x, T y) { return static_cast<bool>(x) || static_cast<bool>(y); });
    } else {
      T* po = out.data<T>();
      if constexpr (K == Bin::add) broadcast_binary(plan, pa, pb, po, dev, [](T x, T y) { return static_cast<T>(x + y); });
      else if constexpr (K == Bin::sub) broadcast_binary(plan, pa, pb, po, dev, [](T x, T y) { return static_cast<T>(x - y); });
      else if constexpr (K == Bin::mul) broadcast_binary(plan, pa, pb, po, dev, [](T x, T y) { return static_cast<T>(x * y); });
      else if constexpr (K == Bin::div) broadcast_binary(plan, pa, pb, po, dev, [](T x, T y) { return static_cast<T>(x / y); });
      else if constexpr (K == Bin::pow) broadcast_binary(plan, pa, pb, po, dev, [](T x, T y) { return pow_of(x, y); });
      else if constexpr (K == Bin::max) broadcast_binary(plan, pa, pb, po, dev, [](T x, T y) { return x > y || x != x ? x : y; });
      else if constexpr (K == Bin::min) broadcast_binary(plan, pa, pb, po, dev, [](T x, T y) { return x < y || x != x ? x : y; });
      else broadcast_binary(plan, pa, pb, po, dev, [](T x, T y) { return static_cast<T>((x - y) * (x - y)); });
    }
  }
};

AF_REGISTER_KERNEL("Add", DeviceType::CPU, BinaryKernel<Bin::add>);
AF_REGISTER_KERNEL("Sub", DeviceType::CPU, BinaryKernel<Bin::sub>);
AF_REGISTER_KERNEL("Mul", DeviceType::CPU, BinaryKernel<Bin::mul>);
AF_REGISTER_KERNEL("Div", DeviceType::CPU, BinaryKernel<Bin::div>);
AF_REGISTER_KERNEL("Pow", DeviceType::CPU, BinaryKernel<Bin::pow>);
AF_REGISTER_KERNEL("Maximum", DeviceType::CPU, BinaryKernel<Bin::max>);
AF_REGISTER_KERNEL("Minimum", DeviceType::CPU, BinaryKernel<Bin::min>);
AF_REGISTER_KERNEL("SquaredDifference", DeviceType::CPU, BinaryKernel<Bin::sqdiff>);
AF_REGISTER_KERNEL("Equal", DeviceType::CPU, BinaryKernel<Bin::eq>);
AF_REGISTER_KERNEL("NotEqual", DeviceType::CPU, BinaryKernel<Bin::ne>);
AF_REGISTER_KERNEL("Less", DeviceType::CPU, BinaryKernel<Bin::lt>);
AF_REGISTER_KERNEL("LessEqual", DeviceType::CPU, BinaryKernel<Bin::le>);
AF_REGISTER_KERNEL("Greater", DeviceType::CPU, BinaryKernel<Bin::gt>);
AF_REGISTER_KERNEL("GreaterEqual", DeviceType::CPU, BinaryKernel<Bin::ge>);
AF_REGISTER_KERNEL("LogicalAnd", DeviceType::CPU, BinaryKernel<Bin::land>);
AF_REGISTER_KERNEL("LogicalOr", DeviceType::CPU, BinaryKernel<Bin::lor>);

// AddN: the sum of same-shaped inputs, accumulated in one pass over the output.
class AddNKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(OpKernelContext& ctx) override {
    const Tensor& first = ctx.input(0);
    for (int i = 1; i < ctx.num_inputs(); ++i)
      if (ctx.input(i).shape() != first.shape()) {
        ctx.fail("inputs 0 and " + std::to_string(i) + " have shapes " + first.shape().to_string() + " and " +
                 ctx.input(i).shape().to_string());
        return;
      }
    Tensor& out = ctx.allocate_output(0, first.dtype(), first.shape());
    visit_dtype(first.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, bool>) {
        T* po = out.data<T>();
        int64_t n = out.num_elements();
        ctx.device()->parallel_for(n, ctx.num_inputs(), [&](int64_t b, int64_t e) {
          const T* p0 = ctx.input(0).data<T>();
          for (int64_t j = b; j < e; ++j) po[j] = p0[j];
          for (int i = 1; i < ctx.num_inputs(); ++i) {
            const T* p = ctx.input(i).data<T>();
            for (int64_t j = b; j < e; ++j) po[j] = static_cast<T>(po[j] + p[j]);
          }
        });
      }
    });
  }
};
AF_REGISTER_KERNEL("AddN", DeviceType::CPU, AddNKernel);

}  // namespace
}  // namespace actorflow
