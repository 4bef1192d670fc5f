// oneDNN convolution primitives cached per shape; see onednn_conv.h.
#include "cpu/onednn_conv.h"

#include <atomic>

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
std::atomic<ConvBackend> g_backend{ConvBackend::automatic};
}  // namespace

void set_conv_backend(ConvBackend b) { g_backend.store(b, std::memory_order_relaxed); }
ConvBackend conv_backend() { return g_backend.load(std::memory_order_relaxed); }

#ifdef AF_HAVE_ONEDNN

bool prefer_onednn_conv() { return conv_backend() != ConvBackend::eigen; }

namespace {

struct Key {
  ConvDims d;
  bool operator==(const Key& o) const {
    const ConvDims& a = d;
    const ConvDims& b = o.d;
    return a.n == b.n && a.h == b.h && a.w == b.w && a.c == b.c && a.kh == b.kh && a.kw == b.kw && a.o == b.o &&
           a.oh == b.oh && a.ow == b.ow && a.sh == b.sh && a.sw == b.sw && a.pad_t == b.pad_t && a.pad_l == b.pad_l;
  }
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    const ConvDims& d = k.d;
    size_t h = 1469598103934665603ull;
    for (int64_t v : {d.n, d.h, d.w, d.c, d.kh, d.kw, d.o, d.oh, d.ow, d.sh, d.sw, d.pad_t, d.pad_l})
      h = (h ^ static_cast<size_t>(v)) * 1099511628211ull;
    return h;
  }
};

// x and y stay in our layout (nhwc); the filter is reordered per call from hwio into the
// blocked layout oneDNN's direct JIT kernels read (5x5 filters of the CNN: 51K floats, a
// few us, against 3x faster convolutions than its GEMM path on plain hwio). Immutable
// once made; callers bring their own scratchpad (user mode) and filter buffer, so threads
// share it.
struct Entry {
  dnnl::memory::desc x, w_user, w, y, scratch;
  dnnl::convolution_forward prim;
  dnnl::reorder to_blocked;  // empty when the primitive reads hwio itself
};

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

constexpr size_t kMaxEntries = 256;
std::mutex g_mu;
std::unordered_map<Key, std::shared_ptr<const Entry>, KeyHash> g_cache;

std::shared_ptr<const Entry> make_entry(const ConvDims& d) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  auto e = std::make_shared<Entry>();
  e->x = dnnl::memory::desc({d.n, d.c, d.h, d.w}, dt::f32, tag::nhwc);
  e->w_user = dnnl::memory::desc({d.o, d.c, d.kh, d.kw}, dt::f32, tag::hwio);
  e->y = dnnl::memory::desc({d.n, d.o, d.oh, d.ow}, dt::f32, tag::nhwc);
  // Padding after the last row/column: whatever makes the output size come out.
  const int64_t pad_b = (d.oh - 1) * d.sh + d.kh - d.h - d.pad_t;
  const int64_t pad_r = (d.ow - 1) * d.sw + d.kw - d.w - d.pad_l;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto make_pd = [&](dnnl::algorithm alg, const dnnl::memory::desc& w) {
    dnnl::convolution_forward::desc cd(dnnl::prop_kind::forward_inference, alg, e->x, w, e->y, {d.sh, d.sw},
                                       {d.pad_t, d.pad_l}, {pad_b, pad_r});
    return dnnl::convolution_forward::primitive_desc(cd, attr, engine());
  };
  dnnl::convolution_forward::primitive_desc pd;
  try {
    // The direct JIT kernels with the filter layout of their choice...
    pd = make_pd(dnnl::algorithm::convolution_direct,
                 dnnl::memory::desc({d.o, d.c, d.kh, d.kw}, dt::f32, tag::any));
  } catch (const dnnl::error&) {
    // ...or whatever takes the filter as it is (its GEMM path).
    pd = make_pd(dnnl::algorithm::convolution_auto, e->w_user);
  }
  // oneDNN's reference implementation is plain loops, far slower than im2col + GEMM: a
  // shape that only it takes stays on the Eigen path.
  if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) return nullptr;
  e->w = pd.weights_desc();
  if (e->w != e->w_user) e->to_blocked = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), e->w_user, engine(), e->w));
  e->scratch = pd.scratchpad_desc();
  e->prim = dnnl::convolution_forward(pd);
  return e;
}

std::shared_ptr<const Entry> lookup(const ConvDims& d) {
  const Key key{d};
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_cache.find(key);
    if (it != g_cache.end()) return it->second;
  }
  auto e = make_entry(d);  // outside the lock: a JIT compile is slow
  std::lock_guard<std::mutex> lock(g_mu);
  // A rejected shape is cached too (as null), so it is not tried again on every call.
  if (g_cache.size() >= kMaxEntries) g_cache.clear();
  return g_cache.emplace(key, std::move(e)).first->second;
}

}  // namespace

bool onednn_conv2d_f32(const ConvDims& d, const float* x, const float* w, float* y) {
  if (d.n <= 0 || d.oh <= 0 || d.ow <= 0 || d.c <= 0 || d.o <= 0) return false;
  // Negative trailing padding (VALID with a stride that leaves input unread) is left to
  // the Eigen path.
  if ((d.oh - 1) * d.sh + d.kh - d.h - d.pad_t < 0 || (d.ow - 1) * d.sw + d.kw - d.w - d.pad_l < 0) return false;
  std::shared_ptr<const Entry> e;
  try {
    e = lookup(d);
  } catch (const dnnl::error&) {
    return false;
  }
  if (!e) return false;
  if (omp_get_max_threads() != 1) omp_set_num_threads(1);
  thread_local dnnl::stream stream(engine());
  thread_local std::vector<char> scratch;
  thread_local std::vector<float> blocked;
  const size_t bytes = e->scratch.get_size();
  if (scratch.size() < bytes) scratch.resize(bytes);
  dnnl::engine& eng = engine();
  dnnl::memory filter(e->w_user, eng, const_cast<float*>(w));
  if (e->to_blocked) {
    const size_t floats = (e->w.get_size() + sizeof(float) - 1) / sizeof(float);
    if (blocked.size() < floats) blocked.resize(floats);
    dnnl::memory to(e->w, eng, blocked.data());
    e->to_blocked.execute(stream, filter, to);
    filter = to;
  }
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, dnnl::memory(e->x, eng, const_cast<float*>(x))},
                                             {DNNL_ARG_WEIGHTS, filter},
                                             {DNNL_ARG_DST, dnnl::memory(e->y, eng, y)}};
  if (bytes) args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(e->scratch, eng, scratch.data()));
  e->prim.execute(stream, args);
  stream.wait();
  return true;
}

#else  // no oneDNN

bool prefer_onednn_conv() { return false; }
bool onednn_conv2d_f32(const ConvDims&, const float*, const float*, float*) { return false; }

#endif

}  // namespace actorflow::cpu
