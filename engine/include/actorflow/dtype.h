// Element types of tensors.
#pragma once
#include "actorflow/api.h"
#include <cstddef>
#include <cstdint>
#include <string>

AF_PUBLIC_BEGIN

namespace actorflow {

enum class DType : uint8_t { f32 = 0, f64, i32, i64, u8, boolean, string, invalid = 255 };

inline constexpr DType f32 = DType::f32;
inline constexpr DType f64 = DType::f64;
inline constexpr DType i32 = DType::i32;
inline constexpr DType i64 = DType::i64;
inline constexpr DType u8 = DType::u8;
inline constexpr DType boolean = DType::boolean;
inline constexpr DType string = DType::string;

// Bytes per element; 0 for string (strings are stored out of line).
size_t dtype_size(DType t);
const char* dtype_name(DType t);
bool dtype_from_name(const std::string& name, DType* out);
inline bool is_floating(DType t) { return t == DType::f32 || t == DType::f64; }
inline bool is_integer(DType t) { return t == DType::i32 || t == DType::i64 || t == DType::u8; }
inline bool is_numeric(DType t) { return is_floating(t) || is_integer(t); }

template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::f32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::f64; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::i32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::i64; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::u8; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::boolean; };
template <> struct DTypeOf<std::string> { static constexpr DType value = DType::string; };

}  // namespace actorflow

namespace actorflow {
// Calls f(T{}) with T the C++ type of dtype `t` (numeric and bool only); returns false
// for string/invalid, so callers report an unsupported-dtype error themselves.
template <typename F>
bool visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::f32: f(float{}); return true;
    case DType::f64: f(double{}); return true;
    case DType::i32: f(int32_t{}); return true;
    case DType::i64: f(int64_t{}); return true;
    case DType::u8: f(uint8_t{}); return true;
    case DType::boolean: f(bool{}); return true;
    default: return false;
  }
}
}  // namespace actorflow

AF_PUBLIC_END
