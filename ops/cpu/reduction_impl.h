// Internal to ops/cpu: reducers and the contiguous/column reduction loops shared by the
// reduction kernels and Softmax.
//
// Loops keep kLanes independent accumulators so that compilers vectorize them without
// -ffast-math (a single float accumulator is a serial dependency they may not reorder).
// Float sums accumulate in double lanes: converting costs nothing next to the memory
// traffic, and a float32 sum over 1e6+ values stays correctly rounded in practice (float
// lanes drift by ~1e-5 relative after only a few hundred additions each).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace actorflow::reduce {

inline constexpr int kLanes = 16;
inline constexpr int64_t kBlock = 4096;     // contiguous elements per lane flush
inline constexpr int64_t kRowBlock = 256;   // rows per flush in column reductions
inline constexpr int64_t kColChunk = 512;   // columns per column-reduction tile

enum class Kind { sum, mean, prod, max, min };

template <typename T>
inline constexpr bool kIsFloat = std::is_floating_point_v<T>;

// Per kind and element type: Lane (the vectorized accumulator), Acc (the long-lived one)
// and the operations between them. Integers accumulate modulo 2^64 in uint64_t, which
// gives TF's wrap-around result after the final narrowing (and no signed-overflow UB).
template <Kind K, typename T, typename = void>
struct Reducer;

template <Kind K, typename T>
struct Reducer<K, T, std::enable_if_t<(K == Kind::sum || K == Kind::mean)>> {
  using Lane = std::conditional_t<kIsFloat<T>, double, uint64_t>;
  using Acc = Lane;
  static Lane lane_id() { return Lane(0); }
  static Lane step(Lane l, T x) { return l + static_cast<Lane>(x); }
  static Acc acc_id() { return Acc(0); }
  static Acc fold(Acc a, Lane l) { return a + static_cast<Acc>(l); }
  static Acc merge(Acc a, Acc b) { return a + b; }
  static T finish(Acc a, int64_t count) {
    if constexpr (K == Kind::sum) {
      return static_cast<T>(a);
    } else if constexpr (kIsFloat<T>) {
      return static_cast<T>(a / static_cast<double>(count));
    } else {
      // Integer mean truncates toward zero like TF; the sum itself does not wrap here
      // (it is exact in 64 bits), so the mean of large int32 values is right. The kernel
      // rejects count == 0.
      return static_cast<T>(static_cast<int64_t>(a) / (count == 0 ? 1 : count));
    }
  }
};

template <typename T>
struct Reducer<Kind::prod, T> {
  using Lane = std::conditional_t<kIsFloat<T>, T, uint64_t>;
  using Acc = std::conditional_t<kIsFloat<T>, double, uint64_t>;
  static Lane lane_id() { return Lane(1); }
  static Lane step(Lane l, T x) { return l * static_cast<Lane>(x); }
  static Acc acc_id() { return Acc(1); }
  static Acc fold(Acc a, Lane l) { return a * static_cast<Acc>(l); }
  static Acc merge(Acc a, Acc b) { return a * b; }
  static T finish(Acc a, int64_t) { return static_cast<T>(a); }
};

// Max/Min propagate NaN (numpy semantics): once a lane holds NaN it keeps it, and a NaN
// element replaces whatever the lane held. Over an empty set floats give -inf/+inf (TF);
// the kernel rejects empty integer reductions.
template <Kind K, typename T>
struct Reducer<K, T, std::enable_if_t<(K == Kind::max || K == Kind::min)>> {
  using Lane = T;
  using Acc = T;
  static T lane_id() {
    if constexpr (kIsFloat<T>)
      return K == Kind::max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    else
      return K == Kind::max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  }
  static T step(T l, T x) {
    // Bitwise | keeps this a branch-free select that vectorizes.
    if constexpr (K == Kind::max) return ((x > l) | (x != x)) ? x : l;
    else return ((x < l) | (x != x)) ? x : l;
  }
  static T acc_id() { return lane_id(); }
  static T fold(T a, T l) { return step(a, l); }
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
    for (int j = 0; j < W; ++j) l0[j] = l1[j] = lane_id();
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
    T r = lane_id();
    for (int j = 0; j < W; ++j) r = step(step(r, l0[j]), l1[j]);
    for (; i < n; ++i) r = step(r, p[i]);
    return r;
  }
};

// Reduces p[0, n) into an accumulator.
template <class Rd, typename T>
typename Rd::Acc reduce_contig(const T* p, int64_t n) {
  if constexpr (requires { Rd::contig(p, n); }) return Rd::contig(p, n);
  using Lane = typename Rd::Lane;
  typename Rd::Acc acc = Rd::acc_id();
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    const T* q = p + b;
    Lane l[kLanes];
    for (int j = 0; j < kLanes; ++j) l[j] = Rd::lane_id();
    int64_t i = 0;
    for (; i + kLanes <= m; i += kLanes)
      for (int j = 0; j < kLanes; ++j) l[j] = Rd::step(l[j], q[i + j]);
    for (int j = 0; i < m; ++i, ++j) l[j] = Rd::step(l[j], q[i]);
    for (int j = 0; j < kLanes; ++j) acc = Rd::fold(acc, l[j]);
  }
  return acc;
}

// acc[c] (already initialized) absorbs p[r*stride + c] for r in [0, rows), c in [0, cols)
// with cols <= kColChunk: every row is one contiguous, vectorized pass over the tile.
template <class Rd, typename T>
void reduce_cols_tile(const T* p, int64_t rows, int64_t cols, int64_t stride, typename Rd::Acc* acc) {
  typename Rd::Lane tmp[kColChunk];
  for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
    const int64_t rn = std::min(kRowBlock, rows - r0);
    for (int64_t c = 0; c < cols; ++c) tmp[c] = Rd::lane_id();
    for (int64_t r = r0; r < r0 + rn; ++r) {
      const T* q = p + r * stride;
      for (int64_t c = 0; c < cols; ++c) tmp[c] = Rd::step(tmp[c], q[c]);
    }
    for (int64_t c = 0; c < cols; ++c) acc[c] = Rd::fold(acc[c], tmp[c]);
  }
}

}  // namespace actorflow::reduce
