#include "common/broadcast.h"

namespace actorflow {

bool make_broadcast_plan(const std::vector<const Shape*>& inputs, BroadcastPlan* plan) {
  int r = 0;
  for (auto* s : inputs) r = std::max(r, s->rank());
  std::vector<int64_t> out(static_cast<size_t>(r), 1);
  for (auto* s : inputs) {
    int off = r - s->rank();
    for (int i = 0; i < s->rank(); ++i) {
      int64_t d = s->dim(i);
      int64_t& o = out[static_cast<size_t>(i + off)];
      if (d == o || d == 1) continue;
      if (o == 1) o = d;
      else return false;
    }
  }
  plan->out_shape = Shape(out);
  plan->num_elements = plan->out_shape.num_elements();
  // Per-input strides over the full output rank (0 where broadcast).
  size_t k = inputs.size();
  std::vector<std::vector<int64_t>> full(k, std::vector<int64_t>(static_cast<size_t>(r), 0));
  for (size_t j = 0; j < k; ++j) {
    const Shape& s = *inputs[j];
    int off = r - s.rank();
    int64_t stride = 1;
    for (int i = s.rank() - 1; i >= 0; --i) {
      full[j][static_cast<size_t>(i + off)] = s.dim(i) == 1 ? 0 : stride;
      stride *= s.dim(i);
    }
  }
  // Collapse adjacent dims where every input is contiguous across the boundary (or
  // broadcast on both), so common cases become one or two dims.
  plan->dims.clear();
  plan->strides.assign(k, {});
  for (int i = 0; i < r; ++i) {
    int64_t d = out[static_cast<size_t>(i)];
    if (d == 1 && r > 1) continue;  // size-1 dims contribute nothing
    bool merge = !plan->dims.empty();
    for (size_t j = 0; j < k && merge; ++j) {
      int64_t prev = plan->strides[j].back();
      int64_t cur = full[j][static_cast<size_t>(i)];
      merge = (prev == 0 && cur == 0) || (prev != 0 && cur != 0 && prev == cur * d);
    }
    if (merge) {
      plan->dims.back() *= d;
      for (size_t j = 0; j < k; ++j) plan->strides[j].back() = full[j][static_cast<size_t>(i)];
    } else {
      plan->dims.push_back(d);
      for (size_t j = 0; j < k; ++j) plan->strides[j].push_back(full[j][static_cast<size_t>(i)]);
    }
  }
  if (plan->dims.empty()) {
    plan->dims.push_back(1);
    for (size_t j = 0; j < k; ++j) plan->strides[j].push_back(0);
  }
  return true;
}

}  // namespace actorflow
