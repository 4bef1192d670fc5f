// Conv2D, Conv2DBackpropInput and Conv2DBackpropFilter on the GPU through cuDNN 9, f32,
// with the CPU kernels' semantics (ops/cpu/conv_kernels.cpp): NHWC input, [KH,KW,C,O]
// filter, strides of 2 or 4 elements, TF's SAME/VALID padding, no dilation.
//
// cuDNN has no [KH,KW,C,O] filter layout, so the filter goes through a transpose to its
// NHWC filter layout [O,KH,KW,C] (and the filter gradient back): the filters are small.
// cuDNN pads both sides alike; where TF's SAME padding is uneven (an odd total) the input
// is padded explicitly into scratch and the convolution runs unpadded (the input gradient
// is computed padded and cropped). Scratch and workspaces come from the device's pool.
// The algorithm is cuDNN's heuristic choice (no timing runs: those would synchronize),
// kept per input shape by each kernel. TF32 only with AF_GPU_ALLOW_TF32=1.
#include <map>
#include <mutex>
#include <tuple>

#include "common/conv_geometry.h"
#include "cuda/gpu_cudnn_common.h"

namespace actorflow::gpu {
namespace {

enum class Pass { forward, backward_data, backward_filter };

struct ConvGeo {
  int64_t n = 0, h = 0, w = 0, c = 0, kh = 0, kw = 0, o = 0, oh = 0, ow = 0;
  int64_t pt = 0, pb = 0, pl = 0, pr = 0;
  bool explicit_pad() const { return pt != pb || pl != pr; }
  int64_t hp() const { return explicit_pad() ? h + pt + pb : h; }
  int64_t wp() const { return explicit_pad() ? w + pl + pr : w; }
  Shape out_shape() const { return Shape{n, oh, ow, o}; }
  auto key() const { return std::make_tuple(n, h, w, c, kh, kw, o); }
};

// Descriptors and algorithm of one input shape.
struct ConvPlan {
  TensorDesc x, y;
  FilterDesc f;
  ConvDesc conv;
  int algo = 0;
  size_t workspace = 0;
};

// cuDNN's heuristic lists its candidates best first: the first that ran within a
// workspace cap.
template <typename Perf>
bool pick_algo(const Perf* perf, int n, ConvPlan* p) {
  constexpr size_t kMaxWorkspace = size_t{1} << 30;
  for (int i = 0; i < n; ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kMaxWorkspace) {
      p->algo = perf[i].algo;
      p->workspace = perf[i].memory;
      return true;
    }
  return false;
}

Status zero(Tensor& t, GpuDevice& d) {
  return cuda_status(cudaMemsetAsync(t.raw_data(), 0, t.bytes(), d.compute()), "cudaMemsetAsync");
}

const float* cf(const Tensor& t) { return static_cast<const float*>(t.raw_data()); }
float* mf(Tensor& t) { return static_cast<float*>(t.raw_data()); }

class CudnnConvBase : public GpuOpKernel {
 public:
  CudnnConvBase(const Node& n, Pass pass) : GpuOpKernel(n), pass_(pass) {
    if (conv_geom::parse_hw(n, "strides", &sh_, &sw_, &attr_error_)) conv_geom::parse_padding(n, &padding_, &attr_error_);
  }

 protected:
  Status geometry(const Tensor& x, const Tensor& f, ConvGeo* s) const {
    if (!attr_error_.empty()) return invalid_argument(attr_error_);
    conv_geom::Axis ah, aw;
    std::string err;
    if (!conv_geom::conv_operands(x.shape(), f.shape(), sh_, sw_, padding_, &ah, &aw, &err)) return invalid_argument(err);
    s->n = x.dim(0);
    s->h = x.dim(1);
    s->w = x.dim(2);
    s->c = x.dim(3);
    s->kh = f.dim(0);
    s->kw = f.dim(1);
    s->o = f.dim(3);
    s->oh = ah.out;
    s->ow = aw.out;
    s->pt = ah.pad_before;
    s->pl = aw.pad_before;
    // The padding after: what the last window needs beyond the input (never negative).
    s->pb = std::max<int64_t>(0, (ah.out - 1) * sh_ + s->kh - s->h - s->pt);
    s->pr = std::max<int64_t>(0, (aw.out - 1) * sw_ + s->kw - s->w - s->pl);
    if (padding_ == conv_geom::Padding::valid) s->pb = s->pr = 0;
    return Status::OK();
  }

  static Status check_out_backprop(const ConvGeo& s, const Tensor& dy) {
    if (dy.shape() != s.out_shape())
      return invalid_argument("out_backprop " + dy.type_string() + " does not match the convolution's output float32" +
                              s.out_shape().to_string());
    return Status::OK();
  }

  // What a pass holds while it queues its cuDNN call: the handle, this kernel's plans and
  // the handle locked, the plan of the shape, its workspace. Scratch that a pass declares
  // after its Launch is freed before it, still under the locks.
  struct Launch {
    cudnnHandle_t h = nullptr;
    std::unique_lock<std::mutex> plans_lock, dnn_lock;
    ConvPlan* p = nullptr;
    Scratch ws;
  };
  Status launch(GpuDevice& d, const ConvGeo& s, Launch* l) {
    AF_ASSIGN_OR_RETURN(l->h, d.dnn());
    l->plans_lock = std::unique_lock<std::mutex>(mu_);
    l->dnn_lock = std::unique_lock<std::mutex>(d.dnn_mutex());
    AF_ASSIGN_OR_RETURN(l->p, plan(d, l->h, s));
    return l->ws.allocate(d, l->p->workspace, "a cuDNN workspace");
  }

  // Checks, geometry and the output of this pass, then `launch` (l). Null when the output
  // is already final: empty, or zeroed because an operand is empty.
  Result<Tensor*> begin(OpKernelContext& ctx, GpuDevice& d, ConvGeo* s, Launch* l) {
    const bool fwd = pass_ == Pass::forward;
    const int inputs = fwd ? 2 : 3;
    AF_RETURN_IF_ERROR(check_f32_inputs(ctx, d, inputs));
    AF_RETURN_IF_ERROR(geometry(ctx.input(0), ctx.input(1), s));
    if (!fwd) AF_RETURN_IF_ERROR(check_out_backprop(*s, ctx.input(2)));
    // A gradient pass's input (data) or filter lends only its shape, to its own gradient.
    const int shape_only = pass_ == Pass::backward_data ? 0 : pass_ == Pass::backward_filter ? 1 : -1;
    Tensor& out = ctx.allocate_output(0, DType::f32, fwd ? s->out_shape() : ctx.input(shape_only).shape());
    if (out.num_elements() == 0) return static_cast<Tensor*>(nullptr);
    for (int i = 0; i < inputs; ++i)
      if (i != shape_only && ctx.input(i).num_elements() == 0) {
        AF_RETURN_IF_ERROR(zero(out, d));
        return static_cast<Tensor*>(nullptr);
      }
    AF_RETURN_IF_ERROR(launch(d, *s, l));
    return &out;
  }

  // f, [KH,KW,C,O], as cuDNN's NHWC filter [O,KH,KW,C] in `filter`.
  static Status transposed_filter(GpuDevice& d, const ConvGeo& s, const Tensor& f, Scratch& filter) {
    AF_RETURN_IF_ERROR(filter.allocate(d, f.bytes(), "a transposed filter"));
    return cuda_status(launch_transpose2d(cf(f), filter.f32(), s.kh * s.kw * s.c, s.o, d.compute()), "kernel launch");
  }

  // x, or x padded into `padded` where TF's padding is uneven.
  static Result<const float*> padded_input(GpuDevice& d, const ConvGeo& s, const Tensor& x, Scratch& padded) {
    if (!s.explicit_pad()) return cf(x);
    AF_RETURN_IF_ERROR(padded.allocate(d, size_t(s.n * s.hp() * s.wp() * s.c) * sizeof(float), "a padded input"));
    AF_CUDA_RETURN(launch_pad_nhwc(cf(x), padded.f32(), s.n, s.h, s.w, s.c, s.pt, s.pl, s.hp(), s.wp(), d.compute()),
                   "kernel launch");
    return static_cast<const float*>(padded.f32());
  }

  // The plan of s's shape, made on first sight. Called under mu_.
  Result<ConvPlan*> plan(GpuDevice& d, cudnnHandle_t h, const ConvGeo& s) {
    auto it = plans_.find(s.key());
    if (it != plans_.end()) return it->second.get();
    auto p = std::make_unique<ConvPlan>();
    AF_RETURN_IF_ERROR(set_nhwc(p->x, s.n, s.hp(), s.wp(), s.c));
    AF_RETURN_IF_ERROR(set_nhwc(p->y, s.n, s.oh, s.ow, s.o));
    AF_RETURN_IF_ERROR(p->f.create());
    int o, c, kh, kw, ph, pw, sh, sw;
    AF_RETURN_IF_ERROR(cudnn_dim(s.o, &o, "output channels"));
    AF_RETURN_IF_ERROR(cudnn_dim(s.c, &c, "input channels"));
    AF_RETURN_IF_ERROR(cudnn_dim(s.kh, &kh, "filter height"));
    AF_RETURN_IF_ERROR(cudnn_dim(s.kw, &kw, "filter width"));
    AF_RETURN_IF_ERROR(cudnn_dim(s.explicit_pad() ? 0 : s.pt, &ph, "padding"));
    AF_RETURN_IF_ERROR(cudnn_dim(s.explicit_pad() ? 0 : s.pl, &pw, "padding"));
    AF_RETURN_IF_ERROR(cudnn_dim(sh_, &sh, "stride"));
    AF_RETURN_IF_ERROR(cudnn_dim(sw_, &sw, "stride"));
    AF_CUDNN_RETURN(cudnnSetFilter4dDescriptor(p->f.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, o, c, kh, kw),
                    "cudnnSetFilter4dDescriptor");
    AF_RETURN_IF_ERROR(p->conv.create());
    AF_CUDNN_RETURN(cudnnSetConvolution2dDescriptor(p->conv.get(), ph, pw, sh, sw, 1, 1, CUDNN_CROSS_CORRELATION,
                                                    CUDNN_DATA_FLOAT),
                    "cudnnSetConvolution2dDescriptor");
    AF_CUDNN_RETURN(cudnnSetConvolutionMathType(p->conv.get(), cudnn_tf32_allowed() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH),
                    "cudnnSetConvolutionMathType");
    int dn = 0, dc = 0, dh = 0, dw = 0;
    AF_CUDNN_RETURN(cudnnGetConvolution2dForwardOutputDim(p->conv.get(), p->x.get(), p->f.get(), &dn, &dc, &dh, &dw),
                    "cudnnGetConvolution2dForwardOutputDim");
    if (dh != s.oh || dw != s.ow)
      return internal_error("cuDNN's output " + std::to_string(dh) + "x" + std::to_string(dw) + " differs from TF's " +
                      std::to_string(s.oh) + "x" + std::to_string(s.ow));
    bool found = false;
    if (pass_ == Pass::forward) {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      int n = 0;
      AF_CUDNN_RETURN(cudnnGetConvolutionForwardAlgorithm_v7(h, p->x.get(), p->f.get(), p->conv.get(), p->y.get(),
                                                             CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf),
                      "cudnnGetConvolutionForwardAlgorithm_v7");
      found = pick_algo(perf, n, p.get());
    } else if (pass_ == Pass::backward_data) {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      int n = 0;
      AF_CUDNN_RETURN(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p->f.get(), p->y.get(), p->conv.get(), p->x.get(),
                                                                  CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf),
                      "cudnnGetConvolutionBackwardDataAlgorithm_v7");
      found = pick_algo(perf, n, p.get());
    } else {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      int n = 0;
      AF_CUDNN_RETURN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p->x.get(), p->y.get(), p->conv.get(),
                                                                    p->f.get(), CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                                                    &n, perf),
                      "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
      found = pick_algo(perf, n, p.get());
    }
    if (!found)
      return unimplemented("cuDNN has no algorithm for input [" + std::to_string(s.n) + "," + std::to_string(s.h) + "," +
                           std::to_string(s.w) + "," + std::to_string(s.c) + "] and filter [" + std::to_string(s.kh) +
                           "," + std::to_string(s.kw) + "," + std::to_string(s.c) + "," + std::to_string(s.o) + "]");
    ConvPlan* raw = p.get();
    plans_.emplace(s.key(), std::move(p));
    return raw;
  }

 private:
  std::mutex mu_;  // plans_; held while queuing work with a plan's descriptors
  Pass pass_;
  int64_t sh_ = 1, sw_ = 1;
  conv_geom::Padding padding_ = conv_geom::Padding::valid;
  std::string attr_error_;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>, std::unique_ptr<ConvPlan>> plans_;
};

class Conv2DKernel final : public CudnnConvBase {
 public:
  explicit Conv2DKernel(const Node& n) : CudnnConvBase(n, Pass::forward) {}

 protected:
  Result<cudaStream_t> enqueue(OpKernelContext& ctx, GpuDevice& d) override {
    ConvGeo s;
    Launch l;
    AF_ASSIGN_OR_RETURN(Tensor * y, begin(ctx, d, &s, &l));
    if (!y) return d.compute();
    Scratch filter, padded;
    AF_RETURN_IF_ERROR(transposed_filter(d, s, ctx.input(1), filter));
    AF_ASSIGN_OR_RETURN(const float* in, padded_input(d, s, ctx.input(0), padded));
    const float one = 1.f, zero_f = 0.f;
    AF_CUDNN_RETURN(cudnnConvolutionForward(l.h, &one, l.p->x.get(), in, l.p->f.get(), filter.get(), l.p->conv.get(),
                                            static_cast<cudnnConvolutionFwdAlgo_t>(l.p->algo), l.ws.get(),
                                            l.p->workspace, &zero_f, l.p->y.get(), mf(*y)),
                    "cudnnConvolutionForward");
    return d.compute();
  }
};

// Conv2DBackpropInput(input, filter, out_backprop): input lends only its shape.
class Conv2DBackpropInputKernel final : public CudnnConvBase {
 public:
  explicit Conv2DBackpropInputKernel(const Node& n) : CudnnConvBase(n, Pass::backward_data) {}

 protected:
  Result<cudaStream_t> enqueue(OpKernelContext& ctx, GpuDevice& d) override {
    ConvGeo s;
    Launch l;
    AF_ASSIGN_OR_RETURN(Tensor * dx, begin(ctx, d, &s, &l));
    if (!dx) return d.compute();
    Scratch filter, padded;
    AF_RETURN_IF_ERROR(transposed_filter(d, s, ctx.input(1), filter));
    float* out = mf(*dx);
    if (s.explicit_pad()) {
      AF_RETURN_IF_ERROR(padded.allocate(d, size_t(s.n * s.hp() * s.wp() * s.c) * sizeof(float), "a padded gradient"));
      out = padded.f32();
    }
    const float one = 1.f, zero_f = 0.f;
    AF_CUDNN_RETURN(cudnnConvolutionBackwardData(l.h, &one, l.p->f.get(), filter.get(), l.p->y.get(), cf(ctx.input(2)),
                                                 l.p->conv.get(), static_cast<cudnnConvolutionBwdDataAlgo_t>(l.p->algo),
                                                 l.ws.get(), l.p->workspace, &zero_f, l.p->x.get(), out),
                    "cudnnConvolutionBackwardData");
    if (s.explicit_pad())
      AF_CUDA_RETURN(launch_crop_nhwc(out, mf(*dx), s.n, s.h, s.w, s.c, s.pt, s.pl, s.hp(), s.wp(), d.compute()),
                     "kernel launch");
    return d.compute();
  }
};

// Conv2DBackpropFilter(input, filter, out_backprop): filter lends only its shape.
class Conv2DBackpropFilterKernel final : public CudnnConvBase {
 public:
  explicit Conv2DBackpropFilterKernel(const Node& n) : CudnnConvBase(n, Pass::backward_filter) {}

 protected:
  Result<cudaStream_t> enqueue(OpKernelContext& ctx, GpuDevice& d) override {
    ConvGeo s;
    Launch l;
    AF_ASSIGN_OR_RETURN(Tensor * dw, begin(ctx, d, &s, &l));
    if (!dw) return d.compute();
    Scratch filter, padded;
    AF_RETURN_IF_ERROR(filter.allocate(d, dw->bytes(), "a filter gradient"));
    AF_ASSIGN_OR_RETURN(const float* in, padded_input(d, s, ctx.input(0), padded));
    const float one = 1.f, zero_f = 0.f;
    AF_CUDNN_RETURN(cudnnConvolutionBackwardFilter(l.h, &one, l.p->x.get(), in, l.p->y.get(), cf(ctx.input(2)),
                                                   l.p->conv.get(), static_cast<cudnnConvolutionBwdFilterAlgo_t>(l.p->algo),
                                                   l.ws.get(), l.p->workspace, &zero_f, l.p->f.get(), filter.get()),
                    "cudnnConvolutionBackwardFilter");
    // [O, KH*KW*C] back to [KH*KW*C, O].
    AF_CUDA_RETURN(launch_transpose2d(filter.f32(), mf(*dw), s.o, s.kh * s.kw * s.c, d.compute()), "kernel launch");
    return d.compute();
  }
};

AF_REGISTER_GPU_KERNEL("Conv2D", Conv2DKernel);
AF_REGISTER_GPU_KERNEL("Conv2DBackpropInput", Conv2DBackpropInputKernel);
AF_REGISTER_GPU_KERNEL("Conv2DBackpropFilter", Conv2DBackpropFilterKernel);

}  // namespace
}  // namespace actorflow::gpu
