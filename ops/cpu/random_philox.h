// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11),
// the counter-based generator TF uses. Any block of the stream is computed directly from
// its counter, so a kernel can shard a draw over threads and still produce the same
// values for a seed whatever the thread count. Header-only so tests can check it against
// the published known-answer vectors.
#pragma once
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>

namespace actorflow::rng {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

inline PhiloxCounter philox4x32_10(PhiloxCounter c, PhiloxKey k) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += kW0;
      k[1] += kW1;
    }
    const uint64_t p0 = uint64_t{kM0} * c[0];
    const uint64_t p1 = uint64_t{kM1} * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
  }
  return c;
}

// Blocks first, first + 1, ..., first + kPhiloxLanes - 1 of the stream whose counter is
// (block's low 32 bits, its high 32 bits, 0, 0): out[w][l] is word w of block first + l,
// what philox4x32_10 gives for that block. The blocks' words sit side by side, so the
// rounds compile to vector multiplies over all lanes at once, where single blocks run
// their rounds' scalar multiplies one block after another.
inline constexpr int kPhiloxLanes = 16;

inline void philox4x32_10_lanes(uint64_t first, PhiloxKey key, uint32_t (&out)[4][kPhiloxLanes]) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0[kPhiloxLanes], c1[kPhiloxLanes], c2[kPhiloxLanes], c3[kPhiloxLanes];
  for (int l = 0; l < kPhiloxLanes; ++l) {
    const uint64_t block = first + static_cast<uint64_t>(l);
    c0[l] = static_cast<uint32_t>(block);
    c1[l] = static_cast<uint32_t>(block >> 32);
    c2[l] = 0;
    c3[l] = 0;
  }
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    for (int l = 0; l < kPhiloxLanes; ++l) {
      const uint64_t p0 = uint64_t{kM0} * c0[l];
      const uint64_t p1 = uint64_t{kM1} * c2[l];
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[l] ^ k0;
      const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[l] ^ k1;
      c1[l] = static_cast<uint32_t>(p1);
      c3[l] = static_cast<uint32_t>(p0);
      c0[l] = n0;
      c2[l] = n2;
    }
  }
  for (int l = 0; l < kPhiloxLanes; ++l) {
    out[0][l] = c0[l];
    out[1][l] = c1[l];
    out[2][l] = c2[l];
    out[3][l] = c3[l];
  }
}

// SplitMix64's finalizer: spreads nearby seeds (1, 2, 3...) over the whole key space.
inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A random op's key from its seed and seed2 attributes, as every kernel drawing Philox
// blocks derives it, so equal seeds draw the same stream in RandomUniform, Dropout and
// their GPU kernels. Both 0: a fresh key from the system's entropy source, or, without
// one, from the clock and an address, which still differ between kernels.
inline PhiloxKey philox_key(int64_t seed, int64_t seed2) {
  uint64_t k;
  if (seed != 0 || seed2 != 0) {
    k = mix64(mix64(static_cast<uint64_t>(seed)) ^ static_cast<uint64_t>(seed2));
  } else {
    try {
      std::random_device rd;
      k = (uint64_t{rd()} << 32) ^ rd();
    } catch (...) {
      static std::atomic<uint64_t> salt{0};
      int local;
      k = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
          reinterpret_cast<uintptr_t>(&local) ^ (++salt << 48);
    }
  }
  return {static_cast<uint32_t>(k), static_cast<uint32_t>(k >> 32)};
}

// Uniform floats from raw bits: [0, 1) keeps the top bits; (0, 1] (for logs) adds one ulp.
inline float u01_f32(uint32_t x) { return static_cast<float>(x >> 8) * 0x1p-24f; }
inline float u01_open0_f32(uint32_t x) { return static_cast<float>((x >> 8) + 1) * 0x1p-24f; }
inline double u01_f64(uint32_t hi, uint32_t lo) {
  return static_cast<double>(((uint64_t{hi} << 32) | lo) >> 11) * 0x1p-53;
}
inline double u01_open0_f64(uint32_t hi, uint32_t lo) {
  return static_cast<double>((((uint64_t{hi} << 32) | lo) >> 11) + 1) * 0x1p-53;
}

// Values of T one Philox block yields: 4 floats or 2 doubles.
template <typename T>
inline constexpr int kPerBlock = sizeof(T) == 4 ? 4 : 2;

template <typename T>
inline void uniforms(const PhiloxCounter& r, T* out) {
  if constexpr (sizeof(T) == 4) {
    for (int i = 0; i < 4; ++i) out[i] = u01_f32(r[static_cast<size_t>(i)]);
  } else {
    out[0] = u01_f64(r[0], r[1]);
    out[1] = u01_f64(r[2], r[3]);
  }
}

// Standard normals by Box-Muller: two uniforms give two independent normals.
template <typename T>
inline void normals(const PhiloxCounter& r, T* out) {
  constexpr T kTwoPi = static_cast<T>(6.283185307179586476925286766559);
  auto box_muller = [&](T u1, T u2, T* z) {
    const T radius = std::sqrt(T(-2) * std::log(u1));
    const T theta = kTwoPi * u2;
    z[0] = radius * std::cos(theta);
    z[1] = radius * std::sin(theta);
  };
  if constexpr (sizeof(T) == 4) {
    box_muller(u01_open0_f32(r[0]), u01_f32(r[1]), out);
    box_muller(u01_open0_f32(r[2]), u01_f32(r[3]), out + 2);
  } else {
    box_muller(u01_open0_f64(r[0], r[1]), u01_f64(r[2], r[3]), out);
  }
}

}  // namespace actorflow::rng
