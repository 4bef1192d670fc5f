// numpy broadcasting for elementwise kernels without Eigen's (compile-heavy) broadcast
// expressions: dims are collapsed, then rows of the last dim are walked with per-input
// strides (0 where an input is broadcast), sharded over the device's pool.
#pragma once
#include <cstdint>
#include <vector>

#include "actorflow/kernel.h"

namespace actorflow {

struct BroadcastPlan {
  Shape out_shape;
  std::vector<int64_t> dims;                  // collapsed output dims (at least one)
  std::vector<std::vector<int64_t>> strides;  // per input, per collapsed dim
  int64_t num_elements = 0;
};

// Fails (returns false) when the shapes do not broadcast.
bool make_broadcast_plan(const std::vector<const Shape*>& inputs, BroadcastPlan* plan);

// Calls fn(out_index, offsets) over [begin, end) of the rows of the last collapsed dim;
// `offsets[k]` is input k's element offset for that element. Used by the templates below.
template <int N, typename RowFn>
void for_each_broadcast_row(const BroadcastPlan& p, int64_t row_begin, int64_t row_end, RowFn fn) {
  const int r = static_cast<int>(p.dims.size());
  const int64_t inner = p.dims[static_cast<size_t>(r - 1)];
  for (int64_t row = row_begin; row < row_end; ++row) {
    int64_t off[N] = {};
    int64_t rem = row;
    for (int d = r - 2; d >= 0; --d) {
      int64_t idx = rem % p.dims[static_cast<size_t>(d)];
      rem /= p.dims[static_cast<size_t>(d)];
      for (int k = 0; k < N; ++k) off[k] += idx * p.strides[static_cast<size_t>(k)][static_cast<size_t>(d)];
    }
    int64_t step[N];
    for (int k = 0; k < N; ++k) step[k] = p.strides[static_cast<size_t>(k)][static_cast<size_t>(r - 1)];
    fn(row * inner, inner, off, step);
  }
}

// out[i] = op(a[ia], b[ib]) with broadcasting.
template <typename T, typename R, typename Op>
void broadcast_binary(const BroadcastPlan& p, const T* a, const T* b, R* out, const DeviceContext* dev, Op op) {
  const int64_t inner = p.dims.back();
  const int64_t rows = inner == 0 ? 0 : p.num_elements / inner;
  auto run_rows = [&](int64_t r0, int64_t r1) {
    for_each_broadcast_row<2>(p, r0, r1, [&](int64_t o, int64_t n, const int64_t* off, const int64_t* step) {
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
  };
  if (dev && rows > 1) dev->parallel_for(rows, inner * 2 + 10, run_rows);
  else run_rows(0, rows);
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
