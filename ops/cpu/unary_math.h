// Branch-free float32 exp/log/log1p/tanh/sigmoid/softplus that GCC and Clang
// auto-vectorize when called from a plain loop over float*. libm's expf & co. are opaque
// calls that block vectorization unless the build uses -ffast-math (which we do not), so
// the elementwise kernels would run ~10x slower than memory bandwidth.
// Cephes-derived polynomials: exp is within 1 ulp, log within 2 ulp, tanh within ~3 ulp
// of the correctly rounded result over the whole float range; NaN and +-inf follow libm.
// double stays on libm (scalar): it is not on any hot path.
#pragma once
#if defined(__AVX512F__) || defined(__AVX__) || defined(__SSE2__)
#include <immintrin.h>
#endif
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace actorflow::unary_math {

// 2^k for integer k in [-126, 127], built from the exponent bits.
inline float pow2i(int32_t k) { return std::bit_cast<float>(static_cast<uint32_t>(k + 127) << 23); }

inline float exp_f32(float x) {
  const bool nan = x != x;
  // Past these bounds the result is inf / rounds to 0; clamping keeps n within the range
  // the two-step scaling below can represent (denormal results included).
  float xc = nan ? 0.0f : x;
  xc = xc > 89.0f ? 89.0f : xc;
  xc = xc < -104.0f ? -104.0f : xc;
  const float n = std::nearbyint(xc * 1.44269504088896341f);
  // Cody-Waite: ln2 split in a part exact in float times n and a remainder.
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // n in [-150, 129]: scale in two halves so neither 2^k leaves the normal range.
  const int32_t ni = static_cast<int32_t>(n);
  const int32_t n1 = ni >> 1;
  const float y = p * pow2i(n1) * pow2i(ni - n1);
  return nan ? x : y;
}

inline float log_f32(float x) {
  const bool nan = x != x;
  const bool neg = x < 0.0f;
  const bool zero = x == 0.0f;
  const bool inf = x == std::numeric_limits<float>::infinity();
  // Denormals: scale into the normal range first.
  const bool tiny = x < 1.17549435e-38f;
  float xs = tiny ? x * 8388608.0f : x;  // 2^23
  uint32_t bits = std::bit_cast<uint32_t>(xs);
  // (An integer select: the same adjustment done in float makes GCC 12 give up.)
  float e = static_cast<float>(static_cast<int32_t>((bits >> 23) & 0xffu) - 126 - (tiny ? 23 : 0));
  // Mantissa in [0.5, 1).
  float m = std::bit_cast<float>((bits & 0x007fffffu) | 0x3f000000u);
  const bool small = m < 0.707106781186547524f;
  e = small ? e - 1.0f : e;
  m = small ? m + m - 1.0f : m - 1.0f;
  const float z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  y = y + e * -2.12194440e-4f;
  y = y - 0.5f * z;
  float r = m + y;
  r = r + e * 0.693359375f;
  r = inf ? x : r;
  r = zero ? -std::numeric_limits<float>::infinity() : r;
  r = neg ? std::numeric_limits<float>::quiet_NaN() : r;
  return nan ? x : r;
}

// log(1+t) accurate for small t: the rounding error of u = 1+t is cancelled by the
// ratio t/(u-1) (Goldberg's trick).
inline float log1p_f32(float t) {
  const float u = 1.0f + t;
  const float d = u - 1.0f;
  const float l = log_f32(u);
  const float r = d == 0.0f ? t : l * (t / d);
  // u = inf: the ratio would be inf/inf.
  return u == std::numeric_limits<float>::infinity() ? u : r;
}

inline float tanh_f32(float x) {
  const float a = std::fabs(x);
  // Small |x|: odd polynomial (Cephes tanhf); otherwise 1 - 2/(e^{2|x|}+1), which has no
  // cancellation there.
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  const float big = 1.0f - 2.0f / (exp_f32(a + a) + 1.0f);
  const float sbig = x < 0.0f ? -big : big;
  // NaN: the comparison is false and big is NaN. x == 0 keeps the sign of -0.
  return a < 0.625f ? (x == 0.0f ? x : small) : sbig;
}

// 1/(1+e^-x) without overflow: with e = e^{-|x|} <= 1, x >= 0 gives 1/(1+e) and x < 0
// gives e/(1+e).
inline float sigmoid_f32(float x) {
  const float e = exp_f32(-std::fabs(x));
  const float s = 1.0f / (1.0f + e);
  return x >= 0.0f ? s : (x != x ? x : e * s);
}

// log(1+e^x) = max(x,0) + log1p(e^{-|x|}).
inline float softplus_f32(float x) {
  const float m = x > 0.0f ? x : 0.0f;
  const float r = m + log1p_f32(exp_f32(-std::fabs(x)));
  return x != x ? x : r;
}

// sqrt (or 1/sqrt) of n values. With math-errno on (the default) compilers keep a
// scalar libm fallback for negative inputs in every sqrt, which blocks vectorization;
// the SIMD instruction itself already gives NaN there, so use it directly.
template <bool kRecip, typename T>
void sqrt_array(const T* x, T* y, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    for (; i + 16 <= n; i += 16) {
      // (maskz: the unmasked form trips a GCC 12 -Wmaybe-uninitialized false positive.)
      __m512 v = _mm512_maskz_sqrt_ps(0xffff, _mm512_loadu_ps(x + i));
      if constexpr (kRecip) v = _mm512_div_ps(_mm512_set1_ps(1.0f), v);
      _mm512_storeu_ps(y + i, v);
    }
  } else {
    for (; i + 8 <= n; i += 8) {
      __m512d v = _mm512_maskz_sqrt_pd(0xff, _mm512_loadu_pd(x + i));
      if constexpr (kRecip) v = _mm512_div_pd(_mm512_set1_pd(1.0), v);
      _mm512_storeu_pd(y + i, v);
    }
  }
#elif defined(__AVX__)
  if constexpr (std::is_same_v<T, float>) {
    for (; i + 8 <= n; i += 8) {
      __m256 v = _mm256_sqrt_ps(_mm256_loadu_ps(x + i));
      if constexpr (kRecip) v = _mm256_div_ps(_mm256_set1_ps(1.0f), v);
      _mm256_storeu_ps(y + i, v);
    }
  } else {
    for (; i + 4 <= n; i += 4) {
      __m256d v = _mm256_sqrt_pd(_mm256_loadu_pd(x + i));
      if constexpr (kRecip) v = _mm256_div_pd(_mm256_set1_pd(1.0), v);
      _mm256_storeu_pd(y + i, v);
    }
  }
#elif defined(__SSE2__)
  if constexpr (std::is_same_v<T, float>) {
    for (; i + 4 <= n; i += 4) {
      __m128 v = _mm_sqrt_ps(_mm_loadu_ps(x + i));
      if constexpr (kRecip) v = _mm_div_ps(_mm_set1_ps(1.0f), v);
      _mm_storeu_ps(y + i, v);
    }
  } else {
    for (; i + 2 <= n; i += 2) {
      __m128d v = _mm_sqrt_pd(_mm_loadu_pd(x + i));
      if constexpr (kRecip) v = _mm_div_pd(_mm_set1_pd(1.0), v);
      _mm_storeu_pd(y + i, v);
    }
  }
#endif
  for (; i < n; ++i) y[i] = kRecip ? T(1) / std::sqrt(x[i]) : std::sqrt(x[i]);
}

// double versions (libm).
inline double sigmoid_f64(double x) {
  const double e = std::exp(-std::fabs(x));
  const double s = 1.0 / (1.0 + e);
  return x >= 0.0 ? s : (x != x ? x : e * s);
}
inline double softplus_f64(double x) {
  const double r = (x > 0.0 ? x : 0.0) + std::log1p(std::exp(-std::fabs(x)));
  return x != x ? x : r;
}

}  // namespace actorflow::unary_math
