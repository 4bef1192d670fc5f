// CPU kernels of Gather, OneHot, Tile, Pad and Select.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "actorflow/kernel.h"
#include "common/broadcast.h"
#include "common/fill_util.h"

namespace actorflow {
namespace {

using fill_util::try_allocate;
using fill_util::visit_any_dtype;

template <typename T>
inline void copy_elems(const T* src, int64_t n, T* dst) {
  if constexpr (std::is_trivially_copyable_v<T>) {
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(T));
  } else {
    std::copy_n(src, n, dst);
  }
}

int64_t prod(const Shape& s, int begin, int end) {
  int64_t n = 1;
  for (int i = begin; i < end; ++i) n *= s.dim(i);
  return n;
}

// Row-major strides of a shape.
std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<int64_t> st(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) st[i - 1] = st[i] * dims[i];
  return st;
}

// "indices[1,2]" for flat position k of a tensor of shape s.
std::string position(const Shape& s, int64_t k) {
  if (s.rank() <= 1) return "[" + std::to_string(k) + "]";
  std::vector<int64_t> idx(static_cast<size_t>(s.rank()));
  for (int d = s.rank() - 1; d >= 0; --d) {
    idx[static_cast<size_t>(d)] = k % s.dim(d);
    k /= s.dim(d);
  }
  std::string r = "[";
  for (size_t i = 0; i < idx.size(); ++i) r += (i ? "," : "") + std::to_string(idx[i]);
  return r + "]";
}

// ---- Gather ----

class GatherKernel : public OpKernel {
 public:
  explicit GatherKernel(const Node& n) : OpKernel(n), axis_(n.attr_int("axis", 0)) {}

  void compute(OpKernelContext& ctx) override {
    const Tensor& params = ctx.input(0);
    const Tensor& indices = ctx.input(1);
    const int r = params.rank();
    if (r == 0 || axis_ < -r || axis_ >= r) {
      ctx.fail("axis " + std::to_string(axis_) + " is out of range for params of shape " + params.shape().to_string());
      return;
    }
    const int axis = static_cast<int>(axis_ < 0 ? axis_ + r : axis_);
    if (indices.dtype() == DType::i32) run<int32_t>(ctx, params, indices, axis);
    else if (indices.dtype() == DType::i64) run<int64_t>(ctx, params, indices, axis);
    else ctx.fail(std::string("indices must be i32 or i64, got ") + dtype_name(indices.dtype()));
  }

 private:
  template <typename Index>
  void run(OpKernelContext& ctx, const Tensor& params, const Tensor& indices, int axis) {
    const Index* idx = indices.data<Index>();
    const int64_t limit = params.dim(axis);
    const int64_t m = indices.num_elements();
    // Every index is checked before any copy, so a bad one never reads out of bounds.
    for (int64_t k = 0; k < m; ++k)
      if (idx[k] < 0 || idx[k] >= limit) {
        ctx.fail("indices" + position(indices.shape(), k) + " = " + std::to_string(idx[k]) + " is not in [0, " +
                 std::to_string(limit) + ")");
        return;
      }
    std::vector<int64_t> dims(params.shape().dims().begin(), params.shape().dims().begin() + axis);
    dims.insert(dims.end(), indices.shape().dims().begin(), indices.shape().dims().end());
    dims.insert(dims.end(), params.shape().dims().begin() + axis + 1, params.shape().dims().end());
    Tensor* out = try_allocate(ctx, 0, params.dtype(), Shape(std::move(dims)));
    if (!out || out->num_elements() == 0) return;
    const int64_t outer = prod(params.shape(), 0, axis);
    const int64_t inner = prod(params.shape(), axis + 1, params.rank());
    bool ok = visit_any_dtype(params.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* src = params.data<T>();
      T* dst = out->data<T>();
      const int64_t cost = inner * static_cast<int64_t>(sizeof(T)) / 4 + 5;
      if (outer == 1) {
        // axis 0, the embedding-lookup case: whole rows, one memcpy each.
        ctx.device()->parallel_for(m, cost, [&](int64_t b, int64_t e) {
          if (inner == 1) {
            for (int64_t k = b; k < e; ++k) dst[k] = src[idx[k]];
          } else {
            for (int64_t k = b; k < e; ++k) copy_elems(src + static_cast<int64_t>(idx[k]) * inner, inner, dst + k * inner);
          }
        });
      } else if (inner == 1) {
        ctx.device()->parallel_for(outer, m + 5, [&](int64_t b, int64_t e) {
          for (int64_t o = b; o < e; ++o) {
            const T* s = src + o * limit;
            T* d = dst + o * m;
            for (int64_t k = 0; k < m; ++k) d[k] = s[idx[k]];
          }
        });
      } else {
        ctx.device()->parallel_for(outer * m, cost, [&](int64_t b, int64_t e) {
          for (int64_t s = b; s < e; ++s) {
            const int64_t o = s / m, k = s % m;
            copy_elems(src + (o * limit + static_cast<int64_t>(idx[k])) * inner, inner, dst + s * inner);
          }
        });
      }
    });
    if (!ok) ctx.fail(std::string("unsupported dtype ") + dtype_name(params.dtype()));
  }

  int64_t axis_;
};

// ---- OneHot ----

class OneHotKernel : public OpKernel {
 public:
  explicit OneHotKernel(const Node& n)
      : OpKernel(n),
        depth_(n.attr_int("depth", 0)),
        on_(n.attr_float("on_value", 1)),
        off_(n.attr_float("off_value", 0)),
        dtype_(n.attr_dtype("dtype", DType::f32)) {}

  void compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    if (depth_ < 0) {
      ctx.fail("depth " + std::to_string(depth_) + " must be non-negative");
      return;
    }
    switch (in.dtype()) {
      case DType::i32: run<int32_t>(ctx, in); break;
      case DType::i64: run<int64_t>(ctx, in); break;
      case DType::u8: run<uint8_t>(ctx, in); break;
      default: ctx.fail(std::string("indices must be i32, i64 or u8, got ") + dtype_name(in.dtype()));
    }
  }

 private:
  template <typename Index>
  void run(OpKernelContext& ctx, const Tensor& in) {
    std::vector<int64_t> dims = in.shape().dims();
    dims.push_back(depth_);
    Tensor* out = try_allocate(ctx, 0, dtype_, Shape(std::move(dims)));
    if (!out || out->num_elements() == 0) return;
    const Index* idx = in.data<Index>();
    const int64_t depth = depth_;
    bool ok = visit_dtype(dtype_, [&](auto tag) {
      using T = decltype(tag);
      const T on = fill_util::convert<T>(on_), off = fill_util::convert<T>(off_);
      T* po = out->data<T>();
      ctx.device()->parallel_for(in.num_elements(), depth + 2, [&](int64_t b, int64_t e) {
        std::fill(po + b * depth, po + e * depth, off);
        // Out-of-range indices leave an all-off row, as TF does.
        for (int64_t k = b; k < e; ++k) {
          const int64_t i = static_cast<int64_t>(idx[k]);
          if (i >= 0 && i < depth) po[k * depth + i] = on;
        }
      });
    });
    if (!ok) ctx.fail(std::string("unsupported dtype ") + dtype_name(dtype_));
  }

  int64_t depth_;
  double on_, off_;
  DType dtype_;
};

// ---- Tile ----

class TileKernel : public OpKernel {
 public:
  explicit TileKernel(const Node& n) : OpKernel(n), mult_(n.attr_ints("multiples")) {}

  void compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    const int r = in.rank();
    if (static_cast<size_t>(r) != mult_.size()) {
      ctx.fail("multiples has " + std::to_string(mult_.size()) + " entries for input of shape " + in.shape().to_string());
      return;
    }
    std::vector<int64_t> od(static_cast<size_t>(r));
    for (int i = 0; i < r; ++i)
      if (mult_[static_cast<size_t>(i)] < 0 || !fill_util::checked_mul(in.dim(i), mult_[static_cast<size_t>(i)], &od[static_cast<size_t>(i)])) {
        ctx.fail("cannot tile shape " + in.shape().to_string() + " by multiple " + std::to_string(mult_[static_cast<size_t>(i)]));
        return;
      }
    if (r == 0) {
      ctx.set_output(0, in);
      return;
    }
    Tensor* out = try_allocate(ctx, 0, in.dtype(), Shape(od));
    if (!out || out->num_elements() == 0) return;
    const std::vector<int64_t> in_st = strides_of(in.shape().dims());
    const int64_t row_in = in.dim(r - 1), reps = mult_.back(), row_out = od.back();
    const int64_t rows = out->num_elements() / row_out;
    bool ok = visit_any_dtype(in.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* src = in.data<T>();
      T* dst = out->data<T>();
      ctx.device()->parallel_for(rows, row_out + 10, [&](int64_t b, int64_t e) {
        for (int64_t row = b; row < e; ++row) {
          // Output row -> input row: each output coordinate wraps modulo the input dim.
          int64_t rem = row, off = 0;
          for (int d = r - 2; d >= 0; --d) {
            const int64_t c = rem % od[static_cast<size_t>(d)];
            rem /= od[static_cast<size_t>(d)];
            off += (c % in.dim(d)) * in_st[static_cast<size_t>(d)];
          }
          T* o = dst + row * row_out;
          if (row_in == 1) {
            std::fill(o, o + reps, src[off]);
          } else {
            for (int64_t k = 0; k < reps; ++k) copy_elems(src + off, row_in, o + k * row_in);
          }
        }
      });
    });
    if (!ok) ctx.fail(std::string("unsupported dtype ") + dtype_name(in.dtype()));
  }

 private:
  std::vector<int64_t> mult_;
};

// ---- Pad ----

class PadKernel : public OpKernel {
 public:
  explicit PadKernel(const Node& n) : OpKernel(n), pads_(n.attr_ints("paddings")), value_(n.attr_float("constant_value", 0)) {}

  void compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    const int r = in.rank();
    if (pads_.size() != 2 * static_cast<size_t>(r)) {
      ctx.fail("paddings has " + std::to_string(pads_.size()) + " values for input of shape " + in.shape().to_string() +
               "; it needs a (before, after) pair per dim");
      return;
    }
    std::vector<int64_t> od(static_cast<size_t>(r));
    for (int i = 0; i < r; ++i) {
      const int64_t b = pads_[2 * static_cast<size_t>(i)], a = pads_[2 * static_cast<size_t>(i) + 1];
      if (b < 0 || a < 0 || b > fill_util::kMaxElements || a > fill_util::kMaxElements) {
        ctx.fail("paddings of dim " + std::to_string(i) + " must be non-negative");
        return;
      }
      od[static_cast<size_t>(i)] = in.dim(i) + b + a;
    }
    Tensor* out = try_allocate(ctx, 0, in.dtype(), Shape(od));
    if (!out || out->num_elements() == 0) return;
    bool ok = visit_dtype(in.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* src = in.data<T>();
      T* dst = out->data<T>();
      const T v = fill_util::convert<T>(value_);
      ctx.device()->parallel_for(out->num_elements(), 1, [&](int64_t b, int64_t e) { std::fill(dst + b, dst + e, v); });
      if (in.num_elements() == 0) return;
      if (r == 0) {
        dst[0] = src[0];
        return;
      }
      const std::vector<int64_t> out_st = strides_of(od);
      const int64_t row = in.dim(r - 1);
      const int64_t rows = in.num_elements() / row;
      const int64_t lead = pads_[2 * static_cast<size_t>(r - 1)];
      ctx.device()->parallel_for(rows, row + 10, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          int64_t rem = i, off = lead;
          for (int d = r - 2; d >= 0; --d) {
            const int64_t c = rem % in.dim(d);
            rem /= in.dim(d);
            off += (c + pads_[2 * static_cast<size_t>(d)]) * out_st[static_cast<size_t>(d)];
          }
          copy_elems(src + i * row, row, dst + off);
        }
      });
    });
    if (!ok) ctx.fail(std::string("unsupported dtype ") + dtype_name(in.dtype()));
  }

 private:
  std::vector<int64_t> pads_;
  double value_;
};

// ---- Select ----

// The unsigned integer of T's size when T's bits can be blended with a mask (arithmetic
// types of 1, 2, 4 or 8 bytes); void otherwise.
template <typename T>
using BlendBits = std::conditional_t<
    !std::is_arithmetic_v<T>, void,
    std::conditional_t<sizeof(T) == 1, uint8_t,
                       std::conditional_t<sizeof(T) == 2, uint16_t,
                                          std::conditional_t<sizeof(T) == 4, uint32_t,
                                                             std::conditional_t<sizeof(T) == 8, uint64_t, void>>>>>;

// co[i] = cc[i] ? a : b over a contiguous row, where a and b are a row (stride 1) or a
// scalar (stride 0). For arithmetic types the choice is a mask blend of the bits, with
// no branch: ReluGrad's where(x > 0, g, 0) has a random condition, so a branch per
// element mispredicts about half the time (an MLP's [64,256] took ~60 us that way; the
// compiler did not vectorize the conditional). Same bits as the conditional.
template <typename T>
void select_row(const bool* cc, const T* ca, int64_t sa, const T* cb, int64_t sb, T* co, int64_t n) {
  using U = BlendBits<T>;
  if constexpr (!std::is_void_v<U>) {
    typedef U __attribute__((may_alias)) AU;
    const auto* c8 = reinterpret_cast<const uint8_t*>(cc);
    const AU* ua = reinterpret_cast<const AU*>(ca);
    const AU* ub = reinterpret_cast<const AU*>(cb);
    AU* uo = reinterpret_cast<AU*>(co);
    if (sa == 1 && sb == 1) {
      for (int64_t i = 0; i < n; ++i) {
        const U m = static_cast<U>(U(0) - static_cast<U>(c8[i] != 0));
        uo[i] = static_cast<U>((ua[i] & m) | (ub[i] & static_cast<U>(~m)));
      }
    } else if (sa == 1) {
      const U other = ub[0];
      for (int64_t i = 0; i < n; ++i) {
        const U m = static_cast<U>(U(0) - static_cast<U>(c8[i] != 0));
        uo[i] = static_cast<U>((ua[i] & m) | (other & static_cast<U>(~m)));
      }
    } else {
      const U other = ua[0];
      for (int64_t i = 0; i < n; ++i) {
        const U m = static_cast<U>(U(0) - static_cast<U>(c8[i] != 0));
        uo[i] = static_cast<U>((other & m) | (ub[i] & static_cast<U>(~m)));
      }
    }
  } else {
    for (int64_t i = 0; i < n; ++i) co[i] = cc[i] ? ca[i * sa] : cb[i * sb];
  }
}


class SelectKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;

  void compute(OpKernelContext& ctx) override {
    const Tensor& c = ctx.input(0);
    const Tensor& a = ctx.input(1);
    const Tensor& b = ctx.input(2);
    if (c.dtype() != DType::boolean || a.dtype() != b.dtype()) {
      ctx.fail(std::string("needs a bool condition and branches of one dtype, got ") + dtype_name(c.dtype()) + ", " +
               dtype_name(a.dtype()) + " and " + dtype_name(b.dtype()));
      return;
    }
    BroadcastPlan plan;
    if (!make_broadcast_plan({&c.shape(), &a.shape(), &b.shape()}, &plan)) {
      ctx.fail("shapes " + c.shape().to_string() + ", " + a.shape().to_string() + " and " + b.shape().to_string() +
               " cannot be broadcast together");
      return;
    }
    Tensor* out = try_allocate(ctx, 0, a.dtype(), plan.out_shape);
    if (!out || out->num_elements() == 0) return;
    bool ok = visit_any_dtype(a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const bool* pc = c.data<bool>();
      const T* pa = a.data<T>();
      const T* pb = b.data<T>();
      T* po = out->data<T>();
      parallel_broadcast<3>(plan, ctx.device(), 2, [&](int64_t o, int64_t n, const int64_t* off, const int64_t* step) {
        const bool* cc = pc + off[0];
        const T* ca = pa + off[1];
        const T* cb = pb + off[2];
        T* co = po + o;
        if (step[0] == 1 && step[1] <= 1 && step[2] <= 1 && (step[1] == 1 || step[2] == 1)) {
          // Rows of both branches, or one branch a scalar: ReluGrad's where(x > 0, g, 0)
          // in every MLP's backward pass.
          select_row(cc, ca, step[1], cb, step[2], co, n);
        } else if (step[0] == 0) {
          // One condition for the whole row: a straight copy of one branch.
          const T* from = cc[0] ? ca : cb;
          const int64_t s = cc[0] ? step[1] : step[2];
          if (s == 1) copy_elems(from, n, co);
          else std::fill(co, co + n, from[0]);
        } else {
          for (int64_t i = 0; i < n; ++i) co[i] = cc[i * step[0]] ? ca[i * step[1]] : cb[i * step[2]];
        }
      });
    });
    if (!ok) ctx.fail(std::string("unsupported dtype ") + dtype_name(a.dtype()));
  }
};

AF_REGISTER_KERNEL("Gather", DeviceType::CPU, GatherKernel);
AF_REGISTER_KERNEL("OneHot", DeviceType::CPU, OneHotKernel);
AF_REGISTER_KERNEL("Tile", DeviceType::CPU, TileKernel);
AF_REGISTER_KERNEL("Pad", DeviceType::CPU, PadKernel);
AF_REGISTER_KERNEL("Select", DeviceType::CPU, SelectKernel);

}  // namespace
}  // namespace actorflow
