// numpy broadcasting for elementwise kernels without Eigen's (compile-heavy) broadcast
// expressions: dims are collapsed, then rows of the last dim are walked with per-input
// strides (0 where an input is broadcast), sharded over the device's pool by elements.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "actorflow/api.h"
#include "actorflow/kernel.h"

namespace actorflow {

struct BroadcastPlan {
  Shape out_shape;
  std::vector<int64_t> dims;                  // collapsed output dims (at least one)
  std::vector<std::vector<int64_t>> strides;  // per input, per collapsed dim
  int64_t num_elements = 0;
};

// Fails (returns false) when the shapes do not broadcast. Exported: the GPU module's
// broadcasting kernels plan with it too.
AF_API bool make_broadcast_plan(const std::vector<const Shape*>& inputs, BroadcastPlan* plan);

// Calls fn(out_index, n, offsets, steps) for the pieces of rows of the last collapsed dim
// that cover output elements [begin, end): `offsets[k]` is input k's element offset for
// out_index, `steps[k]` its stride along the row (0 where input k is broadcast there).
template <int N, typename RowFn>
void for_each_broadcast_span(const BroadcastPlan& p, int64_t begin, int64_t end, RowFn fn) {
  const int r = static_cast<int>(p.dims.size());
  const int64_t inner = p.dims[static_cast<size_t>(r - 1)];
  if (inner == 0 || begin >= end) return;
  int64_t step[N];
  for (int k = 0; k < N; ++k) step[k] = p.strides[static_cast<size_t>(k)][static_cast<size_t>(r - 1)];
  for (int64_t row = begin / inner; row * inner < end; ++row) {
    const int64_t c0 = std::max<int64_t>(begin - row * inner, 0);
    const int64_t c1 = std::min<int64_t>(end - row * inner, inner);
    int64_t off[N] = {};
    int64_t rem = row;
    for (int d = r - 2; d >= 0; --d) {
      int64_t idx = rem % p.dims[static_cast<size_t>(d)];
      rem /= p.dims[static_cast<size_t>(d)];
      for (int k = 0; k < N; ++k) off[k] += idx * p.strides[static_cast<size_t>(k)][static_cast<size_t>(d)];
    }
    for (int k = 0; k < N; ++k) off[k] += c0 * step[k];
    fn(row * inner + c0, c1 - c0, off, step);
  }
}

// for_each_broadcast_span over every output element, sharded over the device's pool by
// elements, not rows: inputs of one shape collapse to a single row, which must still be
// split. `cost` is a rough ns per element.
template <int N, typename RowFn>
void parallel_broadcast(const BroadcastPlan& p, const DeviceContext* dev, int64_t cost, RowFn fn) {
  auto run = [&](int64_t b, int64_t e) { for_each_broadcast_span<N>(p, b, e, fn); };
  if (dev) dev->parallel_for(p.num_elements, cost, run);
  else run(0, p.num_elements);
}

// out[i] = op(a[ia], b[ib]) with broadcasting.
template <typename T, typename R, typename Op>
void broadcast_binary(const BroadcastPlan& p, const T* a, const T* b, R* out, const DeviceContext* dev, Op op) {
  parallel_broadcast<2>(p, dev, 2, [&](int64_t o, int64_t n, const int64_t* off, const int64_t* step) {
    const T* pa = a + off[0];
    const T* pb = b + off[1];
    R* po = out + o;
    if (step[0] == 1 && step[1] == 1) {
      for (int64_t i = 0; i < n; ++i) po[i] = op(pa[i], pb[i]);
    } else if (step[0] == 1) {
      const T vb = pb[0];
      for (int64_t i = 0; i < n; ++i) po[i] = op(pa[i], vb);
    } else if (step[1] == 1) {
      const T va = pa[0];
      for (int64_t i = 0; i < n; ++i) po[i] = op(va, pb[i]);
    } else {
      const T va = pa[0], vb = pb[0];
      for (int64_t i = 0; i < n; ++i) po[i] = op(va, vb);
    }
  });
}

// out[i] = op(x[i]) over n elements, sharded.
template <typename T, typename R, typename Op>
void elementwise_unary(int64_t n, const T* x, R* out, const DeviceContext* dev, Op op, int64_t cost = 2) {
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = op(x[i]);
  };
  if (dev) dev->parallel_for(n, cost, body);
  else body(0, n);
}

}  // namespace actorflow
