// Internal to the shape kernels: element copies that work for every dtype, and a
// strided block copy that Slice, Concat, Split and row-preserving Transposes share.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "actorflow/kernel.h"

namespace actorflow::shape_copy {

// Calls f(T{}) with an element type that copies `t` faithfully: strings as std::string
// (their buffers hold objects, not bytes), everything else as an unsigned integer of
// the same width, so each copy routine is instantiated four times rather than seven.
template <typename F>
bool visit_copy_type(DType t, F&& f) {
  if (t == DType::string) {
    f(std::string{});
    return true;
  }
  switch (dtype_size(t)) {
    case 1: f(uint8_t{}); return true;
    case 4: f(uint32_t{}); return true;
    case 8: f(uint64_t{}); return true;
    default: return false;
  }
}

template <typename T>
inline void copy_run(const T* src, T* dst, int64_t n) {
  if constexpr (std::is_trivially_copyable_v<T>) {
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(T));
  } else {
    std::copy(src, src + n, dst);
  }
}

// Contiguous row-major strides of `dims`.
inline std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i)
    s[static_cast<size_t>(i)] = s[static_cast<size_t>(i + 1)] * dims[static_cast<size_t>(i + 1)];
  return s;
}

// A block copy in canonical form: size-1 dims dropped and neighbours merged wherever
// both sides are contiguous across them, so the innermost run is as long as possible.
struct Block {
  std::vector<int64_t> dims, src_strides, dst_strides;
};

inline Block canonical_block(const std::vector<int64_t>& dims, const std::vector<int64_t>& src_strides,
                             const std::vector<int64_t>& dst_strides) {
  Block b;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    if (!b.dims.empty() && b.src_strides.back() == src_strides[i] * dims[i] &&
        b.dst_strides.back() == dst_strides[i] * dims[i]) {
      b.dims.back() *= dims[i];
      b.src_strides.back() = src_strides[i];
      b.dst_strides.back() = dst_strides[i];
      continue;
    }
    b.dims.push_back(dims[i]);
    b.src_strides.push_back(src_strides[i]);
    b.dst_strides.push_back(dst_strides[i]);
  }
  // The innermost dim is walked as one run, so it must be unit-stride on both sides.
  if (b.dims.empty() || b.src_strides.back() != 1 || b.dst_strides.back() != 1) {
    b.dims.push_back(1);
    b.src_strides.push_back(1);
    b.dst_strides.push_back(1);
  }
  return b;
}

// Copies element (i_0..i_r-1) of a block of shape `dims` from src[sum i_k*src_strides[k]]
// to dst[sum i_k*dst_strides[k]], rows sharded over the device.
template <typename T>
void copy_block(const T* src, const std::vector<int64_t>& src_strides, T* dst, const std::vector<int64_t>& dst_strides,
                const std::vector<int64_t>& dims, const DeviceContext* dev) {
  for (int64_t d : dims)
    if (d == 0) return;
  const Block b = canonical_block(dims, src_strides, dst_strides);
  const int r = static_cast<int>(b.dims.size());
  const int64_t inner = b.dims.back();
  int64_t rows = 1;
  for (int i = 0; i + 1 < r; ++i) rows *= b.dims[static_cast<size_t>(i)];
  auto body = [&](int64_t row_begin, int64_t row_end) {
    // Multi-index of row_begin over the outer dims, then an odometer.
    std::vector<int64_t> idx(static_cast<size_t>(r), 0);
    int64_t so = 0, dof = 0, rem = row_begin;
    for (int i = r - 2; i >= 0; --i) {
      const size_t k = static_cast<size_t>(i);
      idx[k] = rem % b.dims[k];
      rem /= b.dims[k];
      so += idx[k] * b.src_strides[k];
      dof += idx[k] * b.dst_strides[k];
    }
    for (int64_t row = row_begin; row < row_end; ++row) {
      copy_run(src + so, dst + dof, inner);
      for (int i = r - 2; i >= 0; --i) {
        const size_t k = static_cast<size_t>(i);
        so += b.src_strides[k];
        dof += b.dst_strides[k];
        if (++idx[k] < b.dims[k]) break;
        so -= b.src_strides[k] * b.dims[k];
        dof -= b.dst_strides[k] * b.dims[k];
        idx[k] = 0;
      }
    }
  };
  const int64_t cost = std::is_trivially_copyable_v<T> ? inner * static_cast<int64_t>(sizeof(T)) / 8 + 20 : inner * 20 + 20;
  if (dev && rows > 1) dev->parallel_for(rows, cost, body);
  else body(0, rows);
}

}  // namespace actorflow::shape_copy
