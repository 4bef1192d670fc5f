// CPU kernels of Sum, Mean, Max, Min, Prod (over a list of axes) and ArgMax/ArgMin.
//
// The input's dims are first simplified: size-1 dims are dropped and adjacent dims that
// are all reduced or all kept are merged. The common layouts then have fast paths:
//   [R]        everything        -> chunked contiguous reduction, chunks in parallel
//   [K, R]     rows (last axes)  -> one contiguous reduction per row (chunked if long)
//   [R, K]     columns (a bias gradient [N,D] -> [D]) and
//   [K, R, K]  (middle axes)     -> whole rows streamed into per-column accumulators
// and anything else takes a strided path over output elements.
//
// Results depend only on the shapes, never on the thread count: work that changes the
// order of accumulation is split into shape-determined chunks whose partial results are
// merged in order.
//
// Empty reductions: Sum gives 0, Prod 1, float Mean NaN (0/0), float Max/Min -inf/+inf
// (as TF). Integer Max/Min and integer Mean over an empty axis fail at run time: there
// is no integer value to give.
#include <string>
#include <vector>

#include "actorflow/kernel.h"
#include "cpu/reduction_impl.h"

namespace actorflow {
namespace {

using reduce::Kind;
using reduce::Reducer;

// Units of work handed to parallel_for are sized to about this many elements.
constexpr int64_t kChunk = 1 << 16;

struct Group {
  int64_t size;
  bool reduced;
};

// Size-1 dims dropped, runs of like dims merged. Requires every dim > 0.
std::vector<Group> simplify(const Shape& s, const std::vector<bool>& red) {
  std::vector<Group> g;
  for (int i = 0; i < s.rank(); ++i) {
    int64_t d = s.dim(i);
    if (d == 1) continue;
    if (!g.empty() && g.back().reduced == red[static_cast<size_t>(i)]) g.back().size *= d;
    else g.push_back({d, red[static_cast<size_t>(i)]});
  }
  return g;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

template <Kind K, typename T>
class Reduction {
  using Rd = Reducer<K, T>;
  using Acc = typename Rd::Acc;

 public:
  Reduction(const T* in, T* out, int64_t count, const DeviceContext* dev) : in_(in), out_(out), count_(count), dev_(dev) {}

  // `rows` contiguous rows of length n, one output each.
  void rows(int64_t rows, int64_t n) const {
    const int64_t per_row = ceil_div(n, kChunk);
    if (per_row == 1) {
      dev_->parallel_for(rows, n + 8, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) out_[r] = Rd::finish(reduce::reduce_contig<Rd>(in_ + r * n, n), count_);
      });
      return;
    }
    // Long rows: every row split into kChunk pieces reduced in parallel, merged in order.
    std::vector<Acc> part(static_cast<size_t>(rows * per_row));
    dev_->parallel_for(rows * per_row, kChunk, [&](int64_t b, int64_t e) {
      for (int64_t u = b; u < e; ++u) {
        int64_t r = u / per_row, k = u % per_row;
        int64_t off = k * kChunk;
        part[static_cast<size_t>(u)] = reduce::reduce_contig<Rd>(in_ + r * n + off, std::min(kChunk, n - off));
      }
    });
    for (int64_t r = 0; r < rows; ++r) {
      Acc a = part[static_cast<size_t>(r * per_row)];
      for (int64_t k = 1; k < per_row; ++k) a = Rd::merge(a, part[static_cast<size_t>(r * per_row + k)]);
      out_[r] = Rd::finish(a, count_);
    }
  }

  // `outer` blocks of [n rows, cols]: out[o, c] reduces in[o, :, c]. Units of work are
  // (block, column tile, row range); row ranges of one column are merged in order.
  void columns(int64_t outer, int64_t n, int64_t cols) const {
    constexpr int64_t kColTile = 4096;  // accumulators of a tile stay in L1/L2
    // Row ranges change the summation order, so their length depends on the shape only;
    // at least 256 rows keeps the partial results small next to the input.
    const int64_t rows_per = std::max<int64_t>(256, ceil_div(kChunk, std::min(cols, kColTile)));
    const int64_t row_parts = ceil_div(n, rows_per);
    // Column tiles do not change any column's order: narrow them (not below 512, where
    // row segments get too short to stream) while there is too little parallel work.
    int64_t tile = std::min(cols, kColTile);
    while (tile >= 1024 && outer * ceil_div(cols, tile) * row_parts < 2 * dev_->num_threads() &&
           outer * n * cols >= 4 * kChunk)
      tile /= 2;
    const int64_t col_tiles = ceil_div(cols, tile);
    const int64_t units = outer * col_tiles * row_parts;
    std::vector<Acc> part(row_parts > 1 ? static_cast<size_t>(outer * row_parts * cols) : 0);
    dev_->parallel_for(units, std::min(n, rows_per) * tile, [&](int64_t b, int64_t e) {
      std::vector<Acc> acc(static_cast<size_t>(tile));
      for (int64_t u = b; u < e; ++u) {
        const int64_t rp = u % row_parts;
        const int64_t ct = (u / row_parts) % col_tiles;
        const int64_t o = u / (row_parts * col_tiles);
        const int64_t c0 = ct * tile, cn = std::min(tile, cols - c0);
        const int64_t r0 = rp * rows_per, rn = std::min(rows_per, n - r0);
        std::fill(acc.begin(), acc.end(), Rd::id());
        const T* src = in_ + (o * n + r0) * cols + c0;
        if (col_tiles == 1) reduce::reduce_columns<Rd>(src, rn, cols, acc.data());
        else reduce::reduce_rows_into<Rd>(src, rn, cn, cols, acc.data());
        if (row_parts == 1) {
          T* dst = out_ + o * cols + c0;
          for (int64_t c = 0; c < cn; ++c) dst[c] = Rd::finish(acc[static_cast<size_t>(c)], count_);
        } else {
          std::copy(acc.begin(), acc.begin() + cn, part.begin() + (o * row_parts + rp) * cols + c0);
        }
      }
    });
    if (row_parts == 1) return;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t c = 0; c < cols; ++c) {
        Acc a = part[static_cast<size_t>(o * row_parts * cols + c)];
        for (int64_t rp = 1; rp < row_parts; ++rp) a = Rd::merge(a, part[static_cast<size_t>((o * row_parts + rp) * cols + c)]);
        out_[o * cols + c] = Rd::finish(a, count_);
      }
  }

  // Any other alternation of kept and reduced groups: each output element walks its
  // reduced coordinates with an odometer.
  void strided(const std::vector<Group>& groups, int64_t out_n) const {
    const size_t r = groups.size();
    std::vector<int64_t> stride(r);
    int64_t s = 1;
    for (size_t i = r; i-- > 0;) {
      stride[i] = s;
      s *= groups[i].size;
    }
    std::vector<int64_t> kdims, kstr, rdims, rstr;
    for (size_t i = 0; i < r; ++i) {
      (groups[i].reduced ? rdims : kdims).push_back(groups[i].size);
      (groups[i].reduced ? rstr : kstr).push_back(stride[i]);
    }
    const size_t nr = rdims.size();
    dev_->parallel_for(out_n, count_ * 2 + 10, [&](int64_t b, int64_t e) {
      std::vector<int64_t> idx(nr);
      for (int64_t o = b; o < e; ++o) {
        int64_t base = 0, rem = o;
        for (size_t i = kdims.size(); i-- > 0;) {
          base += (rem % kdims[i]) * kstr[i];
          rem /= kdims[i];
        }
        Acc acc = Rd::id();
        std::fill(idx.begin(), idx.end(), 0);
        const int64_t inner = rdims[nr - 1], istr = rstr[nr - 1];
        for (;;) {
          int64_t off = base;
          for (size_t i = 0; i + 1 < nr; ++i) off += idx[i] * rstr[i];
          if (istr == 1) acc = Rd::merge(acc, reduce::reduce_contig<Rd>(in_ + off, inner));
          else
            for (int64_t j = 0; j < inner; ++j) acc = Rd::step(acc, in_[off + j * istr]);
          size_t d = nr - 1;  // odometer over all but the innermost reduced group
          while (d-- > 0 && ++idx[d] == rdims[d]) idx[d] = 0;
          if (d == static_cast<size_t>(-1)) break;
        }
        out_[o] = Rd::finish(acc, count_);
      }
    });
  }

  void run(const std::vector<Group>& g, int64_t out_n) const {
    if (g.empty() || (g.size() == 1 && !g[0].reduced)) {
      // Only size-1 dims were reduced: every output is one input element.
      for (int64_t i = 0; i < out_n; ++i) out_[i] = Rd::finish(Rd::step(Rd::id(), in_[i]), 1);
    } else if (g.size() == 1) {
      rows(1, g[0].size);
    } else if (g.size() == 2 && g[1].reduced) {
      rows(g[0].size, g[1].size);
    } else if (g.size() == 2) {
      columns(1, g[0].size, g[1].size);
    } else if (g.size() == 3 && !g[0].reduced) {
      columns(g[0].size, g[1].size, g[2].size);
    } else {
      strided(g, out_n);
    }
  }

  // Every output element reduces an empty set.
  void fill_empty(int64_t out_n) const {
    const T v = Rd::finish(Rd::id(), 0);
    for (int64_t i = 0; i < out_n; ++i) out_[i] = v;
  }

 private:
  const T* in_;
  T* out_;
  int64_t count_;
  const DeviceContext* dev_;
};

// Maps the node's axes onto a run-time rank; the message names the input's shape.
bool reduced_axes(OpKernelContext& ctx, const std::vector<int64_t>& axes, const Shape& s, std::vector<bool>* red) {
  red->assign(static_cast<size_t>(s.rank()), axes.empty());
  for (int64_t a : axes) {
    int64_t n = a < 0 ? a + s.rank() : a;
    if (n < 0 || n >= s.rank()) {
      ctx.fail("axis " + std::to_string(a) + " is out of range for input of shape " + s.to_string());
      return false;
    }
    (*red)[static_cast<size_t>(n)] = true;
  }
  return true;
}

template <Kind K>
class ReduceKernel : public OpKernel {
 public:
  explicit ReduceKernel(const Node& n) : OpKernel(n), axes_(n.attr_ints("axes")), keepdims_(n.attr_bool("keepdims")) {}

  void compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    const Shape& s = in.shape();
    std::vector<bool> red;
    if (!reduced_axes(ctx, axes_, s, &red)) return;
    std::vector<int64_t> out_dims;
    int64_t count = 1;
    for (int i = 0; i < s.rank(); ++i) {
      if (red[static_cast<size_t>(i)]) {
        count *= s.dim(i);
        if (keepdims_) out_dims.push_back(1);
      } else {
        out_dims.push_back(s.dim(i));
      }
    }
    Tensor& out = ctx.allocate_output(0, in.dtype(), Shape(out_dims));
    const int64_t out_n = out.num_elements();
    bool ok = visit_dtype(in.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        ctx.fail("bool tensors cannot be reduced");
      } else {
        if (out_n == 0) return;
        Reduction<K, T> r(in.data<T>(), out.data<T>(), count, ctx.device());
        if (count == 0) {
          if constexpr (!std::is_floating_point_v<T>) {
            if (K == Kind::max || K == Kind::min || K == Kind::mean) {
              ctx.fail("cannot take the " + std::string(K == Kind::mean ? "mean" : K == Kind::max ? "max" : "min") +
                       " of an empty set of integers (input shape " + s.to_string() + ")");
              return;
            }
          }
          r.fill_empty(out_n);
          return;
        }
        r.run(simplify(s, red), out_n);
      }
    });
    if (!ok) ctx.fail(std::string("unsupported dtype ") + dtype_name(in.dtype()));
  }

 private:
  std::vector<int64_t> axes_;
  bool keepdims_;
};

AF_REGISTER_KERNEL("Sum", DeviceType::CPU, ReduceKernel<Kind::sum>);
AF_REGISTER_KERNEL("Mean", DeviceType::CPU, ReduceKernel<Kind::mean>);
AF_REGISTER_KERNEL("Max", DeviceType::CPU, ReduceKernel<Kind::max>);
AF_REGISTER_KERNEL("Min", DeviceType::CPU, ReduceKernel<Kind::min>);
AF_REGISTER_KERNEL("Prod", DeviceType::CPU, ReduceKernel<Kind::prod>);

// ---- ArgMax / ArgMin ----

// First occurrence wins on ties; NaN counts as the extreme (numpy): the first NaN wins.
template <bool kMax, typename T>
inline bool better(T x, T best) {
  if constexpr (kMax) return (x > best) | ((x != x) & (best == best));
  else return (x < best) | ((x != x) & (best == best));
}

template <bool kMax>
class ArgKernel : public OpKernel {
 public:
  explicit ArgKernel(const Node& n) : OpKernel(n), axis_(n.attr_int("axis", -1)) {}

  void compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    const Shape& s = in.shape();
    const int rank = s.rank();
    int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
    if (rank == 0 || axis < 0 || axis >= rank) {
      ctx.fail("axis " + std::to_string(axis_) + " is out of range for input of shape " + s.to_string());
      return;
    }
    int64_t outer = 1, inner = 1;
    std::vector<int64_t> out_dims;
    for (int i = 0; i < rank; ++i) {
      if (i < axis) outer *= s.dim(i);
      if (i > axis) inner *= s.dim(i);
      if (i != axis) out_dims.push_back(s.dim(i));
    }
    const int64_t n = s.dim(static_cast<int>(axis));
    Tensor& out = ctx.allocate_output(0, DType::i64, Shape(out_dims));
    if (out.num_elements() == 0) return;
    if (n == 0) {
      ctx.fail("cannot take the arg" + std::string(kMax ? "max" : "min") + " over empty axis " + std::to_string(axis_) +
               " of input of shape " + s.to_string());
      return;
    }
    int64_t* po = out.data<int64_t>();
    bool ok = visit_dtype(in.dtype(), [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, bool>) {
        ctx.fail("ArgMax/ArgMin do not take bool tensors");
      } else {
        const T* pi = in.data<T>();
        if (inner == 1) {
          ctx.device()->parallel_for(outer, n * 2 + 10, [&](int64_t b, int64_t e) {
            for (int64_t o = b; o < e; ++o) {
              const T* row = pi + o * n;
              T best = row[0];
              int64_t at = 0;
              for (int64_t j = 1; j < n; ++j)
                if (better<kMax>(row[j], best)) {
                  best = row[j];
                  at = j;
                }
              po[o] = at;
            }
          });
          return;
        }
        // Inner dims: scan rows of a [n, inner] block, a column tile at a time, so the
        // compare-and-select runs over contiguous memory.
        constexpr int64_t kTile = 256;
        const int64_t tiles = ceil_div(inner, kTile);
        ctx.device()->parallel_for(outer * tiles, n * std::min(inner, kTile) * 2, [&](int64_t b, int64_t e) {
          T best[kTile];
          int64_t at[kTile];
          for (int64_t u = b; u < e; ++u) {
            const int64_t o = u / tiles, c0 = (u % tiles) * kTile, cn = std::min(kTile, inner - c0);
            const T* blk = pi + o * n * inner + c0;
            for (int64_t c = 0; c < cn; ++c) {
              best[c] = blk[c];
              at[c] = 0;
            }
            for (int64_t j = 1; j < n; ++j) {
              const T* row = blk + j * inner;
              for (int64_t c = 0; c < cn; ++c) {
                const bool t = better<kMax>(row[c], best[c]);
                best[c] = t ? row[c] : best[c];
                at[c] = t ? j : at[c];
              }
            }
            for (int64_t c = 0; c < cn; ++c) po[o * inner + c0 + c] = at[c];
          }
        });
      }
    });
    if (!ok) ctx.fail(std::string("unsupported dtype ") + dtype_name(in.dtype()));
  }

 private:
  int64_t axis_;
};

AF_REGISTER_KERNEL("ArgMax", DeviceType::CPU, ArgKernel<true>);
AF_REGISTER_KERNEL("ArgMin", DeviceType::CPU, ArgKernel<false>);

}  // namespace
}  // namespace actorflow
