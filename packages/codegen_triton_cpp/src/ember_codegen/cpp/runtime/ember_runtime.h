// ember_runtime.h: the runtime every generated Ember C++ kernel includes.
//
// It holds what C/C++ gets differently from eager PyTorch: reduced-precision float
// conversions, Python-style integer/float division, NaN-propagating min/max, shifts and
// casts without undefined behaviour, a Welford combine, and the error code a kernel uses
// to report what eager would raise. Everything is header-only and small on purpose: this
// file is parsed once per kernel compile, so it includes only <cmath>, <cstdint>,
// <cstring>, <type_traits> (and <omp.h> when OpenMP is on).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#ifdef _OPENMP
#include <omp.h>
#endif

// Kernels are compiled with -fvisibility=hidden; EMBER_KERNEL exports one entry point.
#define EMBER_KERNEL extern "C" __attribute__((visibility("default")))
#define EMBER_RESTRICT __restrict__

// Set (never cleared) by a kernel that hit what eager raises on; the Python side reads and
// resets it after calls that can fail (see ember_codegen.cpp.loader). Weak so that a kernel
// built from several translation units still has one.
extern "C" __attribute__((visibility("default"), weak)) int ember_error_code = 0;

namespace ember {

enum ErrorCode : int {
  kOk = 0,
  kIntegerDivisionByZero = 1,
};

inline void set_error(int code) { __atomic_store_n(&ember_error_code, code, __ATOMIC_RELAXED); }

// ---------------------------------------------------------------- threads
inline int max_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

inline int thread_id() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

// ---------------------------------------------------------------- bit casts
inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// ---------------------------------------------------------------- bfloat16 / float16
// Both are stored as uint16_t bit patterns; compute happens in float32.

// a * b + c rounded once where the target has fused multiply-add. For the polynomials of
// our own math functions only (a vfmadd instead of a multiply and an add, and one rounding
// less); -ffp-contract=off keeps the kernels' own arithmetic unfused, like eager's loops.
inline float madd(float a, float b, float c) {
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
  return __builtin_fmaf(a, b, c);
#else
  return a * b + c;
#endif
}

inline float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

// Round to nearest, ties to even. NaN becomes 0xFFFF, the pattern eager's float32 ->
// bfloat16 conversion produces (any NaN pattern would do; this one compares bit-equal).
inline uint16_t float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return f != f ? static_cast<uint16_t>(0xFFFFu) : static_cast<uint16_t>(rounded);
}

// The float16 conversions compute every case and select, without branches, so that loops
// over them vectorize.
inline float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  uint32_t normal = ((exponent + 112u) << 23) | (mantissa << 13);
  // inf, or NaN with its payload kept and made quiet
  uint32_t special = 0x7F800000u | (mantissa << 13) | (mantissa ? 0x400000u : 0u);
  // zero or subnormal: mantissa * 2^-24 is exact in float
  uint32_t tiny = float_bits(static_cast<float>(mantissa) * 5.9604644775390625e-8f);
  uint32_t magnitude = exponent == 0 ? tiny : (exponent == 0x1Fu ? special : normal);
  return bits_float(sign | magnitude);
}

// Round to nearest, ties to even, like the hardware conversion eager uses (NaN stays NaN,
// quiet, sign and top payload bits kept).
inline uint16_t float_to_half(float f) {
  uint32_t u = float_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t magnitude = u & 0x7FFFFFFFu;
  // Normal: rebias the exponent (127 -> 15) and round 23 mantissa bits to 10.
  uint32_t normal = (magnitude - (112u << 23) + 0xFFFu + ((magnitude >> 13) & 1u)) >> 13;
  // Below 2^-14 the result is subnormal: adding 0.5f lines the float's mantissa up with the
  // half's 2^-24 unit, so the FPU's own rounding does the ties-to-even for us.
  uint32_t tiny = float_bits(bits_float(magnitude) + 0.5f) - 0x3F000000u;
  uint32_t nan = 0x7E00u | ((magnitude >> 13) & 0x3FFu);
  uint32_t result = magnitude < 0x38800000u ? tiny : normal;
  result = magnitude >= 0x477FF000u ? 0x7C00u : result;  // >= 65520 rounds past 65504: inf
  result = magnitude > 0x7F800000u ? nan : result;
  return static_cast<uint16_t>(sign | result);
}

// ---------------------------------------------------------------- integer helpers
template <typename T>
inline T wrapping_neg(T a) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(U(0) - static_cast<U>(a));
}

// Python-style floor division: rounds toward -inf. Division by zero sets the error code
// (eager raises ZeroDivisionError); INT_MIN // -1 wraps like eager instead of trapping.
template <typename T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
inline T floordiv(T a, T b) {
  if (b == 0) {
    set_error(kIntegerDivisionByZero);
    return 0;
  }
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return wrapping_neg(a);
    T quotient = a / b;
    T rest = a % b;
    if (rest != 0 && ((rest < 0) != (b < 0))) --quotient;
    return quotient;
  } else {
    return a / b;
  }
}

// Python-style remainder: takes the divisor's sign.
template <typename T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
inline T remainder(T a, T b) {
  if (b == 0) {
    set_error(kIntegerDivisionByZero);
    return 0;
  }
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return 0;
    T rest = a % b;
    if (rest != 0 && ((rest < 0) != (b < 0))) rest += b;
    return rest;
  } else {
    return a % b;
  }
}

// C-style (truncating) division and fmod, as torch.div(rounding_mode="trunc") / torch.fmod.
template <typename T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
inline T truncdiv(T a, T b) {
  if (b == 0) {
    set_error(kIntegerDivisionByZero);
    return 0;
  }
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return wrapping_neg(a);
  }
  return a / b;
}

template <typename T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
inline T truncmod(T a, T b) {
  if (b == 0) {
    set_error(kIntegerDivisionByZero);
    return 0;
  }
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return 0;
  }
  return a % b;
}

// Shifts as eager defines them: a count outside [0, bits) shifts everything out (left:
// 0; right: the sign fills the value) instead of being undefined behaviour.
template <typename T>
inline T shift_left(T a, T count) {
  using U = std::make_unsigned_t<T>;
  constexpr int kBits = 8 * sizeof(T);
  bool out_of_range = count < 0 || static_cast<int64_t>(count) >= kBits;
  return out_of_range ? T(0) : static_cast<T>(static_cast<U>(a) << count);
}

template <typename T>
inline T shift_right(T a, T count) {
  constexpr int kBits = 8 * sizeof(T);
  bool out_of_range = count < 0 || static_cast<int64_t>(count) >= kBits;
  if constexpr (std::is_signed_v<T>) {
    return static_cast<T>(out_of_range ? a >> (kBits - 1) : a >> count);
  } else {
    return out_of_range ? T(0) : static_cast<T>(a >> count);
  }
}

// Integer power by squaring, wrapping on overflow like eager. Negative exponents give
// 1 / base truncated: 1 for base 1, +-1 for base -1, 0 otherwise.
template <typename T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
inline T ipow(T base, T exponent) {
  using U = std::make_unsigned_t<T>;
  if constexpr (std::is_signed_v<T>) {
    if (exponent < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exponent & 1) ? T(-1) : T(1);
      return 0;
    }
  }
  U result = 1;
  U factor = static_cast<U>(base);
  U e = static_cast<U>(exponent);
  while (e) {
    if (e & 1u) result *= factor;
    factor *= factor;
    e >>= 1;
  }
  return static_cast<T>(result);
}

// ---------------------------------------------------------------- float helpers
// Python-style floor division for floats (eager's torch.floor_divide): the quotient of
// a - fmod(a, b), corrected toward -inf and rounded; division by zero gives a / b.
template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
inline T floordiv(T a, T b) {
  if (b == 0) return a / b;
  T mod = std::fmod(a, b);
  T quotient = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) quotient -= 1;
  if (quotient == 0) return std::copysign(T(0), a / b);
  T floored = std::floor(quotient);
  if (quotient - floored > T(0.5)) floored += 1;
  return floored;
}

// Python-style remainder for floats (sign of the divisor; an exact zero keeps fmod's sign).
template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
inline T remainder(T a, T b) {
  T mod = std::fmod(a, b);
  if (mod != 0 && ((b < 0) != (mod < 0))) mod += b;
  return mod;
}

// torch.sign: NaN gives 0, zeros give 0.
template <typename T>
inline T sign(T x) {
  return static_cast<T>((T(0) < x) - (x < T(0)));
}

// torch.round: half to even (the default rounding mode).
template <typename T>
inline T round_half_even(T x) {
  return std::nearbyint(x);
}

// exp for float32 written in plain arithmetic and selects, so that loops calling it
// vectorize (libm's expf is a scalar call: softmax spent most of its time there). Cody-Waite
// reduction x = n*ln2 + r, Cephes' degree-6 polynomial for e^r (about 1 ulp), then 2^n
// applied in two halves so that results down to the subnormals come out right.
inline float exp(float x) {
  constexpr float kMax = 88.72283935546875f;    // above: overflow to inf
  constexpr float kMin = -103.97208404541015f;  // below: underflow to 0
  const bool nan = x != x;
  // Lanes whose result is inf, 0 or NaN compute exp(0) and are replaced at the end: a
  // clamped -inf (softmax's masked entries) would make subnormal intermediates, and each
  // of those costs a microcode assist (a masked softmax ran 4x slower).
  const float xc = (nan | (x > kMax) | (x < kMin)) ? 0.0f : x;
  // round-to-nearest of x / ln2 with the 1.5 * 2^23 trick (no libm call); n also sits in
  // the low bits of t, read back as an integer without a conversion
  const float t = madd(xc, 1.44269504088896341f, 12582912.0f);
  const float n = t - 12582912.0f;
  float r = madd(n, -0.693359375f, xc);
  r = madd(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = madd(p, r, 1.3981999507e-3f);
  p = madd(p, r, 8.3334519073e-3f);
  p = madd(p, r, 4.1665795894e-2f);
  p = madd(p, r, 1.6666665459e-1f);
  p = madd(p, r, 5.0000001201e-1f);
  p = madd(p * r, r, r) + 1.0f;
  const int32_t ni = static_cast<int32_t>(float_bits(t) - 0x4B400000u);  // bits of 1.5 * 2^23
  const int32_t half = ni >> 1;
  const float s1 = bits_float(static_cast<uint32_t>(half + 127) << 23);
  const float s2 = bits_float(static_cast<uint32_t>(ni - half + 127) << 23);
  float result = (p * s1) * s2;
  result = x > kMax ? INFINITY : result;
  result = x < kMin ? 0.0f : result;
  return nan ? x : result;
}

inline double exp(double x) { return std::exp(x); }

template <typename T>
inline T sigmoid(T x) {
  return T(1) / (T(1) + ember::exp(-x));
}

template <typename T>
inline T reciprocal(T x) {
  return T(1) / x;
}

template <typename T>
inline T rsqrt(T x) {
  return T(1) / std::sqrt(x);
}

// torch.maximum / torch.minimum: a NaN in either input wins. Equal inputs (-0.0 vs 0.0)
// return the second one, as eager's vectorized loops do (its scalar tail returns the first).
// Selects, not early returns: GCC 13 refuses to vectorize a loop whose inlined body still
// branches ("control flow in loop"), which made max-pool kernels 10x slower there.
template <typename T>
inline T maximum(T a, T b) {
  const T larger = a > b ? a : b;
  if constexpr (std::is_floating_point_v<T>) {
    const T nan = a != a ? a : b;
    return ((a != a) | (b != b)) ? nan : larger;
  }
  return larger;
}

template <typename T>
inline T minimum(T a, T b) {
  const T smaller = a < b ? a : b;
  if constexpr (std::is_floating_point_v<T>) {
    const T nan = a != a ? a : b;
    return ((a != a) | (b != b)) ? nan : smaller;
  }
  return smaller;
}

// Inverse error function: Giles' single-precision polynomial as the first guess, then two
// Newton steps in double, so float64 results are accurate to a few ulps too.
inline double erfinv_double(double y) {
  if (!(y > -1.0 && y < 1.0)) {
    if (y == 1.0) return INFINITY;
    if (y == -1.0) return -INFINITY;
    return NAN;
  }
  double w = -std::log((1.0 - y) * (1.0 + y));
  double p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = std::sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double x = p * y;
  constexpr double kTwoOverSqrtPi = 1.1283791670955126;
  for (int step = 0; step < 2; ++step) {
    x -= (std::erf(x) - y) / (kTwoOverSqrtPi * std::exp(-x * x));
  }
  return x;
}

template <typename T>
inline T erfinv(T y) {
  return static_cast<T>(erfinv_double(static_cast<double>(y)));
}

// ---------------------------------------------------------------- casts
// Float -> integer casts as eager does them on x86 (where C++ leaves them undefined):
// NaN and out-of-range values give the type's minimum for int32/int64; narrower integer
// types go through int32 and wrap; bool is "not zero" (NaN is true).
template <typename To, typename From>
inline To cast(From x) {
  if constexpr (std::is_floating_point_v<From> && std::is_same_v<To, bool>) {
    return x != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_same_v<To, int64_t>) {
    bool in_range = x >= From(-9.2233720368547758e18) && x < From(9.2233720368547758e18);
    return in_range ? static_cast<int64_t>(x) : INT64_MIN;
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    bool in_range = x > From(-2147483649.0) && x < From(2147483648.0);
    int32_t wide = in_range ? static_cast<int32_t>(x) : INT32_MIN;
    return static_cast<To>(wide);
  } else {
    return static_cast<To>(x);
  }
}

// ---------------------------------------------------------------- random numbers
// The counter-based generator of ember_primops.random (prims.random_bits / uniform /
// normal), bit for bit: a value depends only on (seed, stream, counter), so any thread can
// compute any element. All arithmetic is uint32 and wraps.
inline uint32_t random_mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}

// Per-call key of a stream (0: bits and uniform; 1 and 2: the two inputs of normal).
inline uint32_t random_key(int64_t seed, uint32_t stream) {
  uint64_t s = static_cast<uint64_t>(seed);
  uint32_t seed_lo = static_cast<uint32_t>(s), seed_hi = static_cast<uint32_t>(s >> 32);
  return random_mix32(random_mix32(seed_hi ^ (0x9E3779B9u * (stream + 1u))) ^ seed_lo);
}

// 32 random bits of counter `n` (= the call's offset + the element's linear index).
inline uint32_t random_bits(uint32_t key, int64_t n) {
  uint64_t u = static_cast<uint64_t>(n);
  return random_mix32(random_mix32(static_cast<uint32_t>(u) ^ key) ^ static_cast<uint32_t>(u >> 32));
}

// uniform in [0, 1) from the top `mantissa_bits` bits: 24 for float32, 11 for float16 and
// 8 for bfloat16 (exact in float, then exact in the narrow type), 32 for float64.
inline float random_uniform_float(uint32_t bits, int mantissa_bits) {
  return static_cast<float>(bits >> (32 - mantissa_bits)) * std::ldexp(1.0f, -mantissa_bits);
}

inline double random_uniform_double(uint32_t bits) {
  return static_cast<double>(bits) * 2.3283064365386963e-10;  // 2^-32
}

// Box-Muller over streams 1 and 2: in float32 from 24-bit uniforms (every dtype up to
// float32), in float64 from 32-bit ones.
inline float random_normal_float(uint32_t key1, uint32_t key2, int64_t n) {
  float u1 = static_cast<float>((random_bits(key1, n) >> 8) + 1u) * 5.9604644775390625e-8f;
  float u2 = static_cast<float>(random_bits(key2, n) >> 8) * 5.9604644775390625e-8f;
  float radius = std::sqrt(-2.0f * std::log(u1));
  return radius * std::cos(6.2831854820251465f * u2);  // float32(2 pi)
}

inline double random_normal_double(uint32_t key1, uint32_t key2, int64_t n) {
  double u1 = (static_cast<double>(random_bits(key1, n)) + 1.0) * 2.3283064365386963e-10;
  double u2 = static_cast<double>(random_bits(key2, n)) * 2.3283064365386963e-10;
  double radius = std::sqrt(-2.0 * std::log(u1));
  return radius * std::cos(6.283185307179586 * u2);
}

// ---------------------------------------------------------------- Welford
// One-pass mean / variance: per-thread partials are merged with welford_combine.
// variance = m2 / (weight - correction).
template <typename T>
struct Welford {
  T mean = T(0);
  T m2 = T(0);
  T weight = T(0);
};

template <typename T>
inline Welford<T> welford_update(Welford<T> acc, T value) {
  T weight = acc.weight + T(1);
  T delta = value - acc.mean;
  T mean = acc.mean + delta / weight;
  return {mean, acc.m2 + delta * (value - mean), weight};
}

template <typename T>
inline Welford<T> welford_combine(Welford<T> a, Welford<T> b) {
  if (a.weight == T(0)) return b;
  if (b.weight == T(0)) return a;
  T weight = a.weight + b.weight;
  T delta = b.mean - a.mean;
  T b_share = b.weight / weight;
  return {a.mean + delta * b_share, a.m2 + b.m2 + delta * delta * a.weight * b_share, weight};
}

}  // namespace ember
