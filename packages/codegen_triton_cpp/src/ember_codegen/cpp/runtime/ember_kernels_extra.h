// ember_kernels_extra.h: helpers the generated kernels use on top of ember_runtime.h:
// index min/max, bit casts, checked indirect indices, arg-reduction accumulators and the
// team size of reductions split across threads.
#pragma once

#include "ember_runtime.h"

// Vector math: glibc's libmvec has SIMD versions of the libm functions, but <math.h>
// declares them only under -ffast-math (which we do not use: see toolchain.py). Declaring
// them here lets the vectorizer call them in element-wise loops (libmvec is linked through
// libm; its documented accuracy is within 4 ulp, inside eager's float tolerances).
#if defined(__x86_64__) && defined(__GLIBC__) && !defined(__FAST_MATH__) && \
    !defined(EMBER_NO_LIBMVEC)
extern "C" {
#if __GLIBC_PREREQ(2, 22)
__attribute__((simd("notinbranch"))) float sinf(float) noexcept;
__attribute__((simd("notinbranch"))) double sin(double) noexcept;
__attribute__((simd("notinbranch"))) float cosf(float) noexcept;
__attribute__((simd("notinbranch"))) double cos(double) noexcept;
__attribute__((simd("notinbranch"))) float expf(float) noexcept;
__attribute__((simd("notinbranch"))) double exp(double) noexcept;
__attribute__((simd("notinbranch"))) float logf(float) noexcept;
__attribute__((simd("notinbranch"))) double log(double) noexcept;
__attribute__((simd("notinbranch"))) float powf(float, float) noexcept;
__attribute__((simd("notinbranch"))) double pow(double, double) noexcept;
#endif
#if __GLIBC_PREREQ(2, 35)
// ember_vmath.h picks libmvec's tanhf/erff/log1pf/expm1f over its own where this is set
#define EMBER_LIBMVEC_EXTENDED 1
__attribute__((simd("notinbranch"))) float acosf(float) noexcept;
__attribute__((simd("notinbranch"))) double acos(double) noexcept;
__attribute__((simd("notinbranch"))) float acoshf(float) noexcept;
__attribute__((simd("notinbranch"))) double acosh(double) noexcept;
__attribute__((simd("notinbranch"))) float asinf(float) noexcept;
__attribute__((simd("notinbranch"))) double asin(double) noexcept;
__attribute__((simd("notinbranch"))) float asinhf(float) noexcept;
__attribute__((simd("notinbranch"))) double asinh(double) noexcept;
__attribute__((simd("notinbranch"))) float atanf(float) noexcept;
__attribute__((simd("notinbranch"))) double atan(double) noexcept;
__attribute__((simd("notinbranch"))) float atanhf(float) noexcept;
__attribute__((simd("notinbranch"))) double atanh(double) noexcept;
__attribute__((simd("notinbranch"))) float atan2f(float, float) noexcept;
__attribute__((simd("notinbranch"))) double atan2(double, double) noexcept;
__attribute__((simd("notinbranch"))) float coshf(float) noexcept;
__attribute__((simd("notinbranch"))) double cosh(double) noexcept;
__attribute__((simd("notinbranch"))) float erff(float) noexcept;
__attribute__((simd("notinbranch"))) double erf(double) noexcept;
__attribute__((simd("notinbranch"))) float erfcf(float) noexcept;
__attribute__((simd("notinbranch"))) double erfc(double) noexcept;
__attribute__((simd("notinbranch"))) float exp2f(float) noexcept;
__attribute__((simd("notinbranch"))) double exp2(double) noexcept;
__attribute__((simd("notinbranch"))) float expm1f(float) noexcept;
__attribute__((simd("notinbranch"))) double expm1(double) noexcept;
__attribute__((simd("notinbranch"))) float hypotf(float, float) noexcept;
__attribute__((simd("notinbranch"))) double hypot(double, double) noexcept;
__attribute__((simd("notinbranch"))) float log10f(float) noexcept;
__attribute__((simd("notinbranch"))) double log10(double) noexcept;
__attribute__((simd("notinbranch"))) float log1pf(float) noexcept;
__attribute__((simd("notinbranch"))) double log1p(double) noexcept;
__attribute__((simd("notinbranch"))) float log2f(float) noexcept;
__attribute__((simd("notinbranch"))) double log2(double) noexcept;
__attribute__((simd("notinbranch"))) float sinhf(float) noexcept;
__attribute__((simd("notinbranch"))) double sinh(double) noexcept;
__attribute__((simd("notinbranch"))) float tanf(float) noexcept;
__attribute__((simd("notinbranch"))) double tan(double) noexcept;
__attribute__((simd("notinbranch"))) float tanhf(float) noexcept;
__attribute__((simd("notinbranch"))) double tanh(double) noexcept;
#endif
}
#endif

namespace ember_extra {

// Error code a kernel sets when a gathered index is out of range (eager: IndexError).
constexpr int kIndexOutOfRange = 2;
// Per-thread partial accumulators live in arrays of this size (the team is capped to it).
constexpr int kMaxThreads = 64;

inline int team_size() {
  int n = ember::max_threads();
  return n < kMaxThreads ? n : kMaxThreads;
}

inline int team_threads() {
#ifdef _OPENMP
  return omp_get_num_threads();
#else
  return 1;
#endif
}

inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }
inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

template <typename To, typename From>
inline To bitcast(From x) {
  static_assert(sizeof(To) == sizeof(From), "bitcast between types of different sizes");
  To out;
  std::memcpy(&out, &x, sizeof out);
  return out;
}

// An index loaded from a tensor: negative values count from the end; anything still out of
// range reports IndexError (through the error code) and reads element 0 instead of memory
// that is not the tensor's.
inline int64_t wrap_index(int64_t i, int64_t size) {
  int64_t wrapped = i < 0 ? i + size : i;
  if (wrapped < 0 || wrapped >= size) {
    ember::set_error(kIndexOutOfRange);
    return 0;
  }
  return wrapped;
}

// argmax / argmin: the first index of the extreme value; NaN counts as the extreme (eager).
template <typename T>
struct ArgAcc {
  T value;
  int64_t index = -1;  // -1: no element seen yet
};

template <typename T>
inline bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return x != x;
  } else {
    return false;
  }
}

template <bool kMax, typename T>
inline bool arg_better(T candidate, T best) {
  if (is_nan(best)) return false;
  if (is_nan(candidate)) return true;
  return kMax ? candidate > best : candidate < best;
}

template <bool kMax, typename T>
inline ArgAcc<T> arg_update(ArgAcc<T> acc, T value, int64_t index) {
  if (acc.index < 0 || arg_better<kMax>(value, acc.value)) return {value, index};
  return acc;
}

// `a` covers lower indices than `b` (partials are combined in thread order).
template <bool kMax, typename T>
inline ArgAcc<T> arg_combine(ArgAcc<T> a, ArgAcc<T> b) {
  if (b.index < 0) return a;
  if (a.index < 0 || arg_better<kMax>(b.value, a.value)) return b;
  return a;
}

}  // namespace ember_extra
