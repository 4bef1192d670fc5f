// Internal to ops/cpu: reducers and the contiguous/column reduction loops shared by the
// reduction kernels and Softmax.
//
// Float Sum/Mean/Prod accumulate in double: the conversion costs nothing next to the
// memory traffic, a float32 sum over 1e6+ values stays correctly rounded in practice
// (float accumulators drift by ~1e-5 relative after a few hundred additions each), and a
// float32 product only overflows if the final result does. Integers accumulate modulo
// 2^64 in uint64_t, which gives TF's wrap-around result after the final narrowing
// without signed-overflow UB.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

namespace actorflow::reduce {

enum class Kind { sum, mean, prod, max, min };

template <typename T>
inline constexpr bool kIsFloat = std::is_floating_point_v<T>;

// Per kind and element type: the accumulator type Acc, its identity, step (absorb one
// element), merge (two partial results) and finish (to the output value, given how many
// elements were reduced).
template <Kind K, typename T, typename = void>
struct Reducer;

template <Kind K, typename T>
struct Reducer<K, T, std::enable_if_t<(K == Kind::sum || K == Kind::mean)>> {
  using Acc = std::conditional_t<kIsFloat<T>, double, uint64_t>;
  static Acc id() { return Acc(0); }
  static Acc step(Acc a, T x) { return a + static_cast<Acc>(x); }
  static Acc merge(Acc a, Acc b) { return a + b; }
  static T finish(Acc a, int64_t count) {
    if constexpr (K == Kind::sum) {
      return static_cast<T>(a);
    } else if constexpr (kIsFloat<T>) {
      return static_cast<T>(a / static_cast<double>(count));  // count 0: NaN
    } else {
      // Truncates toward zero like TF. The 64-bit sum does not wrap where T's would,
      // so the mean of large int32 values is right. The kernel rejects count == 0.
      return static_cast<T>(static_cast<int64_t>(a) / (count == 0 ? 1 : count));
    }
  }
};

template <typename T>
struct Reducer<Kind::prod, T> {
  using Acc = std::conditional_t<kIsFloat<T>, double, uint64_t>;
  static Acc id() { return Acc(1); }
  static Acc step(Acc a, T x) { return a * static_cast<Acc>(x); }
  static Acc merge(Acc a, Acc b) { return a * b; }
  static T finish(Acc a, int64_t) { return static_cast<T>(a); }
};

// Max/Min propagate NaN (numpy semantics): once an accumulator holds NaN it keeps it,
// and a NaN element replaces whatever it held. Over an empty set floats give -inf/+inf
// (TF); the kernel rejects empty integer reductions.
template <Kind K, typename T>
struct Reducer<K, T, std::enable_if_t<(K == Kind::max || K == Kind::min)>> {
  using Acc = T;
  static T id() {
    if constexpr (kIsFloat<T>)
      return K == Kind::max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    else
      return K == Kind::max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  }
  static T step(T a, T x) {
    // Bitwise | keeps this a branch-free select that vectorizes.
    if constexpr (K == Kind::max) return ((x > a) | (x != x)) ? x : a;
    else return ((x < a) | (x != x)) ? x : a;
  }
  static T merge(T a, T b) { return step(a, b); }
  static T finish(T a, int64_t) { return a; }

  // The generic lane loop below does not vectorize for this select (GCC 12 gives up on
  // the compare-or-unordered blend), so contiguous max/min use GCC/Clang vector
  // extensions directly: 64-byte vectors, lowered to whatever the target has.
  static T contig(const T* p, int64_t n) {
    constexpr int W = 64 / static_cast<int>(sizeof(T));
    typedef T V __attribute__((vector_size(64)));
    using I = std::conditional_t<sizeof(T) == 8, int64_t, std::conditional_t<sizeof(T) == 4, int32_t, int8_t>>;
    typedef I VI __attribute__((vector_size(64)));
    static_assert(sizeof(T) == sizeof(I));
    V l0, l1;
    for (int j = 0; j < W; ++j) l0[j] = l1[j] = id();
    auto vstep = [](V l, V x) {
      VI take;
      if constexpr (K == Kind::max) take = (x > l) | (x != x);
      else take = (x < l) | (x != x);
      return reinterpret_cast<V>((take & reinterpret_cast<VI>(x)) | (~take & reinterpret_cast<VI>(l)));
    };
    int64_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {  // two accumulators hide the compare latency
      V x0, x1;
      std::memcpy(&x0, p + i, sizeof(V));
      std::memcpy(&x1, p + i + W, sizeof(V));
      l0 = vstep(l0, x0);
      l1 = vstep(l1, x1);
    }
    T r = id();
    for (int j = 0; j < W; ++j) r = step(step(r, l0[j]), l1[j]);
    for (; i < n; ++i) r = step(r, p[i]);
    return r;
  }
};

// Reduces p[0, n). kLanes independent accumulators let compilers vectorize the loop
// without -ffast-math (one accumulator is a serial chain they may not reorder). They
// must also cover the adds' latency: 16 doubles are two AVX-512 chains, which held a
// float sum (converted to double) to 10 GB/s a thread here; 64 (eight chains) reach 22-25
// GB/s (one thread summing a 64 MiB array over and over). Without AVX2 there are half the
// registers, and 64 accumulators spill: 32 is the best there (17 GB/s against 16 for 64
// and 13 for 16).
#if defined(__AVX2__)
inline constexpr int kContigLanes = 64;
#else
inline constexpr int kContigLanes = 32;
#endif
template <class Rd, typename T>
typename Rd::Acc reduce_contig(const T* p, int64_t n) {
  if constexpr (requires { Rd::contig(p, n); }) {
    return Rd::contig(p, n);
  } else {
    constexpr int kLanes = kContigLanes;
    typename Rd::Acc l[kLanes];
    for (int j = 0; j < kLanes; ++j) l[j] = Rd::id();
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int j = 0; j < kLanes; ++j) l[j] = Rd::step(l[j], p[i + j]);
    for (int j = 0; i < n; ++i, ++j) l[j] = Rd::step(l[j], p[i]);
    typename Rd::Acc a = l[0];
    for (int j = 1; j < kLanes; ++j) a = Rd::merge(a, l[j]);
    return a;
  }
}

// acc[c] (initialized by the caller) absorbs p[r*stride + c] for r < rows, c < cols.
// Four rows per pass over acc: each pass streams contiguous row segments and loads and
// stores the accumulators once per four elements.
template <class Rd, typename T>
void reduce_rows_into(const T* p, int64_t rows, int64_t cols, int64_t stride, typename Rd::Acc* acc) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const T* q0 = p + r * stride;
    const T* q1 = q0 + stride;
    const T* q2 = q1 + stride;
    const T* q3 = q2 + stride;
    for (int64_t c = 0; c < cols; ++c) acc[c] = Rd::step(Rd::step(Rd::step(Rd::step(acc[c], q0[c]), q1[c]), q2[c]), q3[c]);
  }
  for (; r < rows; ++r) {
    const T* q = p + r * stride;
    for (int64_t c = 0; c < cols; ++c) acc[c] = Rd::step(acc[c], q[c]);
  }
}

// Column reduction of `rows` contiguous rows of `cols` elements into acc[0, cols).
// Narrow rows (a [N,3] tensor) are viewed as rows m times wider, so the inner loop is
// long enough to vectorize; the m partial results per column are merged at the end.
template <class Rd, typename T>
void reduce_columns(const T* p, int64_t rows, int64_t cols, typename Rd::Acc* acc) {
  constexpr int64_t kMinWidth = 128;
  if (cols < kMinWidth / 2 && rows >= 4 * (kMinWidth / cols)) {
    const int64_t m = kMinWidth / cols;
    const int64_t width = m * cols, wide_rows = rows / m;
    std::vector<typename Rd::Acc> wide(static_cast<size_t>(width), Rd::id());
    reduce_rows_into<Rd>(p, wide_rows, width, width, wide.data());
    for (int64_t k = 0; k < m; ++k)
      for (int64_t c = 0; c < cols; ++c) acc[c] = Rd::merge(acc[c], wide[static_cast<size_t>(k * cols + c)]);
    reduce_rows_into<Rd>(p + wide_rows * width, rows - wide_rows * m, cols, cols, acc);
    return;
  }
  reduce_rows_into<Rd>(p, rows, cols, cols, acc);
}

}  // namespace actorflow::reduce
