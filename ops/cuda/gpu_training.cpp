// The GPU kernels that training needs beyond gpu_kernels.cpp: softmax
// cross-entropy (sparse and dense) with its backprop, BiasAddGrad, comparisons and Select
// (the relu gradient where(x > 0, g, 0)), BroadcastReduced (the gradient of Sum/Mean),
// Cast, ZerosLike/OnesLike and the dense updates of every optimizer, the same arithmetic
// as ops/train/apply_kernels.cpp in float32. Shape checks and index plans run on the
// host; the arithmetic is in gpu_train_kernels.cu.
#include <algorithm>
#include <cmath>
#include <mutex>

#include "actorflow/resource_mgr.h"
#include "common/broadcast.h"
#include "cuda/gpu_runtime.h"
#include "cuda/gpu_train_kernels.h"

namespace actorflow::gpu {
namespace {

Status on_device(const Tensor& t, const GpuDevice& d, const std::string& what) {
  if (t.device().type != DeviceType::GPU || t.device().index != d.index())
    return invalid_argument(what + " is on " + t.device().to_string() + ", not gpu:" + std::to_string(d.index()) +
                            " (a _CopyToDevice must bring it over)");
  return Status::OK();
}

const float* f32(const Tensor& t) { return static_cast<const float*>(t.raw_data()); }
float* f32(Tensor& t) { return static_cast<float*>(t.raw_data()); }

// ---- softmax cross-entropy ----

// Async of its own (not GpuOpKernel): a bad label is found on the device, so the kernel
// reads a flag back (pinned memory) once the stream is done and fails the node then.
class SparseXentKernel final : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void compute_async(OpKernelContext& ctx, DoneCallback done) override {
    Result<GpuDevice*> dev = device_of(ctx);
    if (!dev.ok()) {
      ctx.fail(dev.status());
      return done();
    }
    GpuDevice& d = **dev;
    int* flag = nullptr;
    size_t block = 0;
    Status s = [&]() -> Status {
      AF_RETURN_IF_ERROR(d.activate());
      const Tensor& logits = ctx.input(0);
      const Tensor& labels = ctx.input(1);
      if (logits.dtype() != DType::f32) return unimplemented("logits are " + logits.type_string() + ": float32 only on a GPU");
      AF_RETURN_IF_ERROR(on_device(logits, d, "logits"));
      AF_RETURN_IF_ERROR(on_device(labels, d, "labels"));
      if (labels.dtype() != DType::i32 && labels.dtype() != DType::i64)
        return invalid_argument("labels must be i32 or i64, got " + labels.type_string());
      bool shapes_ok = logits.rank() >= 1 && labels.rank() == logits.rank() - 1;
      for (int i = 0; shapes_ok && i < labels.rank(); ++i) shapes_ok = labels.dim(i) == logits.dim(i);
      if (!shapes_ok)
        return invalid_argument("labels " + labels.shape().to_string() + " must have the shape of logits " +
                                logits.shape().to_string() + " without its last dim");
      const int64_t classes = logits.dim(logits.rank() - 1);
      const int64_t rows = classes == 0 ? 0 : logits.num_elements() / classes;
      Tensor& loss = ctx.allocate_output(0, DType::f32, labels.shape());
      Tensor& bp = ctx.allocate_output(1, DType::f32, logits.shape());
      flag = static_cast<int*>(d.pinned().allocate(sizeof(int), &block));
      if (!flag) return resource_exhausted("no pinned host memory for the label check");
      *flag = 0;
      // Mapped pinned memory is not assumed: the device writes a device word, copied back.
      Tensor bad(DType::i32, Shape({1}), d.allocator());
      AF_CUDA_RETURN(cudaMemsetAsync(bad.raw_data(), 0, sizeof(int), d.compute()), "cudaMemsetAsync");
      AF_CUDA_RETURN(launch_sparse_xent(f32(logits), labels.raw_data(), labels.dtype() == DType::i64, f32(loss), f32(bp),
                                        rows, classes, static_cast<int*>(bad.raw_data()), d.compute()),
                     "kernel launch");
      AF_CUDA_RETURN(cudaMemcpyAsync(flag, bad.raw_data(), sizeof(int), cudaMemcpyDeviceToHost, d.compute()),
                     "cudaMemcpyAsync (label check)");
      return Status::OK();
    }();
    if (!s.ok()) ctx.fail(s);
    d.when_done(d.compute(), [&ctx, &d, flag, block, done = std::move(done)](Status st) {
      if (!st.ok()) ctx.fail(st);
      else if (flag && *flag)
        ctx.fail(out_of_range("a label is outside [0, " +
                              std::to_string(ctx.input(0).dim(ctx.input(0).rank() - 1)) + ") (checked on the GPU)"));
      if (flag) d.pinned().deallocate(flag, block);
      done();
    });
  }
};

class XentKernel final : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

 protected:
  Result<cudaStream_t> enqueue(OpKernelContext& ctx, GpuDevice& d) override {
    AF_RETURN_IF_ERROR(check_f32_inputs(ctx, d, 2));
    const Tensor& logits = ctx.input(0);
    const Tensor& labels = ctx.input(1);
    if (logits.rank() < 1 || logits.shape() != labels.shape())
      return invalid_argument("logits " + logits.type_string() + " and labels " + labels.type_string() +
                              " must have one shape");
    const int64_t classes = logits.dim(logits.rank() - 1);
    const int64_t rows = classes == 0 ? 0 : logits.num_elements() / classes;
    std::vector<int64_t> lead(logits.shape().dims().begin(), logits.shape().dims().end() - 1);
    Tensor& loss = ctx.allocate_output(0, DType::f32, Shape(lead));
    Tensor& bp = ctx.allocate_output(1, DType::f32, logits.shape());
    AF_CUDA_RETURN(launch_softmax_xent(f32(logits), f32(labels), f32(loss), f32(bp), rows, classes, d.compute()),
                   "kernel launch");
    return d.compute();
  }
};

// ---- BiasAddGrad ----

class BiasAddGradKernel final : public GpuOpKernel {
 public:
  explicit BiasAddGradKernel(const Node& n) : GpuOpKernel(n), nchw_(n.attr_string("data_format", "NHWC") == "NCHW") {}

 protected:
  Result<cudaStream_t> enqueue(OpKernelContext& ctx, GpuDevice& d) override {
    AF_RETURN_IF_ERROR(check_f32_inputs(ctx, d, 1));
    const Tensor& g = ctx.input(0);
    const int r = g.rank();
    if (r < (nchw_ ? 2 : 1)) return invalid_argument("gradient of shape " + g.shape().to_string() + " has too low a rank");
    const int axis = nchw_ ? 1 : r - 1;
    int64_t inner = 1;
    for (int i = axis + 1; i < r; ++i) inner *= g.dim(i);
    const int64_t channels = g.dim(axis);
    Tensor& out = ctx.allocate_output(0, DType::f32, Shape({channels}));
    AF_CUDA_RETURN(launch_bias_add_grad(f32(g), f32(out), g.num_elements(), channels, inner, d.compute()),
                   "kernel launch");
    return d.compute();
  }

 private:
  bool nchw_;
};

// ---- comparisons, Select, BroadcastReduced ----

Result<BroadcastDims> broadcast_dims(const Shape& a, const Shape& b, Shape* out) {
  BroadcastPlan plan;
  if (!make_broadcast_plan({&a, &b}, &plan))
    return invalid_argument("shapes " + a.to_string() + " and " + b.to_string() + " do not broadcast");
  if (plan.dims.size() > static_cast<size_t>(kMaxDims))
    return unimplemented("broadcasting over more than " + std::to_string(kMaxDims) + " collapsed dims");
  BroadcastDims bd;
  bd.rank = static_cast<int>(plan.dims.size());
  bd.n = plan.num_elements;
  bd.same_shape = a == b;
  for (int i = 0; i < bd.rank; ++i) {
    bd.dims[i] = plan.dims[static_cast<size_t>(i)];
    bd.stride_a[i] = plan.strides[0][static_cast<size_t>(i)];
    bd.stride_b[i] = plan.strides[1][static_cast<size_t>(i)];
  }
  *out = plan.out_shape;
  return bd;
}

template <CompareOp Op>
class CompareKernel final : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

 protected:
  Result<cudaStream_t> enqueue(OpKernelContext& ctx, GpuDevice& d) override {
    AF_RETURN_IF_ERROR(check_f32_inputs(ctx, d, 2));
    Shape out_shape;
    AF_ASSIGN_OR_RETURN(BroadcastDims bd, broadcast_dims(ctx.input(0).shape(), ctx.input(1).shape(), &out_shape));
    Tensor& out = ctx.allocate_output(0, DType::boolean, out_shape);
    AF_CUDA_RETURN(launch_compare(Op, f32(ctx.input(0)), f32(ctx.input(1)), static_cast<bool*>(out.raw_data()), bd,
                                  d.compute()),
                   "kernel launch");
    return d.compute();
  }
};

class SelectKernel final : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

 protected:
  Result<cudaStream_t> enqueue(OpKernelContext& ctx, GpuDevice& d) override {
    const Tensor& c = ctx.input(0);
    const Tensor& t = ctx.input(1);
    const Tensor& e = ctx.input(2);
    if (c.dtype() != DType::boolean) return invalid_argument("condition is " + c.type_string() + ", not bool");
    AF_RETURN_IF_ERROR(on_device(c, d, "condition"));
    for (int i : {1, 2}) {
      const Tensor& x = ctx.input(i);
      if (x.dtype() != DType::f32) return unimplemented("input " + std::to_string(i) + " is " + x.type_string() + ": float32 only on a GPU");
      AF_RETURN_IF_ERROR(on_device(x, d, "input " + std::to_string(i)));
    }
    // TF1's Select also takes a vector condition picking rows; numpy broadcasting would
    // align it with the last dim instead, so that form is refused rather than misread.
    if (c.rank() == 1 && t.rank() > 1 && c.shape() != t.shape())
      return unimplemented("a vector condition selecting rows is not supported on a GPU");
    BroadcastPlan plan;
    if (!make_broadcast_plan({&c.shape(), &t.shape(), &e.shape()}, &plan))
      return invalid_argument("condition " + c.shape().to_string() + ", t " + t.shape().to_string() + " and e " +
                              e.shape().to_string() + " do not broadcast");
    if (plan.dims.size() > static_cast<size_t>(kMaxDims)) return unimplemented("too many broadcast dims for a GPU");
    Broadcast3Dims bd;
    bd.rank = static_cast<int>(plan.dims.size());
    bd.n = plan.num_elements;
    for (int i = 0; i < bd.rank; ++i) {
      bd.dims[i] = plan.dims[static_cast<size_t>(i)];
      for (int k = 0; k < 3; ++k) bd.stride[k][i] = plan.strides[static_cast<size_t>(k)][static_cast<size_t>(i)];
    }
    Tensor& out = ctx.allocate_output(0, DType::f32, plan.out_shape);
    AF_CUDA_RETURN(launch_select(static_cast<const bool*>(c.raw_data()), f32(t), f32(e), f32(out), bd, d.compute()),
                   "kernel launch");
    return d.compute();
  }
};

class BroadcastReducedKernel final : public GpuOpKernel {
 public:
  explicit BroadcastReducedKernel(const Node& n)
      : GpuOpKernel(n), axes_(n.attr_ints("axes")), mean_(n.attr_bool("mean")) {}

 protected:
  Result<cudaStream_t> enqueue(OpKernelContext& ctx, GpuDevice& d) override {
    const Tensor& g = ctx.input(0);
    if (g.dtype() != DType::f32) return unimplemented("gradient is " + g.type_string() + ": float32 only on a GPU");
    AF_RETURN_IF_ERROR(on_device(g, d, "gradient"));
    const Shape& s = ctx.input(1).shape();  // only its shape is read
    const int r = s.rank();
    if (r > kMaxDims) return unimplemented("rank above 8 on a GPU");
    std::vector<bool> reduced(static_cast<size_t>(r), axes_.empty());
    for (int64_t a : axes_) {
      const int64_t n = a < 0 ? a + r : a;
      if (n < 0 || n >= r) return invalid_argument("axis " + std::to_string(a) + " out of range for rank " + std::to_string(r));
      reduced[static_cast<size_t>(n)] = true;
    }
    BroadcastDims bd;
    bd.rank = r;
    int64_t kept = 1, count = 1;
    for (int i = r - 1; i >= 0; --i) {
      bd.dims[i] = s.dim(i);
      if (reduced[static_cast<size_t>(i)]) {
        count *= s.dim(i);
      } else {
        bd.stride_a[i] = kept;
        kept *= s.dim(i);
      }
    }
    if (g.num_elements() != kept)
      return invalid_argument("reduced gradient has " + std::to_string(g.num_elements()) + " elements, expected " +
                              std::to_string(kept));
    Tensor& out = ctx.allocate_output(0, DType::f32, s);
    bd.n = out.num_elements();
    if (r == 0) {
      bd.rank = 1;
      bd.dims[0] = 1;
      bd.stride_a[0] = 0;
    }
    const float scale = mean_ && count > 0 ? 1.f / static_cast<float>(count) : 1.f;
    AF_CUDA_RETURN(launch_broadcast_scaled(f32(g), f32(out), bd, scale, d.compute()), "kernel launch");
    return d.compute();
  }

 private:
  std::vector<int64_t> axes_;
  bool mean_;
};

// The gradient of a broadcast operand: g summed down to the shape of input 1 (only its
// shape is read). Equal shapes pass g through without device work (2-D MatMul's case).
class SumToShapeOfKernel final : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

 protected:
  Result<cudaStream_t> enqueue(OpKernelContext& ctx, GpuDevice& d) override {
    const Tensor& g = ctx.input(0);
    if (g.dtype() != DType::f32) return unimplemented("gradient is " + g.type_string() + ": float32 only on a GPU");
    AF_RETURN_IF_ERROR(on_device(g, d, "gradient"));
    const Shape& target = ctx.input(1).shape();
    if (g.shape() == target) {
      ctx.set_output(0, g);
      return d.compute();
    }
    const int r = g.rank(), t = target.rank();
    auto refuse = [&] {
      return invalid_argument("gradient of shape " + g.shape().to_string() + " cannot be summed to shape " +
                              target.to_string());
    };
    if (t > r) return refuse();
    std::vector<int64_t> strides(static_cast<size_t>(r));
    int64_t stride = 1;
    for (int i = r - 1; i >= 0; --i) {
      strides[static_cast<size_t>(i)] = stride;
      stride *= g.dim(i);
    }
    ReduceDims rd;
    rd.out_n = 1;
    rd.reduced_n = 1;
    for (int i = 0; i < r; ++i) {
      const int64_t dim = g.dim(i);
      const int64_t want = i >= r - t ? target.dim(i - (r - t)) : 1;
      if (want != dim && want != 1) return refuse();
      if (dim == 1) continue;
      if (want == 1) {
        if (rd.reduced_rank == kMaxDims) return unimplemented("reducing more than 8 dims on a GPU");
        rd.reduced[rd.reduced_rank] = dim;
        rd.reduced_stride[rd.reduced_rank++] = strides[static_cast<size_t>(i)];
        rd.reduced_n *= dim;
      } else {
        if (rd.kept_rank == kMaxDims) return unimplemented("keeping more than 8 dims in a GPU reduction");
        rd.kept[rd.kept_rank] = dim;
        rd.kept_stride[rd.kept_rank++] = strides[static_cast<size_t>(i)];
        rd.out_n *= dim;
      }
    }
    Tensor& out = ctx.allocate_output(0, DType::f32, target);
    AF_CUDA_RETURN(launch_reduce(false, f32(g), f32(out), rd, d.compute()), "kernel launch");
    return d.compute();
  }
};

// ---- Cast, ZerosLike, OnesLike ----

Result<ElemType> elem_type(DType t) {
  switch (t) {
    case DType::f32: return ElemType::f32;
    case DType::i32: return ElemType::i32;
    case DType::i64: return ElemType::i64;
    case DType::boolean: return ElemType::boolean;
    default: return unimplemented(std::string("Cast of ") + dtype_name(t) + " on a GPU");
  }
}

class CastKernel final : public GpuOpKernel {
 public:
  explicit CastKernel(const Node& n) : GpuOpKernel(n), to_(n.output_dtypes[0]) {}

 protected:
  Result<cudaStream_t> enqueue(OpKernelContext& ctx, GpuDevice& d) override {
    const Tensor& x = ctx.input(0);
    AF_RETURN_IF_ERROR(on_device(x, d, "input 0"));
    AF_ASSIGN_OR_RETURN(ElemType from, elem_type(x.dtype()));
    AF_ASSIGN_OR_RETURN(ElemType to, elem_type(to_));
    Tensor& y = ctx.allocate_output(0, to_, x.shape());
    if (from == to) {
      AF_CUDA_RETURN(cudaMemcpyAsync(y.raw_data(), x.raw_data(), x.bytes(), cudaMemcpyDeviceToDevice, d.compute()),
                     "cudaMemcpyAsync");
      return d.compute();
    }
    AF_CUDA_RETURN(launch_cast(from, x.raw_data(), to, y.raw_data(), x.num_elements(), d.compute()), "kernel launch");
    return d.compute();
  }

 private:
  DType to_;
};

template <int V>
class FillLikeKernel final : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

 protected:
  Result<cudaStream_t> enqueue(OpKernelContext& ctx, GpuDevice& d) override {
    const Tensor& x = ctx.input(0);  // only its shape and dtype are read
    if (x.dtype() != DType::f32) return unimplemented("input is " + x.type_string() + ": float32 only on a GPU");
    Tensor& y = ctx.allocate_output(0, DType::f32, x.shape());
    AF_CUDA_RETURN(launch_fill(f32(y), y.num_elements(), static_cast<float>(V), d.compute()), "kernel launch");
    return d.compute();
  }
};

// ---- optimizers ----

struct RuleInfo {
  ApplyRule rule;
  int grad;
  std::vector<std::string> slots;
};

template <ApplyRule R>
RuleInfo rule_info() {
  switch (R) {
    case ApplyRule::gradient_descent: return {R, 1, {}};
    case ApplyRule::momentum: return {R, 1, {"accum"}};
    case ApplyRule::adagrad: return {R, 1, {"accum"}};
    case ApplyRule::adadelta: return {R, 3, {"accum", "accum_update"}};
    case ApplyRule::rmsprop: return {R, 4, {"ms", "mom"}};
    case ApplyRule::adam: return {R, 6, {"m", "v"}};
    case ApplyRule::ftrl: return {R, 0, {"accum", "linear"}};
  }
  return {R, 0, {}};
}

// The scalars of gpu_train_kernels.h's ApplyScalars from the hyperparameters in input
// order (gradient left out), with the host kernel's checks.
Result<ApplyScalars> apply_scalars(ApplyRule rule, const std::vector<double>& s, bool nesterov) {
  ApplyScalars k;
  auto f = [](double v) { return static_cast<float>(v); };
  switch (rule) {
    case ApplyRule::gradient_descent:
    case ApplyRule::adagrad: k.a = f(s[0]); break;
    case ApplyRule::momentum: k.a = f(s[0]); k.b = f(s[1]); k.flag = nesterov; break;
    case ApplyRule::adadelta: k.a = f(s[0]); k.b = f(s[1]); k.c = f(s[2]); break;
    case ApplyRule::rmsprop: k.a = f(s[0]); k.b = f(s[1]); k.c = f(s[2]); k.d = f(s[3]); break;
    case ApplyRule::adam:
      if (s[0] == 1 || s[1] == 1)
        return invalid_argument("beta1_power and beta2_power must not be 1 (bias correction divides by 1 - beta^t)");
      // As the host kernel: lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t) in double, then float.
      k.a = f(s[2] * std::sqrt(1 - s[1]) / (1 - s[0]));
      k.b = f(s[3]); k.c = f(s[4]); k.d = f(s[5]); k.flag = nesterov;
      break;
    case ApplyRule::ftrl:
      if (!(s[0] > 0)) return invalid_argument("lr must be positive, got " + std::to_string(s[0]));
      if (!(s[1] >= 0)) return invalid_argument("l1 must be non-negative, got " + std::to_string(s[1]));
      if (!(s[2] >= 0)) return invalid_argument("l2 must be non-negative, got " + std::to_string(s[2]));
      if (!(s[3] <= 0)) return invalid_argument("lr_power must be non-positive, got " + std::to_string(s[3]));
      k.a = f(s[0]); k.b = f(s[1]); k.c = f(s[2]); k.d = f(s[3]); k.flag = s[3] == -0.5;
      break;
  }
  return k;
}

// The variable and its slots live on this GPU; the update runs in place on the compute
// stream (a buffer a reader still holds is copied first, so reads stay snapshots, as on
// the host). Hyperparameters are host scalars (gpu_input_in_host_memory).
template <ApplyRule R>
class ApplyKernel final : public GpuOpKernel {
 public:
  explicit ApplyKernel(const Node& n)
      : GpuOpKernel(n), info_(rule_info<R>()), nesterov_(n.attr_bool("use_nesterov", false)) {
    names_.push_back(n.attr_string("variable"));
    for (const std::string& s : info_.slots) names_.push_back(n.attr_string(s));
  }

 protected:
  Result<cudaStream_t> enqueue(OpKernelContext& ctx, GpuDevice& d) override {
    std::vector<double> scalars;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      if (i == info_.grad) continue;
      const Tensor& t = ctx.input(i);
      if (t.num_elements() != 1 || !is_floating(t.dtype()))
        return invalid_argument("hyperparameter input " + std::to_string(i) + " must be a float scalar, got " +
                                t.type_string());
      if (t.device().type != DeviceType::CPU)
        return invalid_argument("hyperparameter input " + std::to_string(i) + " is on " + t.device().to_string() +
                                ", expected host memory");
      scalars.push_back(t.element_as_double(0));
    }
    AF_ASSIGN_OR_RETURN(ApplyScalars k, apply_scalars(info_.rule, scalars, nesterov_));
    for (size_t i = 0; i < names_.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (names_[i] == names_[j])
          return invalid_argument("variable '" + names_[i] + "' is named twice among the variable and its slots");
    if (!ctx.resources()) return failed_precondition("no resource manager: optimizer updates run in a session");
    std::vector<std::shared_ptr<VariableState>> states;
    for (const std::string& n : names_) states.push_back(ctx.resources()->variable(n));
    std::vector<std::mutex*> mus;
    for (auto& s : states) mus.push_back(&s->mu);
    std::sort(mus.begin(), mus.end());
    std::vector<std::unique_lock<std::mutex>> locks;
    for (std::mutex* m : mus) locks.emplace_back(*m);
    for (size_t i = 0; i < states.size(); ++i) {
      const Tensor& v = states[i]->value;
      if (!v.valid())
        return failed_precondition("variable '" + names_[i] + "' is updated before it was initialized (run Session::run_init())");
      if (v.dtype() != DType::f32)
        return unimplemented("variable '" + names_[i] + "' is " + v.type_string() + ": GPU optimizers update float32");
      AF_RETURN_IF_ERROR(on_device(v, d, "variable '" + names_[i] + "'"));
      if (v.shape() != states[0]->value.shape())
        return invalid_argument("slot '" + names_[i] + "' " + v.type_string() + " does not match variable '" + names_[0] +
                                "' " + states[0]->value.type_string());
    }
    const Tensor& grad = ctx.input(info_.grad);
    AF_RETURN_IF_ERROR(on_device(grad, d, "gradient"));
    if (grad.dtype() != DType::f32 || grad.shape() != states[0]->value.shape())
      return invalid_argument("gradient " + grad.type_string() + " does not match variable '" + names_[0] + "' " +
                              states[0]->value.type_string());
    for (auto& s : states)
      if (s->value.buffer_use_count() > 1) {
        Tensor copy(s->value.dtype(), s->value.shape(), d.allocator());
        AF_CUDA_RETURN(cudaMemcpyAsync(copy.raw_data(), s->value.raw_data(), s->value.bytes(), cudaMemcpyDeviceToDevice,
                                       d.compute()),
                       "cudaMemcpyAsync (variable snapshot)");
        s->value = std::move(copy);
      }
    Tensor& w = states[0]->value;
    float* s0 = info_.slots.size() > 0 ? f32(states[1]->value) : nullptr;
    float* s1 = info_.slots.size() > 1 ? f32(states[2]->value) : nullptr;
    AF_CUDA_RETURN(launch_apply(info_.rule, k, f32(w), s0, s1, f32(grad), w.num_elements(), d.compute()),
                   "kernel launch");
    ctx.set_output(0, w);
    return d.compute();
  }

 private:
  RuleInfo info_;
  bool nesterov_;
  std::vector<std::string> names_;
};

AF_REGISTER_GPU_KERNEL("SparseSoftmaxCrossEntropyWithLogits", SparseXentKernel);
AF_REGISTER_GPU_KERNEL("SoftmaxCrossEntropyWithLogits", XentKernel);
AF_REGISTER_GPU_KERNEL("BiasAddGrad", BiasAddGradKernel);
AF_REGISTER_GPU_KERNEL("Greater", CompareKernel<CompareOp::greater>);
AF_REGISTER_GPU_KERNEL("GreaterEqual", CompareKernel<CompareOp::greater_equal>);
AF_REGISTER_GPU_KERNEL("Less", CompareKernel<CompareOp::less>);
AF_REGISTER_GPU_KERNEL("LessEqual", CompareKernel<CompareOp::less_equal>);
AF_REGISTER_GPU_KERNEL("Select", SelectKernel);
AF_REGISTER_GPU_KERNEL("BroadcastReduced", BroadcastReducedKernel);
AF_REGISTER_GPU_KERNEL("SumToShapeOf", SumToShapeOfKernel);
AF_REGISTER_GPU_KERNEL("Cast", CastKernel);
AF_REGISTER_GPU_KERNEL("ZerosLike", FillLikeKernel<0>);
AF_REGISTER_GPU_KERNEL("OnesLike", FillLikeKernel<1>);
AF_REGISTER_GPU_KERNEL("ApplyGradientDescent", ApplyKernel<ApplyRule::gradient_descent>);
AF_REGISTER_GPU_KERNEL("ApplyMomentum", ApplyKernel<ApplyRule::momentum>);
AF_REGISTER_GPU_KERNEL("ApplyAdagrad", ApplyKernel<ApplyRule::adagrad>);
AF_REGISTER_GPU_KERNEL("ApplyAdadelta", ApplyKernel<ApplyRule::adadelta>);
AF_REGISTER_GPU_KERNEL("ApplyRMSProp", ApplyKernel<ApplyRule::rmsprop>);
AF_REGISTER_GPU_KERNEL("ApplyAdam", ApplyKernel<ApplyRule::adam>);
AF_REGISTER_GPU_KERNEL("ApplyFtrl", ApplyKernel<ApplyRule::ftrl>);

}  // namespace
}  // namespace actorflow::gpu
