// CPU kernels of Reshape, ExpandDims, Squeeze (all share the input's buffer) and
// Transpose.
#include <algorithm>
#include <numeric>

#include "actorflow/kernel.h"
#include "cpu/shape_copy.h"

namespace actorflow {
namespace {

using shape_copy::copy_block;
using shape_copy::strides_of;
using shape_copy::visit_copy_type;

void forward_reshaped(OpKernelContext& ctx, const Shape& shape) {
  auto r = ctx.input(0).reshaped(shape);
  if (!r.ok()) {
    ctx.fail(r.status());
    return;
  }
  ctx.set_output(0, std::move(r).value());
}

class ReshapeKernel : public OpKernel {
 public:
  explicit ReshapeKernel(const Node& n) : OpKernel(n), target_(n.attr_shape("shape")) {}
  void compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (!target_.has_rank()) {
      ctx.fail("attribute 'shape' has unknown rank");
      return;
    }
    Shape s = target_;
    int inferred = -1;
    int64_t known = 1;
    for (int i = 0; i < s.rank(); ++i) {
      if (s.dim(i) < 0) {
        if (inferred >= 0 || s.dim(i) != -1) {
          ctx.fail("bad target shape " + s.to_string());
          return;
        }
        inferred = i;
      } else {
        known *= s.dim(i);
      }
    }
    if (inferred >= 0) {
      if (known == 0 || x.num_elements() % known != 0) {
        ctx.fail("cannot reshape a tensor of shape " + x.shape().to_string() + " (" + std::to_string(x.num_elements()) +
                 " elements) to " + target_.to_string() + " with the -1 dim inferred");
        return;
      }
      s.set_dim(inferred, x.num_elements() / known);
    }
    forward_reshaped(ctx, s);
  }

 private:
  Shape target_;
};

class ExpandDimsKernel : public OpKernel {
 public:
  explicit ExpandDimsKernel(const Node& n) : OpKernel(n), axis_(n.attr_int("axis")) {}
  void compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const int r = x.rank() + 1;
    const int64_t a = axis_ < 0 ? axis_ + r : axis_;
    if (a < 0 || a >= r) {
      ctx.fail("axis " + std::to_string(axis_) + " is out of range for inserting into shape " + x.shape().to_string());
      return;
    }
    std::vector<int64_t> dims = x.shape().dims();
    dims.insert(dims.begin() + a, 1);
    forward_reshaped(ctx, Shape(std::move(dims)));
  }

 private:
  int64_t axis_;
};

class SqueezeKernel : public OpKernel {
 public:
  explicit SqueezeKernel(const Node& n) : OpKernel(n), axes_(n.attr_ints("axes")) {}
  void compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const int r = x.rank();
    std::vector<bool> drop(static_cast<size_t>(r), false);
    if (axes_.empty())
      for (int i = 0; i < r; ++i) drop[static_cast<size_t>(i)] = x.dim(i) == 1;
    for (int64_t axis : axes_) {
      const int64_t a = axis < 0 ? axis + r : axis;
      if (a < 0 || a >= r) {
        ctx.fail("axis " + std::to_string(axis) + " is out of range for shape " + x.shape().to_string());
        return;
      }
      if (x.dim(static_cast<int>(a)) != 1) {
        ctx.fail("cannot squeeze axis " + std::to_string(axis) + " of shape " + x.shape().to_string() + ": its size is " +
                 std::to_string(x.dim(static_cast<int>(a))) + ", not 1");
        return;
      }
      drop[static_cast<size_t>(a)] = true;
    }
    std::vector<int64_t> dims;
    for (int i = 0; i < r; ++i)
      if (!drop[static_cast<size_t>(i)]) dims.push_back(x.dim(i));
    forward_reshaped(ctx, Shape(std::move(dims)));
  }

 private:
  std::vector<int64_t> axes_;
};

// ---- Transpose ----

// Any permutation that moves the innermost input dim. Two dims matter: the input's
// innermost (unit stride in the input, output position `q`) and the output's innermost
// (unit stride in the output). For each index of the other dims, the plane they span is
// transposed in 16x16 tiles, each output row of a tile written in one contiguous run;
// 16 (not 32) keeps the tile's input lines resident even when power-of-two strides make
// them alias in L1 (measured: 2048x2048 f32 ~1.4x faster than with 32x32 tiles).
template <typename T>
void transpose_tiled(const T* in, T* out, const std::vector<int64_t>& out_dims, const std::vector<int64_t>& src_strides,
                     const DeviceContext* dev) {
  constexpr int64_t kTile = 16;
  const int r = static_cast<int>(out_dims.size());
  const std::vector<int64_t> dst_strides = strides_of(out_dims);
  int q = 0;
  while (src_strides[static_cast<size_t>(q)] != 1) ++q;
  const int64_t ni = out_dims[static_cast<size_t>(q)], di = dst_strides[static_cast<size_t>(q)];
  const int64_t nj = out_dims.back(), sj = src_strides.back();
  // The remaining dims, outermost first.
  std::vector<int64_t> odims, osrc, odst;
  for (int k = 0; k + 1 < r; ++k) {
    if (k == q) continue;
    odims.push_back(out_dims[static_cast<size_t>(k)]);
    osrc.push_back(src_strides[static_cast<size_t>(k)]);
    odst.push_back(dst_strides[static_cast<size_t>(k)]);
  }
  int64_t planes = 1;
  for (int64_t d : odims) planes *= d;
  const int64_t itiles = (ni + kTile - 1) / kTile;
  const int64_t cost = kTile * nj * (std::is_trivially_copyable_v<T> ? 1 : 20) + 50;
  dev->parallel_for(planes * itiles, cost, [&](int64_t begin, int64_t end) {
    for (int64_t unit = begin; unit < end; ++unit) {
      int64_t plane = unit / itiles, so = 0, dof = 0;
      for (int k = static_cast<int>(odims.size()) - 1; k >= 0; --k) {
        const size_t u = static_cast<size_t>(k);
        const int64_t idx = plane % odims[u];
        plane /= odims[u];
        so += idx * osrc[u];
        dof += idx * odst[u];
      }
      const int64_t i0 = (unit % itiles) * kTile, i1 = std::min(ni, i0 + kTile);
      for (int64_t j0 = 0; j0 < nj; j0 += kTile) {
        const int64_t j1 = std::min(nj, j0 + kTile);
        for (int64_t i = i0; i < i1; ++i) {
          const T* src = in + so + i;
          T* dst = out + dof + i * di;
          for (int64_t j = j0; j < j1; ++j) dst[j] = src[j * sj];
        }
      }
    }
  });
}

class TransposeKernel : public OpKernel {
 public:
  explicit TransposeKernel(const Node& n) : OpKernel(n), perm_(n.attr_ints("perm")) {}

  void compute(OpKernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const int r = x.rank();
    std::vector<int64_t> perm = perm_;
    if (perm.empty())
      for (int i = r - 1; i >= 0; --i) perm.push_back(i);
    if (!is_permutation(perm, r)) {
      ctx.fail("perm " + Shape(perm).to_string() + " is not a permutation of the dims of shape " + x.shape().to_string());
      return;
    }
    std::vector<int64_t> out_dims(static_cast<size_t>(r));
    for (int i = 0; i < r; ++i) out_dims[static_cast<size_t>(i)] = x.dim(static_cast<int>(perm[static_cast<size_t>(i)]));
    const Shape out_shape(out_dims);

    // Drop size-1 dims and merge input dims that stay adjacent and in order, so e.g.
    // [B,M,N] with perm [0,2,1] becomes a batch of 2-D transposes.
    std::vector<int64_t> dims, cperm;
    collapse(x.shape().dims(), perm, &dims, &cperm);
    const int cr = static_cast<int>(dims.size());
    bool identity = true;
    for (int i = 0; i < cr; ++i) identity = identity && cperm[static_cast<size_t>(i)] == i;
    if (identity || x.num_elements() == 0) {
      // Same element order: the output shares the buffer (or there is nothing to move).
      if (identity) forward_reshaped(ctx, out_shape);
      else ctx.allocate_output(0, x.dtype(), out_shape);
      return;
    }
    Tensor& out = ctx.allocate_output(0, x.dtype(), out_shape);
    const std::vector<int64_t> in_strides = strides_of(dims);
    std::vector<int64_t> cout(static_cast<size_t>(cr)), src_strides(static_cast<size_t>(cr));
    for (int i = 0; i < cr; ++i) {
      const size_t p = static_cast<size_t>(cperm[static_cast<size_t>(i)]);
      cout[static_cast<size_t>(i)] = dims[p];
      src_strides[static_cast<size_t>(i)] = in_strides[p];
    }
    const DeviceContext* dev = ctx.device();
    bool ok = visit_copy_type(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* in = x.data<T>();
      T* po = out.data<T>();
      if (cperm.back() == cr - 1) {
        // The innermost dim stays innermost: copy whole runs.
        copy_block(in, src_strides, po, strides_of(cout), cout, dev);
      } else {
        transpose_tiled(in, po, cout, src_strides, dev);
      }
    });
    if (!ok) ctx.fail(std::string("unsupported dtype ") + dtype_name(x.dtype()));
  }

 private:
  static bool is_permutation(const std::vector<int64_t>& perm, int r) {
    if (static_cast<int>(perm.size()) != r) return false;
    std::vector<bool> seen(perm.size(), false);
    for (int64_t p : perm) {
      if (p < 0 || p >= r || seen[static_cast<size_t>(p)]) return false;
      seen[static_cast<size_t>(p)] = true;
    }
    return true;
  }

  static void collapse(const std::vector<int64_t>& in_dims, const std::vector<int64_t>& perm, std::vector<int64_t>* dims,
                       std::vector<int64_t>* cperm) {
    const int r = static_cast<int>(in_dims.size());
    // Input dims kept (size != 1), renumbered; then the permutation restricted to them.
    std::vector<int64_t> new_id(static_cast<size_t>(r), -1);
    std::vector<int64_t> kept_dims;
    for (int i = 0; i < r; ++i)
      if (in_dims[static_cast<size_t>(i)] != 1) {
        new_id[static_cast<size_t>(i)] = static_cast<int64_t>(kept_dims.size());
        kept_dims.push_back(in_dims[static_cast<size_t>(i)]);
      }
    std::vector<int64_t> p;
    for (int64_t q : perm)
      if (new_id[static_cast<size_t>(q)] >= 0) p.push_back(new_id[static_cast<size_t>(q)]);
    // Group runs of p that are consecutive input dims; each group is one merged dim.
    std::vector<int64_t> group_of(kept_dims.size(), -1);
    std::vector<int64_t> group_first;  // first input dim of each group, in output order
    for (size_t i = 0; i < p.size(); ++i) {
      if (i > 0 && p[i] == p[i - 1] + 1) {
        group_of[static_cast<size_t>(p[i])] = group_of[static_cast<size_t>(p[i - 1])];
      } else {
        group_of[static_cast<size_t>(p[i])] = static_cast<int64_t>(group_first.size());
        group_first.push_back(p[i]);
      }
    }
    // Groups in input order give the collapsed input dims; output order gives cperm.
    std::vector<int64_t> order(group_first.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return group_first[static_cast<size_t>(a)] < group_first[static_cast<size_t>(b)];
    });
    std::vector<int64_t> input_pos(group_first.size());
    dims->assign(group_first.size(), 1);
    for (size_t k = 0; k < order.size(); ++k) input_pos[static_cast<size_t>(order[k])] = static_cast<int64_t>(k);
    for (size_t d = 0; d < kept_dims.size(); ++d)
      (*dims)[static_cast<size_t>(input_pos[static_cast<size_t>(group_of[d])])] *= kept_dims[d];
    cperm->assign(group_first.size(), 0);
    for (size_t g = 0; g < group_first.size(); ++g) (*cperm)[g] = input_pos[g];
  }

  std::vector<int64_t> perm_;
};

AF_REGISTER_KERNEL("Reshape", DeviceType::CPU, ReshapeKernel);
AF_REGISTER_KERNEL("ExpandDims", DeviceType::CPU, ExpandDimsKernel);
AF_REGISTER_KERNEL("Squeeze", DeviceType::CPU, SqueezeKernel);
AF_REGISTER_KERNEL("Transpose", DeviceType::CPU, TransposeKernel);

}  // namespace
}  // namespace actorflow
