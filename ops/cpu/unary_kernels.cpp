// CPU kernels of the elementwise unary ops, activations, Softmax/LogSoftmax, LogicalNot
// and Cast. Every kernel is a plain loop over contiguous T* (the op is a template
// parameter, so the loop body inlines and vectorizes; float32 transcendentals come from
// unary_math.h because libm calls would not vectorize), sharded with parallel_for.
//
// Outputs are always fresh buffers: an input held by no one else could be overwritten in
// place, but a tensor may wrap memory the engine does not own (a deserialized or mapped
// buffer), and Buffer does not say which.
#include <cmath>
#include <limits>
#include <type_traits>

#include "actorflow/kernel.h"
#include "cpu/reduction_impl.h"
#include "cpu/unary_math.h"

namespace actorflow {
namespace {

namespace um = unary_math;

enum class U { neg, abs, sign, square, relu, exp, log, sqrt, rsqrt, sigmoid, tanh, softplus };

template <typename T>
using Unsigned = std::make_unsigned_t<T>;

template <U K, typename T>
inline T apply(T x) {
  if constexpr (K == U::neg) {
    // Integers wrap (INT_MIN stays INT_MIN, as TF), computed unsigned to avoid UB.
    if constexpr (std::is_integral_v<T>) return static_cast<T>(Unsigned<T>(0) - static_cast<Unsigned<T>>(x));
    else return -x;
  } else if constexpr (K == U::abs) {
    if constexpr (std::is_integral_v<T>) return x < 0 ? static_cast<T>(Unsigned<T>(0) - static_cast<Unsigned<T>>(x)) : x;
    else return std::fabs(x);
  } else if constexpr (K == U::sign) {
    // NaN stays NaN (numpy); sign(+-0) = 0.
    if constexpr (std::is_integral_v<T>) return static_cast<T>((x > 0) - (x < 0));
    else {
      T s = x > T(0) ? T(1) : T(0);  // written as selects so that it vectorizes
      s = x < T(0) ? T(-1) : s;
      return x != x ? x : s;
    }
  } else if constexpr (K == U::square) {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<Unsigned<T>>(x) * static_cast<Unsigned<T>>(x));
    else return x * x;
  } else if constexpr (K == U::relu) {
    return x < T(0) ? T(0) : x;  // NaN propagates
  } else if constexpr (K == U::exp) {
    if constexpr (std::is_same_v<T, float>) return um::exp_f32(x);
    else return std::exp(x);
  } else if constexpr (K == U::log) {
    if constexpr (std::is_same_v<T, float>) return um::log_f32(x);
    else return std::log(x);
  } else if constexpr (K == U::sigmoid) {
    if constexpr (std::is_same_v<T, float>) return um::sigmoid_f32(x);
    else return um::sigmoid_f64(x);
  } else if constexpr (K == U::tanh) {
    if constexpr (std::is_same_v<T, float>) return um::tanh_f32(x);
    else return std::tanh(x);
  } else {
    static_assert(K == U::softplus);
    if constexpr (std::is_same_v<T, float>) return um::softplus_f32(x);
    else return um::softplus_f64(x);
  }
}

// Rough ns per element, for parallel_for's sharding.
template <U K, typename T>
constexpr int64_t cost() {
  if constexpr (K == U::neg || K == U::abs || K == U::sign || K == U::square || K == U::relu || K == U::sqrt) return 1;
  else if constexpr (std::is_same_v<T, float>) return 3;
  else return 20;
}

template <U K, typename T>
void apply_range(const T* x, T* y, int64_t n) {
  if constexpr (K == U::sqrt) um::sqrt_array<false>(x, y, n);
  else if constexpr (K == U::rsqrt) um::sqrt_array<true>(x, y, n);
  else
    for (int64_t i = 0; i < n; ++i) y[i] = apply<K>(x[i]);
}

template <U K>
class UnaryKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  static constexpr bool kIntegers = K == U::neg || K == U::abs || K == U::sign || K == U::square || K == U::relu;

  void compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    const DType t = in.dtype();
    if (t == DType::f32) return run<float>(ctx, in);
    if (t == DType::f64) return run<double>(ctx, in);
    if constexpr (kIntegers) {
      if (t == DType::i32) return run<int32_t>(ctx, in);
      if (t == DType::i64) return run<int64_t>(ctx, in);
    }
    ctx.fail(std::string("unsupported dtype ") + dtype_name(t));
  }

 private:
  template <typename T>
  static void run(OpKernelContext& ctx, const Tensor& in) {
    Tensor& out = ctx.allocate_output(0, in.dtype(), in.shape());
    const T* x = in.data<T>();
    T* y = out.data<T>();
    ctx.device()->parallel_for(in.num_elements(), cost<K, T>(),
                               [x, y](int64_t b, int64_t e) { apply_range<K, T>(x + b, y + b, e - b); });
  }
};

AF_REGISTER_KERNEL("Neg", DeviceType::CPU, UnaryKernel<U::neg>);
AF_REGISTER_KERNEL("Abs", DeviceType::CPU, UnaryKernel<U::abs>);
AF_REGISTER_KERNEL("Sign", DeviceType::CPU, UnaryKernel<U::sign>);
AF_REGISTER_KERNEL("Square", DeviceType::CPU, UnaryKernel<U::square>);
AF_REGISTER_KERNEL("Relu", DeviceType::CPU, UnaryKernel<U::relu>);
AF_REGISTER_KERNEL("Exp", DeviceType::CPU, UnaryKernel<U::exp>);
AF_REGISTER_KERNEL("Log", DeviceType::CPU, UnaryKernel<U::log>);
AF_REGISTER_KERNEL("Sqrt", DeviceType::CPU, UnaryKernel<U::sqrt>);
AF_REGISTER_KERNEL("Rsqrt", DeviceType::CPU, UnaryKernel<U::rsqrt>);
AF_REGISTER_KERNEL("Sigmoid", DeviceType::CPU, UnaryKernel<U::sigmoid>);
AF_REGISTER_KERNEL("Tanh", DeviceType::CPU, UnaryKernel<U::tanh>);
AF_REGISTER_KERNEL("Softplus", DeviceType::CPU, UnaryKernel<U::softplus>);

class LogicalNotKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    if (in.dtype() != DType::boolean) {
      ctx.fail(std::string("needs a bool input, got ") + dtype_name(in.dtype()));
      return;
    }
    Tensor& out = ctx.allocate_output(0, DType::boolean, in.shape());
    // Read as bytes: a bool object holding anything but 0/1 would be UB to negate.
    const uint8_t* x = static_cast<const uint8_t*>(in.raw_data());
    uint8_t* y = static_cast<uint8_t*>(out.raw_data());
    ctx.device()->parallel_for(in.num_elements(), 1, [x, y](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) y[i] = x[i] == 0;
    });
  }
};
AF_REGISTER_KERNEL("LogicalNot", DeviceType::CPU, LogicalNotKernel);

// ---- Softmax / LogSoftmax over the last axis ----

template <typename T>
inline T exp_of(T x) {
  if constexpr (std::is_same_v<T, float>) return um::exp_f32(x);
  else return std::exp(x);
}

// One row: subtract the row max so exp never overflows; -inf entries become exact zeros
// (log-softmax -inf). A row whose max is +-inf or NaN has no defined result and gives NaN,
// as TF and PyTorch do.
template <bool kLog, typename T>
void softmax_row(const T* x, T* y, int64_t n) {
  using MaxR = reduce::Reducer<reduce::Kind::max, T>;
  using SumR = reduce::Reducer<reduce::Kind::sum, T>;
  const T m = MaxR::finish(reduce::reduce_contig<MaxR>(x, n), n);
  for (int64_t i = 0; i < n; ++i) y[i] = exp_of(x[i] - m);
  const double s = reduce::reduce_contig<SumR>(y, n);
  if constexpr (kLog) {
    // (x - m) - log s rather than x - (m + log s): the latter loses the small log s
    // against a large m.
    const T ls = static_cast<T>(std::log(s));
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - m) - ls;
  } else {
    const T inv = static_cast<T>(1.0 / s);
    for (int64_t i = 0; i < n; ++i) y[i] = y[i] * inv;
  }
}

template <bool kLog>
class SoftmaxKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    if (in.rank() < 1) {
      ctx.fail("needs an input of rank >= 1, got shape " + in.shape().to_string());
      return;
    }
    if (in.dtype() == DType::f32) return run<float>(ctx, in);
    if (in.dtype() == DType::f64) return run<double>(ctx, in);
    ctx.fail(std::string("unsupported dtype ") + dtype_name(in.dtype()));
  }

 private:
  template <typename T>
  static void run(OpKernelContext& ctx, const Tensor& in) {
    Tensor& out = ctx.allocate_output(0, in.dtype(), in.shape());
    const int64_t cols = in.dim(in.rank() - 1);
    if (cols == 0 || in.num_elements() == 0) return;
    const int64_t rows = in.num_elements() / cols;
    const T* x = in.data<T>();
    T* y = out.data<T>();
    ctx.device()->parallel_for(rows, cols * (std::is_same_v<T, float> ? 6 : 25), [x, y, cols](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) softmax_row<kLog>(x + r * cols, y + r * cols, cols);
    });
  }
};
AF_REGISTER_KERNEL("Softmax", DeviceType::CPU, SoftmaxKernel<false>);
AF_REGISTER_KERNEL("LogSoftmax", DeviceType::CPU, SoftmaxKernel<true>);

// ---- Cast ----

// float -> integer saturates (NaN -> 0, out of range -> the nearest bound): the plain C++
// conversion is undefined there. Integer narrowing wraps; anything -> bool is x != 0
// (NaN -> true); bool -> number is 0/1.
template <typename S, typename D>
inline D convert(S x) {
  if constexpr (std::is_same_v<D, bool>) {
    return x != S(0);
  } else if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D>) {
    constexpr S lo = static_cast<S>(std::numeric_limits<D>::lowest()) - S(1);
    constexpr S hi = static_cast<S>(std::numeric_limits<D>::max()) + S(1);
    return x != x ? D(0) : x <= lo ? std::numeric_limits<D>::lowest() : x >= hi ? std::numeric_limits<D>::max() : static_cast<D>(x);
  } else {
    return static_cast<D>(x);
  }
}

class CastKernel : public OpKernel {
 public:
  explicit CastKernel(const Node& n) : OpKernel(n), to_(n.attr_dtype("dtype")) {}
  void compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    if (in.dtype() == to_) {
      ctx.set_output(0, in);  // tensors are immutable once produced: share the buffer
      return;
    }
    bool done = false;
    visit_dtype(in.dtype(), [&](auto s) {
      using S = decltype(s);
      visit_dtype(to_, [&](auto d) {
        using D = decltype(d);
        Tensor& out = ctx.allocate_output(0, to_, in.shape());
        D* y = out.data<D>();
        if constexpr (std::is_same_v<S, bool>) {
          // Read bools as bytes: loads of bool do not vectorize (the compiler must
          // assume only 0/1 are valid).
          const uint8_t* x = static_cast<const uint8_t*>(in.raw_data());
          ctx.device()->parallel_for(in.num_elements(), 1, [x, y](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) y[i] = x[i] != 0 ? D(1) : D(0);
          });
        } else {
          const S* x = in.data<S>();
          ctx.device()->parallel_for(in.num_elements(), 1, [x, y](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) y[i] = convert<S, D>(x[i]);
          });
        }
        done = true;
      });
    });
    if (!done)
      ctx.fail(std::string("cannot cast ") + dtype_name(in.dtype()) + " to " + dtype_name(to_));
  }

 private:
  DType to_;
};
AF_REGISTER_KERNEL("Cast", DeviceType::CPU, CastKernel);

}  // namespace
}  // namespace actorflow
