// ember_vmath.h: float32 transcendental functions written as straight-line arithmetic and
// selects, so that element-wise loops calling them vectorize into plain SIMD code, and the
// ember::log / log1p / expm1 / tanh / erf overloads the generated kernels call.
//
// ember::vmath holds our implementations: every case computed and the answer selected, no
// branches, calls or tables. The coefficients are our own fits (near-minimax: least squares
// on Chebyshev nodes with Lawson reweighting, rounded to float32; see the codegen README
// "Vector math"); evaluated with fused multiply-adds where the target has them (madd).
// Worst errors against a double-precision reference over the test inputs (random bit
// patterns, dense ranges, edges): log 0.90 ulp, log1p 1.44, expm1 1.47, tanh 1.29, erf 1.10
// (ember::exp 1.00); inf, NaN, signed zeros and subnormals as eager
// (tests/cpp/test_vector_math.py).
//
// Which one a kernel gets: glibc's libmvec (declared in ember_kernels_extra.h) vectorizes
// the libm calls too. Measured on this project's AVX-512 host, 4M-element loops, libmvec's
// tanhf/erff/log1pf/expm1f run 1.3-1.8x faster than ours (its variants use tables), while
// our log beats logf's (1.1x). So ember::log is always ours; the other four are ours only
// where libmvec's extended set (glibc >= 2.35, x86-64) is not declared. float64 keeps libm
// everywhere: these polynomials are float32-accurate only.
#pragma once

#include "ember_kernels_extra.h"  // libmvec declarations: EMBER_LIBMVEC_EXTENDED
#include "ember_runtime.h"

namespace ember {
namespace vmath {

namespace detail {

constexpr float kLn2Hi = 0.693359375f;  // few mantissa bits: n * kLn2Hi is exact for |n| < 2^15
constexpr float kLn2Lo = -2.12194440e-4f;

// log(1 + f) for f in [sqrt(1/2) - 1, sqrt(2) - 1]: f - f^2/2 + f^3 P(f)
inline float log1p_reduced(float f) {
  float p = -0.07974199205636978f;
  p = madd(p, f, 0.1265569031238556f);
  p = madd(p, f, -0.12989278137683868f);
  p = madd(p, f, 0.14209946990013123f);
  p = madd(p, f, -0.16641581058502197f);
  p = madd(p, f, 0.20001201331615448f);
  p = madd(p, f, -0.25000303983688354f);
  p = madd(p, f, 0.3333333134651184f);
  const float f2 = f * f;
  return f + (f2 * f * p - 0.5f * f2);
}

// e^r - 1 for |r| <= ln2/2: r + r^2 P(r), the polynomial of ember::exp (no cancellation).
inline float expm1_reduced(float r) {
  float p = 1.9875691500e-4f;
  p = madd(p, r, 1.3981999507e-3f);
  p = madd(p, r, 8.3334519073e-3f);
  p = madd(p, r, 4.1665795894e-2f);
  p = madd(p, r, 1.6666665459e-1f);
  p = madd(p, r, 5.0000001201e-1f);
  return r + r * r * p;
}

inline float pow2i(int32_t n) { return bits_float(static_cast<uint32_t>(n + 127) << 23); }

// e^x for x in [-80, 80] only (no inf/NaN/underflow cases): ember::exp's reduction and
// polynomial. Callers clamp the argument themselves. Besides saving the selects, this
// keeps loops vectorizable: GCC 12 gives up on a loop where ember::exp's special-case
// selects meet a clamp of its argument ("no vectype" after if-conversion).
inline float exp_in_range(float x) {
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = madd(n, -kLn2Hi, x);
  r = madd(n, -kLn2Lo, r);
  return (expm1_reduced(r) + 1.0f) * pow2i(static_cast<int32_t>(n));
}

}  // namespace detail

// log: x = 2^e * m with m in [sqrt(1/2), sqrt(2)), log = e*ln2 + log1p(m - 1).
inline float log(float x) {
  using namespace detail;
  const bool subnormal = x < 1.17549435e-38f;  // (zero and negatives are replaced below)
  const float xs = subnormal ? x * 8388608.0f : x;  // * 2^23: normal from here on
  const int32_t shifted = static_cast<int32_t>(float_bits(xs) - 0x3F3504F3u);
  const int32_t e = (shifted >> 23) - (subnormal ? 23 : 0);
  const float m = bits_float((static_cast<uint32_t>(shifted) & 0x007FFFFFu) + 0x3F3504F3u);
  const float ef = static_cast<float>(e);
  float result = ef * kLn2Hi + (log1p_reduced(m - 1.0f) + ef * kLn2Lo);
  result = x == INFINITY ? INFINITY : result;
  result = x == 0.0f ? -INFINITY : result;
  result = x < 0.0f ? NAN : result;
  return x != x ? x : result;
}

// log1p: log(u) for u = 1 + x, plus the rounding error of that sum relative to u.
inline float log1p(float x) {
  const float u = 1.0f + x;
  const float correction = (x - (u - 1.0f)) / (u == 0.0f ? 1.0f : u);
  float result = vmath::log(u) + correction;
  result = x == INFINITY ? INFINITY : result;
  result = x == -1.0f ? -INFINITY : result;
  result = x < -1.0f ? NAN : result;
  result = x == 0.0f ? x : result;  // keeps -0.0
  return x != x ? x : result;
}

// expm1: x = n*ln2 + r, e^x - 1 = 2^n expm1(r) + (2^n - 1), exact scaling while 2^n - 1 is
// exact (n <= 24); above that the -1 is below an ulp and 2^n is applied in two halves.
inline float expm1(float x) {
  using namespace detail;
  constexpr float kMax = 88.72283935546875f;  // above: inf
  constexpr float kMin = -30.0f;              // below: -1 (e^x < 2^-43)
  const float xc = x > kMax ? kMax : (x < kMin ? kMin : x);
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = xc - n * kLn2Hi;
  r = r - n * kLn2Lo;
  const float em = expm1_reduced(r);
  const int32_t ni = static_cast<int32_t>(n);
  const int32_t nc = ni > 24 ? 24 : ni;
  const float scale = pow2i(nc);
  const float small = scale * em + (scale - 1.0f);
  const int32_t half = ni / 2;
  const float large = ((em + 1.0f) * pow2i(half)) * pow2i(ni - half);
  float result = ni > 24 ? large : small;
  result = x > kMax ? INFINITY : result;
  result = x == 0.0f ? x : result;  // keeps -0.0
  return x != x ? x : result;
}

// tanh: an odd polynomial below 0.625, 1 - 2 / (e^{2|x|} + 1) above (no cancellation
// worth an ulp there: tanh(0.625) = 0.55).
inline float tanh(float x) {
  const float ax = std::fabs(x);
  const float s = x * x;
  float p = -0.006096941418945789f;
  p = madd(p, s, 0.02099735662341118f);
  p = madd(p, s, -0.05385095253586769f);
  p = madd(p, s, 0.13332770764827728f);
  p = madd(p, s, -0.333333283662796f);
  const float small = x == 0.0f ? x : x + x * s * p;  // x * s * p is +0 at x = -0
  const float e = detail::exp_in_range(2.0f * (ax < 10.0f ? ax : 10.0f));  // tanh(10) = 1
  const float large_magnitude = 1.0f - 2.0f / (e + 1.0f);
  const float large = x < 0.0f ? -large_magnitude : large_magnitude;
  const float result = ax < 0.625f ? small : large;
  return x != x ? x : result;
}

// erf: x + x (P(x^2) - 1) below 0.875; above, 1 - erfc with erfc(a) = exp(Q(a - 2.4) - a^2), Q a fit
// of log(erfc(a)) + a^2 on [0.875, 3.93]; from 3.92 on, erf rounds to 1 in float32.
inline float erf(float x) {
  const float ax = std::fabs(x);
  const float s = x * x;
  float p = -0.0006203257944434881f;
  p = madd(p, s, 0.005032181739807129f);
  p = madd(p, s, -0.026791462674736977f);
  p = madd(p, s, 0.11282455176115036f);
  p = madd(p, s, -0.3761255145072937f);
  p = madd(p, s, 0.12837915122509003f);  // 2/sqrt(pi) - 1: x itself is added exactly
  const float small = x + x * p;
  const float a = ax < 3.93f ? ax : 3.93f;  // also maps NaN (replaced below) into range
  const float u = a - 2.4f;
  float q = 1.6146516372828046e-06f;
  q = madd(q, u, -1.4586511497327592e-05f);
  q = madd(q, u, 8.715606236364692e-05f);
  q = madd(q, u, -0.0004695168463513255f);
  q = madd(q, u, 0.0023873336613178253f);
  q = madd(q, u, -0.011768140830099583f);
  q = madd(q, u, 0.0594981350004673f);
  q = madd(q, u, -0.36423659324645996f);
  q = madd(q, u, -1.520975112915039f);
  float large_magnitude = 1.0f - detail::exp_in_range(q - a * a);
  large_magnitude = ax > 3.92f ? 1.0f : large_magnitude;
  const float large = x < 0.0f ? -large_magnitude : large_magnitude;
  const float result = ax < 0.875f ? small : large;
  return x != x ? x : result;
}

}  // namespace vmath

// ---------------------------------------------------------------- what kernels call
inline float log(float x) { return vmath::log(x); }

#if defined(EMBER_LIBMVEC_EXTENDED)
inline float log1p(float x) { return std::log1p(x); }
inline float expm1(float x) { return std::expm1(x); }
inline float tanh(float x) { return std::tanh(x); }
inline float erf(float x) { return std::erf(x); }
#else
inline float log1p(float x) { return vmath::log1p(x); }
inline float expm1(float x) { return vmath::expm1(x); }
inline float tanh(float x) { return vmath::tanh(x); }
inline float erf(float x) { return vmath::erf(x); }
#endif

inline double log(double x) { return std::log(x); }
inline double log1p(double x) { return std::log1p(x); }
inline double expm1(double x) { return std::expm1(x); }
inline double tanh(double x) { return std::tanh(x); }
inline double erf(double x) { return std::erf(x); }

}  // namespace ember
