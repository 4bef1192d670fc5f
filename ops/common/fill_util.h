// Helpers shared by the fill, index and random ops: attribute values (doubles in the
// GraphDef) converted to element types without undefined behaviour, element counts
// checked for overflow, and output allocation that reports failure as a Status.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "actorflow/kernel.h"

namespace actorflow::fill_util {

// Whether `v` converts to an element of `t` without overflow. Floats also take NaN and
// infinities (users ask for them on purpose); integers need a finite value in range.
inline bool value_fits(double v, DType t) {
  switch (t) {
    case DType::f64: return true;
    case DType::f32: return !std::isfinite(v) || std::fabs(v) <= static_cast<double>(std::numeric_limits<float>::max());
    case DType::boolean: return !std::isnan(v);
    case DType::i32: return std::isfinite(v) && v >= -2147483648.0 && v <= 2147483647.0;
    // 2^63 itself is not an int64; the largest double below it is.
    case DType::i64: return std::isfinite(v) && v >= -9223372036854775808.0 && v < 9223372036854775808.0;
    case DType::u8: return std::isfinite(v) && v >= 0 && v <= 255;
    default: return false;
  }
}

// A saturating conversion: shape functions reject values that do not fit, but a kernel
// must never hit undefined behaviour even if handed one.
template <typename T>
T convert(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else if constexpr (std::is_floating_point_v<T>) {
    const double hi = static_cast<double>(std::numeric_limits<T>::max());
    if (std::isfinite(v) && std::fabs(v) > hi) return std::copysign(std::numeric_limits<T>::infinity(), static_cast<T>(v > 0 ? 1 : -1));
    return static_cast<T>(v);
  } else {
    if (std::isnan(v)) return T{0};
    const double lo = static_cast<double>(std::numeric_limits<T>::min());
    const double hi = static_cast<double>(std::numeric_limits<T>::max());
    if (v <= lo) return std::numeric_limits<T>::min();
    if (v >= hi) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

// Element counts above this are refused at graph time: they cannot be allocated, and a
// product past it may already have overflowed int64.
inline constexpr int64_t kMaxElements = int64_t{1} << 48;

// a * b, or false when it exceeds kMaxElements (both non-negative).
inline bool checked_mul(int64_t a, int64_t b, int64_t* out) {
  if (a == 0 || b == 0) {
    *out = 0;
    return true;
  }
  if (a > kMaxElements / b) return false;
  *out = a * b;
  return true;
}

// The element count of known, non-negative dims, or false past kMaxElements.
inline bool checked_num_elements(const std::vector<int64_t>& dims, int64_t* out) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || d > kMaxElements) return false;
    if (!checked_mul(n, d, &n)) return false;
  }
  *out = n;
  return true;
}

// allocate_output, with an oversized shape (whose element count would overflow) or an
// allocation failure recorded on the context instead of thrown through the executor.
inline Tensor* try_allocate(OpKernelContext& ctx, int i, DType dtype, Shape shape) {
  int64_t n;
  if (!checked_num_elements(shape.dims(), &n)) {
    ctx.fail("output shape " + shape.to_string() + " is too large");
    return nullptr;
  }
  try {
    return &ctx.allocate_output(i, dtype, std::move(shape));
  } catch (const Error& e) {
    ctx.fail(e.status());
    return nullptr;
  }
}

// Whether the known dims of `s` multiply to a sane element count (graph-time check;
// unknown dims are skipped, the kernel checks again with the real ones).
inline bool known_dims_fit(const Shape& s) {
  if (!s.has_rank()) return true;
  std::vector<int64_t> known;
  for (int64_t d : s.dims())
    if (d >= 0) known.push_back(d);
  int64_t n;
  return checked_num_elements(known, &n);
}

// Calls f(T{}) for every dtype a tensor can hold, strings included.
template <typename F>
bool visit_any_dtype(DType t, F&& f) {
  if (t == DType::string) {
    f(std::string{});
    return true;
  }
  return visit_dtype(t, f);
}

}  // namespace actorflow::fill_util
