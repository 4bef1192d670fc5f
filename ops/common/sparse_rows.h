// The rows of a sparse gradient (values [k, ...row] at indices [k]) grouped by index: what
// the sparse applies and SparseSumDuplicates both do before touching a row.
#pragma once
#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "actorflow/tensor.h"

namespace actorflow {

// indices[i], int32 or int64.
inline int64_t index_at(const Tensor& indices, int64_t i) {
  return indices.dtype() == DType::i64 ? indices.data<int64_t>()[i] : indices.data<int32_t>()[i];
}

// Each distinct index once, in the order it first appears, and for each of the k rows
// the place of its index among them.
struct RowGroups {
  std::vector<int64_t> unique;
  std::vector<int64_t> slot;
  bool repeats() const { return unique.size() != slot.size(); }
};

inline RowGroups group_rows(const Tensor& indices) {
  const int64_t k = indices.num_elements();
  RowGroups g;
  g.slot.resize(static_cast<size_t>(k));
  std::unordered_map<int64_t, int64_t> slot_of;
  slot_of.reserve(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) {
    auto [it, fresh] = slot_of.emplace(index_at(indices, i), static_cast<int64_t>(g.unique.size()));
    if (fresh) g.unique.push_back(it->first);
    g.slot[static_cast<size_t>(i)] = it->second;
  }
  return g;
}

// Sums the k rows of `row` elements at `values` into `out`, one row per unique index
// (out holds unique.size() rows), in row order.
template <typename T>
void sum_rows(const T* values, int64_t row, const RowGroups& g, T* out) {
  std::fill(out, out + static_cast<int64_t>(g.unique.size()) * row, T(0));
  for (size_t i = 0; i < g.slot.size(); ++i) {
    T* dst = out + g.slot[i] * row;
    const T* src = values + static_cast<int64_t>(i) * row;
    for (int64_t j = 0; j < row; ++j) dst[j] += src[j];
  }
}

}  // namespace actorflow
