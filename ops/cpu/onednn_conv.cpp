// oneDNN convolution primitives (forward and both gradients) cached per shape; see
// onednn_conv.h.
#include "cpu/onednn_conv.h"
#include "cpu/aligned_buffer.h"
#include "cpu/onednn_matmul.h"
#include "actorflow/environment.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#ifdef AF_HAVE_ONEDNN
#include <omp.h>

#include <dnnl.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>
#endif

namespace actorflow::cpu {
namespace {
// AF_CONV_BACKEND=eigen forces the im2col path for the process (A/B runs of a whole
// model); unset or anything else: automatic.
ConvBackend backend_from_env() {
  const char* e = environment_switch(EnvironmentSwitch::conv_backend);
  if (e && std::strcmp(e, "eigen") == 0) return ConvBackend::eigen;
  if (e && std::strcmp(e, "onednn") == 0) return ConvBackend::onednn;
  return ConvBackend::automatic;
}

std::atomic<ConvBackend> g_backend{backend_from_env()};
}  // namespace

void set_conv_backend(ConvBackend b) { g_backend.store(b, std::memory_order_relaxed); }
ConvBackend conv_backend() { return g_backend.load(std::memory_order_relaxed); }

#ifdef AF_HAVE_ONEDNN

bool prefer_onednn_conv() { return conv_backend() != ConvBackend::eigen; }

namespace {

// filter_as_forward: the bfloat16 filter gradient of a stride-1 convolution computed as a
// forward convolution (make_filter_as_forward).
enum class Kind { forward, backprop_input, backprop_filter, filter_as_forward };

constexpr int64_t kMinBf16FilterGradChannels = 8;

struct Key {
  ConvDims d;
  Kind kind;
  bool bias = false, relu = false;  // the forward's post-ops
  bool bf16 = false;                // operands rounded to bfloat16, sums in float32
  bool operator==(const Key& o) const {
    const ConvDims& a = d;
    const ConvDims& b = o.d;
    return kind == o.kind && bias == o.bias && relu == o.relu && bf16 == o.bf16 && a.n == b.n && a.h == b.h && a.w == b.w &&
           a.c == b.c && a.kh == b.kh && a.kw == b.kw && a.o == b.o && a.oh == b.oh && a.ow == b.ow && a.sh == b.sh &&
           a.sw == b.sw && a.pad_t == b.pad_t && a.pad_l == b.pad_l;
  }
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    const ConvDims& d = k.d;
    size_t h = 1469598103934665603ull;
    for (int64_t v : {d.n, d.h, d.w, d.c, d.kh, d.kw, d.o, d.oh, d.ow, d.sh, d.sw, d.pad_t, d.pad_l,
                      static_cast<int64_t>(k.kind) | int64_t{k.bias} << 2 | int64_t{k.relu} << 3 |
                          int64_t{k.bf16} << 4})
      h = (h ^ static_cast<size_t>(v)) * 1099511628211ull;
    return h;
  }
};

// x and y (and their gradients) stay in our layout (nhwc); the filter (or its gradient)
// is reordered per call between hwio and the blocked layout oneDNN's direct JIT kernels
// use (5x5 filters of the CNN: 51K floats, a few us, against 3x faster convolutions than
// its GEMM path on plain hwio). Immutable once made; callers bring their own scratchpad
// (user mode) and filter buffer, so threads share it.
//
// In bfloat16 (Key::bf16) the primitive reads bfloat16 operands and writes float32: x and
// dy are converted per call (x_in, dy_in: their bfloat16 descs, empty in float32) and the
// filter's reorder converts as it blocks.
struct Entry {
  dnnl::memory::desc x, w_user, w, y, bias, scratch;
  dnnl::memory::desc x_in, dy_in;
  dnnl::primitive prim;
  dnnl::reorder w_reorder;  // hwio -> blocked (forward, input gradient) or back (filter
                            // gradient); empty when the primitive uses hwio itself
  dnnl::reorder x_convert, dy_convert;  // float32 -> bfloat16, for x_in and dy_in
};

constexpr size_t kMaxEntries = 256;
std::mutex g_mu;
std::unordered_map<Key, std::shared_ptr<const Entry>, KeyHash> g_cache;

// oneDNN's reference implementations are plain loops, far slower than im2col + GEMM: a
// shape that only they take stays on the Eigen path.
bool is_reference(const char* impl) { return std::string(impl).rfind("ref", 0) == 0; }

std::shared_ptr<const Entry> make_entry(const Key& key) {
  const ConvDims& d = key.d;
  const Kind kind = key.kind;  // backward keys have neither bias nor relu
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  auto e = std::make_shared<Entry>();
  e->x = dnnl::memory::desc({d.n, d.c, d.h, d.w}, dt::f32, tag::nhwc);
  e->w_user = dnnl::memory::desc({d.o, d.c, d.kh, d.kw}, dt::f32, tag::hwio);
  e->y = dnnl::memory::desc({d.n, d.o, d.oh, d.ow}, dt::f32, tag::nhwc);
  // The operands the primitive reads: x (forward, filter gradient), the filter (forward,
  // input gradient) and dy (both gradients); in bfloat16 when asked. What it writes, and
  // the filter gradient, stay float32.
  const dt operand = key.bf16 ? dt::bf16 : dt::f32;
  const dnnl::memory::desc x_op({d.n, d.c, d.h, d.w}, operand, tag::nhwc);
  const dnnl::memory::desc dy_op({d.n, d.o, d.oh, d.ow}, operand, tag::nhwc);
  const dnnl::memory::desc w_any({d.o, d.c, d.kh, d.kw}, operand, tag::any);
  const dnnl::memory::desc dw_any({d.o, d.c, d.kh, d.kw}, dt::f32, tag::any);
  // Padding after the last row/column: whatever makes the output size come out.
  const dnnl::memory::dims strides{d.sh, d.sw}, pad_l{d.pad_t, d.pad_l},
      pad_r{(d.oh - 1) * d.sh + d.kh - d.h - d.pad_t, (d.ow - 1) * d.sw + d.kw - d.w - d.pad_l};
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  // The bias and relu are post-ops, applied to each output once its sum is complete and
  // while it is still in registers: no second pass over y. The bias is a binary add, not
  // the primitive's own bias argument, which the AVX2 kernels load as the sum's starting
  // value: a post-op adds it last, as BiasAdd after Conv2D does, so the bits are the same.
  // Only forward keys ask for them.
  if (key.bias || key.relu) {
    dnnl::post_ops ops;
    if (key.bias) {
      e->bias = dnnl::memory::desc({1, d.o, 1, 1}, dt::f32, tag::abcd);
      ops.append_binary(dnnl::algorithm::binary_add, e->bias);
    }
    if (key.relu) ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    attr.set_post_ops(ops);
  }
  auto forward_pd = [&](dnnl::prop_kind prop, dnnl::algorithm alg, const dnnl::memory::desc& w,
                        const dnnl::memory::desc& y) {
    dnnl::convolution_forward::desc cd(prop, alg, x_op, w, y, strides, pad_l, pad_r);
    return dnnl::convolution_forward::primitive_desc(cd, attr, onednn_engine());
  };
  if (kind == Kind::forward) {
    dnnl::convolution_forward::primitive_desc pd;
    try {
      // The direct JIT kernels with the filter layout of their choice...
      pd = forward_pd(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, w_any, e->y);
    } catch (const dnnl::error&) {
      // ...or whatever takes the filter as it is (its GEMM path; float32 only).
      if (key.bf16) return nullptr;
      pd = forward_pd(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_auto, e->w_user, e->y);
    }
    if (is_reference(pd.impl_info_str())) return nullptr;
    e->w = pd.weights_desc();
    e->scratch = pd.scratchpad_desc();
    e->prim = dnnl::convolution_forward(pd);
  } else {
    // Backward primitives take the forward one they mirror as a hint (direct kernels only).
    auto hint = forward_pd(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, w_any, dy_op);
    if (kind == Kind::backprop_input) {
      dnnl::convolution_backward_data::desc bd(dnnl::algorithm::convolution_direct, e->x, w_any, dy_op, strides, pad_l,
                                               pad_r);
      dnnl::convolution_backward_data::primitive_desc pd(bd, attr, onednn_engine(), hint);
      if (is_reference(pd.impl_info_str())) return nullptr;
      e->w = pd.weights_desc();
      e->scratch = pd.scratchpad_desc();
      e->prim = dnnl::convolution_backward_data(pd);
    } else {
      dnnl::convolution_backward_weights::desc bd(dnnl::algorithm::convolution_direct, x_op, dw_any, dy_op, strides,
                                                  pad_l, pad_r);
      dnnl::convolution_backward_weights::primitive_desc pd(bd, attr, onednn_engine(), hint);
      if (is_reference(pd.impl_info_str())) return nullptr;
      e->w = pd.diff_weights_desc();
      e->scratch = pd.scratchpad_desc();
      e->prim = dnnl::convolution_backward_weights(pd);
    }
  }
  if (key.bf16) {
    if (kind != Kind::backprop_input) {
      e->x_in = x_op;
      e->x_convert = dnnl::reorder(dnnl::reorder::primitive_desc(onednn_engine(), e->x, onednn_engine(), x_op));
    }
    if (kind != Kind::forward) {
      e->dy_in = dy_op;
      e->dy_convert = dnnl::reorder(dnnl::reorder::primitive_desc(onednn_engine(), e->y, onednn_engine(), dy_op));
    }
  }
  if (e->w != e->w_user) {
    e->w_reorder = kind == Kind::backprop_filter
                       ? dnnl::reorder(dnnl::reorder::primitive_desc(onednn_engine(), e->w, onednn_engine(), e->w_user))
                       : dnnl::reorder(dnnl::reorder::primitive_desc(onednn_engine(), e->w_user, onednn_engine(), e->w));
  }
  return e;
}

// The filter gradient of a stride-1 convolution is itself a convolution: dw[kh,kw,c,o] =
// sum over n, oh, ow of x_pad[n, oh+kh, ow+kw, c] * dy[n, oh, ow, o], a forward
// convolution of the images' channels (as a batch of d.c, with the images as channels)
// by dy (an oh x ow filter per output channel, the images as its input channels), with the
// same padding, giving a kh x kw output. In bfloat16 oneDNN runs it on its brgconv
// kernels (AMX), where its backward-weights kernel is the older jit one: conv2 of the CNN
// (64 14x14 images, 32 -> 64 channels, 5x5) took 1.70 ms plus 0.62 of reorders against
// 3.94 ms plus the conversions. The reorders transpose and convert x and dy in one pass
// each, and put the result back in hwio.
std::shared_ptr<const Entry> make_filter_as_forward(const Key& key) {
  const ConvDims& d = key.d;
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  auto e = std::make_shared<Entry>();
  // x [n,h,w,c] read as the batch of c images [c][n][h][w]; dy [n,oh,ow,o] as the filter
  // [o][n][oh][ow]; the output [c][o][kh][kw] written to dw [kh,kw,c,o].
  e->x = dnnl::memory::desc({d.c, d.n, d.h, d.w}, dt::f32, {1, d.h * d.w * d.c, d.w * d.c, d.c});
  e->y = dnnl::memory::desc({d.o, d.n, d.oh, d.ow}, dt::f32, {1, d.oh * d.ow * d.o, d.ow * d.o, d.o});
  e->w_user = dnnl::memory::desc({d.c, d.o, d.kh, d.kw}, dt::f32, {d.o, 1, d.kw * d.c * d.o, d.c * d.o});
  const dnnl::memory::desc src({d.c, d.n, d.h, d.w}, dt::bf16, tag::nhwc);
  const dnnl::memory::desc filter({d.o, d.n, d.oh, d.ow}, dt::bf16, tag::any);
  const dnnl::memory::desc dst({d.c, d.o, d.kh, d.kw}, dt::f32, tag::any);
  const dnnl::memory::dims strides{1, 1}, pad_l{d.pad_t, d.pad_l},
      pad_r{d.kh - 1 + d.oh - d.h - d.pad_t, d.kw - 1 + d.ow - d.w - d.pad_l};
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  try {
    dnnl::convolution_forward::desc cd(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                                       filter, dst, strides, pad_l, pad_r);
    dnnl::convolution_forward::primitive_desc pd(cd, attr, onednn_engine());
    // Only where it is the AMX kernel: elsewhere the backward-weights primitive runs.
    if (std::string(pd.impl_info_str()).find("amx") == std::string::npos) return nullptr;
    e->x_in = src;
    e->dy_in = pd.weights_desc();
    e->w = pd.dst_desc();
    e->scratch = pd.scratchpad_desc();
    e->prim = dnnl::convolution_forward(pd);
    e->x_convert = dnnl::reorder(dnnl::reorder::primitive_desc(onednn_engine(), e->x, onednn_engine(), e->x_in));
    e->dy_convert = dnnl::reorder(dnnl::reorder::primitive_desc(onednn_engine(), e->y, onednn_engine(), e->dy_in));
    e->w_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(onednn_engine(), e->w, onednn_engine(), e->w_user));
  } catch (const dnnl::error&) {
    return nullptr;  // cached as refused
  }
  return e;
}

std::shared_ptr<const Entry> lookup(const Key& key) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_cache.find(key);
    if (it != g_cache.end()) return it->second;
  }
  auto e = key.kind == Kind::filter_as_forward ? make_filter_as_forward(key)
                                                : make_entry(key);  // outside the lock: a JIT compile is slow
  std::lock_guard<std::mutex> lock(g_mu);
  // A refused shape is cached too (as null), so it is not tried again on every call.
  if (g_cache.size() >= kMaxEntries) g_cache.clear();
  return g_cache.emplace(key, std::move(e)).first->second;
}

// Runs one convolution primitive of `kind` on this thread: `a` and `b` are its two inputs
// (x and w; w and dy; x and dy), `out` its output (y; dx; dw), all in our layouts. The
// forward adds `bias` (per output channel) when given, then applies relu when asked.
bool run(const ConvDims& d, Kind kind, const float* a, const float* b, float* out, const float* bias = nullptr,
         bool relu = false, bool bf16 = false) {
  // Where bfloat16 does not pay the float32 primitive runs: the same bits as compute_type float32.
  if (bf16 && !onednn_bf16_available()) bf16 = false;
  // With few input channels the bfloat16 filter gradient (AMX) is slower than float32's,
  // besides converting x and dy first: 64 28x28 images, 5x5, 32 filters, one thread:
  // c = 1: 1.98 against 0.59 ms; 3: 2.01 / 1.32; 4: 2.02 / 1.69; 8: 2.09 / 4.22.
  if (bf16 && kind == Kind::backprop_filter && d.c < kMinBf16FilterGradChannels) bf16 = false;
  if (d.n <= 0 || d.oh <= 0 || d.ow <= 0 || d.c <= 0 || d.o <= 0) return false;
  // Negative trailing padding (VALID with a stride that leaves input unread) is left to
  // the Eigen path.
  if ((d.oh - 1) * d.sh + d.kh - d.h - d.pad_t < 0 || (d.ow - 1) * d.sw + d.kw - d.w - d.pad_l < 0) return false;
  // One thread: this call's OpenMP team is the calling thread alone (see onednn_matmul.h),
  // set before the primitive is made, as oneDNN fixes its thread count then.
  if (omp_get_max_threads() != 1) omp_set_num_threads(1);
  std::shared_ptr<const Entry> e;
  if (kind == Kind::backprop_filter && bf16 && d.sh == 1 && d.sw == 1) {
    e = lookup(Key{d, Kind::filter_as_forward, false, false, true});  // null when refused
    if (e) kind = Kind::filter_as_forward;
  }
  try {
    if (!e) e = lookup(Key{d, kind, bias != nullptr, relu, bf16});
  } catch (const dnnl::error&) {
    e = nullptr;
  }
  // A shape oneDNN has no bfloat16 kernel for (one input channel, say) runs in float32.
  if (!e && bf16) return run(d, kind, a, b, out, bias, relu, false);
  if (!e) return false;
  // Every buffer the primitive reads or writes besides our tensors is 64-byte aligned
  // (aligned_buffer.h).
  thread_local dnnl::stream stream(onednn_engine());
  thread_local AlignedBuffer scratch, blocked, x_in, dy_in;
  const size_t bytes = e->scratch.get_size();
  dnnl::engine& eng = onednn_engine();
  auto mem = [&](const dnnl::memory::desc& md, const float* p) { return dnnl::memory(md, eng, const_cast<float*>(p)); };
  // The filter (or its gradient) in the primitive's layout.
  const float* filter_user = kind == Kind::forward ? b : kind == Kind::backprop_input ? a : out;
  const bool filter_out = kind == Kind::backprop_filter || kind == Kind::filter_as_forward;
  dnnl::memory user = mem(e->w_user, filter_user);
  dnnl::memory filter = user;
  if (e->w_reorder) {
    filter = dnnl::memory(e->w, eng, blocked.get(e->w.get_size()));
    if (!filter_out) e->w_reorder.execute(stream, user, filter);
  }
  // x and dy as the primitive reads them: as they are, or converted to bfloat16.
  auto operand = [&](const dnnl::memory::desc& user, const float* p, const dnnl::memory::desc& in,
                     const dnnl::reorder& convert, AlignedBuffer& buf) {
    dnnl::memory m = mem(user, p);
    if (!convert) return m;
    dnnl::memory c(in, eng, buf.get(in.get_size()));
    convert.execute(stream, m, c);
    return c;
  };
  std::unordered_map<int, dnnl::memory> args;
  if (kind == Kind::forward) {
    args = {{DNNL_ARG_SRC, operand(e->x, a, e->x_in, e->x_convert, x_in)},
            {DNNL_ARG_WEIGHTS, filter},
            {DNNL_ARG_DST, mem(e->y, out)}};
    if (bias) args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, mem(e->bias, bias));
  } else if (kind == Kind::backprop_input) {
    args = {{DNNL_ARG_WEIGHTS, filter},
            {DNNL_ARG_DIFF_DST, operand(e->y, b, e->dy_in, e->dy_convert, dy_in)},
            {DNNL_ARG_DIFF_SRC, mem(e->x, out)}};
  } else if (kind == Kind::backprop_filter) {
    args = {{DNNL_ARG_SRC, operand(e->x, a, e->x_in, e->x_convert, x_in)},
            {DNNL_ARG_DIFF_DST, operand(e->y, b, e->dy_in, e->dy_convert, dy_in)},
            {DNNL_ARG_DIFF_WEIGHTS, filter}};
  } else {
    args = {{DNNL_ARG_SRC, operand(e->x, a, e->x_in, e->x_convert, x_in)},
            {DNNL_ARG_WEIGHTS, operand(e->y, b, e->dy_in, e->dy_convert, dy_in)},
            {DNNL_ARG_DST, filter}};
  }
  if (bytes) args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(e->scratch, eng, scratch.get(bytes)));
  e->prim.execute(stream, args);
  if (e->w_reorder && filter_out) e->w_reorder.execute(stream, filter, user);
  stream.wait();
  return true;
}

}  // namespace

bool onednn_conv2d_f32(const ConvDims& d, const float* x, const float* w, float* y, const float* bias, bool relu,
                       bool bf16) {
  return run(d, Kind::forward, x, w, y, bias, relu, bf16);
}
bool onednn_conv2d_backprop_input_f32(const ConvDims& d, const float* w, const float* dy, float* dx, bool bf16) {
  return run(d, Kind::backprop_input, w, dy, dx, nullptr, false, bf16);
}
bool onednn_conv2d_backprop_filter_f32(const ConvDims& d, const float* x, const float* dy, float* dw, bool bf16) {
  return run(d, Kind::backprop_filter, x, dy, dw, nullptr, false, bf16);
}

#else  // no oneDNN

bool prefer_onednn_conv() { return false; }
bool onednn_conv2d_f32(const ConvDims&, const float*, const float*, float*, const float*, bool, bool) { return false; }
bool onednn_conv2d_backprop_input_f32(const ConvDims&, const float*, const float*, float*, bool) { return false; }
bool onednn_conv2d_backprop_filter_f32(const ConvDims&, const float*, const float*, float*, bool) { return false; }

#endif

}  // namespace actorflow::cpu
