"""Loading kernels and calling them on tensors: results match eager; errors are typed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from ember_codegen import (
    Float64,
    Int64,
    KernelArgumentError,
    KernelLoadError,
    KernelRuntimeError,
    KernelSignature,
    LoadedKernelLibrary,
    Pointer,
)

# Hand-written stand-ins for what the emitter will generate: a parallel, vectorizable
# elementwise add, and a sum with per-thread partials combined in thread order.
KERNELS = r"""
#include "ember_runtime.h"

#define ADD(NAME, T)                                                                   \
  EMBER_KERNEL void NAME(const T* EMBER_RESTRICT a, const T* EMBER_RESTRICT b,         \
                         T* EMBER_RESTRICT out, int64_t n) {                          \
    _Pragma("omp parallel for if (n > 4096)")                                          \
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];                              \
  }
ADD(add_f32, float)
ADD(add_f64, double)
ADD(add_i64, int64_t)
ADD(add_i32, int32_t)

EMBER_KERNEL void add_bf16(const uint16_t* EMBER_RESTRICT a, const uint16_t* EMBER_RESTRICT b,
                           uint16_t* EMBER_RESTRICT out, int64_t n) {
#pragma omp parallel for if (n > 4096)
  for (int64_t i = 0; i < n; ++i)
    out[i] = ember::float_to_bf16(ember::bf16_to_float(a[i]) + ember::bf16_to_float(b[i]));
}

EMBER_KERNEL void add_f16(const uint16_t* EMBER_RESTRICT a, const uint16_t* EMBER_RESTRICT b,
                          uint16_t* EMBER_RESTRICT out, int64_t n) {
#pragma omp parallel for if (n > 4096)
  for (int64_t i = 0; i < n; ++i)
    out[i] = ember::float_to_half(ember::half_to_float(a[i]) + ember::half_to_float(b[i]));
}

EMBER_KERNEL void add_bool(const bool* a, const bool* b, bool* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] || b[i];
}

// Sum with per-thread partials: each thread reduces a contiguous chunk in blocks of 1024,
// each block into 16 independent lanes (a vectorizable loop, no reassociation needed) whose
// sum is added to the thread's partial; the partials are combined in thread order. A single
// running float accumulator would drift past eager's tolerance on a million elements.
#define SUM(NAME, T, ACC)                                                              \
  EMBER_KERNEL void NAME(const T* EMBER_RESTRICT x, T* EMBER_RESTRICT out, int64_t n) { \
    ACC partials[256] = {};                                                            \
    int threads = ember::max_threads() < 256 ? ember::max_threads() : 256;             \
    _Pragma("omp parallel num_threads(threads)")                                       \
    {                                                                                  \
      int t = ember::thread_id();                                                      \
      int64_t chunk = (n + threads - 1) / threads;                                     \
      int64_t begin = t * chunk, end = begin + chunk < n ? begin + chunk : n;          \
      ACC acc = 0;                                                                     \
      for (int64_t block = begin; block < end; block += 1024) {                        \
        int64_t stop = block + 1024 < end ? block + 1024 : end;                        \
        ACC lanes[16] = {};                                                            \
        int64_t i = block;                                                             \
        for (; i + 16 <= stop; i += 16)                                                \
          for (int j = 0; j < 16; ++j) lanes[j] += x[i + j];                           \
        for (; i < stop; ++i) lanes[0] += x[i];                                        \
        ACC block_sum = 0;                                                             \
        for (int j = 0; j < 16; ++j) block_sum += lanes[j];                            \
        acc += block_sum;                                                              \
      }                                                                                \
      partials[t] = acc;                                                               \
    }                                                                                  \
    ACC total = 0;                                                                     \
    for (int t = 0; t < threads; ++t) total += partials[t];                            \
    *out = static_cast<T>(total);                                                      \
  }
SUM(sum_f32, float, float)
SUM(sum_f64, double, double)
SUM(sum_i64, int64_t, int64_t)

EMBER_KERNEL void fma_like(const float* a, const float* b, const float* c, float* out,
                           int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i] + c[i];
}

EMBER_KERNEL void floordiv_i64(const int64_t* a, const int64_t* b, int64_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = ember::floordiv(a[i], b[i]);
}

EMBER_KERNEL void axpy(double alpha, const double* x, double* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

EMBER_KERNEL void nothing(const float* a, const float* b, float* c, int64_t n) {}
"""

STORAGE = {torch.bfloat16: torch.int16, torch.float16: torch.int16}


@pytest.fixture(scope="module")
def library(builder) -> LoadedKernelLibrary:
    return builder.compile(KERNELS)


def ptr(dtype: torch.dtype, count: int = 3) -> KernelSignature:
    return KernelSignature([Pointer(dtype)] * count + [Int64])


def make(dtype: torch.dtype, n: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(n, generator=generator) > 0.5
    if dtype.is_floating_point:
        return torch.randn(n, generator=generator).to(dtype)
    return torch.randint(-1000, 1000, (n,), generator=generator, dtype=dtype)


ADD_CASES = {
    torch.float32: "add_f32",
    torch.float64: "add_f64",
    torch.int64: "add_i64",
    torch.int32: "add_i32",
    torch.bfloat16: "add_bf16",
    torch.float16: "add_f16",
    torch.bool: "add_bool",
}


@pytest.mark.parametrize("n", [1, 1000, 100_003])
@pytest.mark.parametrize("dtype", list(ADD_CASES), ids=str)
def test_add_matches_eager(library, dtype, n):
    a, b = make(dtype, n, 1), make(dtype, n, 2)
    out = torch.empty_like(a)
    kernel_dtype = STORAGE.get(dtype, dtype)
    add = library.kernel(ADD_CASES[dtype], ptr(kernel_dtype), check_args=True)
    add(*(t.view(kernel_dtype) for t in (a, b, out)), n)
    expected = a | b if dtype == torch.bool else a + b
    # bf16/f16: computed in float32 and rounded once, which is what eager does: bit-equal
    assert torch.equal(out, expected)


@pytest.mark.parametrize(
    "dtype,name", [(torch.float32, "sum_f32"), (torch.float64, "sum_f64"), (torch.int64, "sum_i64")]
)
@pytest.mark.parametrize("n", [0, 7, 1_000_001])
def test_sum_with_per_thread_partials_matches_eager(library, dtype, name, n):
    x = make(dtype, n, 3)
    out = torch.empty((), dtype=dtype)
    library.kernel(name, ptr(dtype, 2))(x, out, n)
    torch.testing.assert_close(out, x.sum())


def test_noncontiguous_views_pass_their_data_pointer(library):
    base = torch.randn(10, 20)
    a = base[2:5]  # contiguous rows of a larger tensor: offset data pointer
    out = torch.empty_like(a)
    library.kernel("add_f32", ptr(torch.float32))(a, a, out, a.numel())
    torch.testing.assert_close(out, a + a)


def test_scalar_arguments(library):
    x, y = torch.randn(100, dtype=torch.float64), torch.randn(100, dtype=torch.float64)
    expected = y + 0.25 * x
    axpy = library.kernel("axpy", KernelSignature([Float64, *[Pointer(torch.float64)] * 2, Int64]))
    axpy(0.25, x, y, 100)
    torch.testing.assert_close(y, expected)


def test_no_contraction_keeps_a_times_b_plus_c_bit_exact(library, builder):
    n = 100_000
    a, b, c = (make(torch.float32, n, s) for s in (4, 5, 6))
    out = torch.empty(n)
    library.kernel("fma_like", ptr(torch.float32, 4))(a, b, c, out, n)
    assert torch.equal(out, a * b + c)  # eager rounds the product, then the sum


def test_contraction_would_change_results(builder, tmp_path):
    """The flag matters: with fused multiply-add allowed, the same kernel drifts from eager."""
    from ember_codegen import CppBuilder, KernelCache

    cpuinfo = Path("/proc/cpuinfo")
    has_fma = cpuinfo.exists() and " fma" in cpuinfo.read_text()
    if not has_fma or not builder.toolchain.arch_flags:
        pytest.skip("no FMA instructions on this host")
    contracting = CppBuilder(
        KernelCache(tmp_path / "c"), builder.toolchain, extra_flags=["-ffp-contract=fast"]
    )
    n = 100_000
    a, b, c = (make(torch.float32, n, s) for s in (4, 5, 6))
    out = torch.empty(n)
    contracting.compile(KERNELS).kernel("fma_like", ptr(torch.float32, 4))(a, b, c, out, n)
    assert not torch.equal(out, a * b + c)


def test_integer_division_by_zero_raises_like_eager(library):
    sig = KernelSignature([Pointer(torch.int64)] * 3 + [Int64], raises=True)
    floordiv = library.kernel("floordiv_i64", sig)
    a, b, out = torch.tensor([7, -7, 1]), torch.tensor([2, 2, 0]), torch.empty(3, dtype=torch.int64)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.floor_divide(a, b)
    with pytest.raises(KernelRuntimeError, match="ZeroDivisionError"):
        floordiv(a, b, out, 3)
    floordiv(a[:2], b[:2], out, 2)  # the error code was reset
    assert out[:2].tolist() == [3, -4]


def test_checked_calls_reject_wrong_arguments(library):
    add = library.kernel("add_f32", ptr(torch.float32), check_args=True)
    x = torch.zeros(4)
    with pytest.raises(
        KernelArgumentError, match=r"argument 1: expected a CPU tensor of torch\.float32"
    ):
        add(x, x.double(), x, 4)
    with pytest.raises(KernelArgumentError, match="argument 3: expected int64"):
        add(x, x, x, 4.0)
    with pytest.raises(KernelArgumentError, match=r"argument 0: expected a torch\.float32 tensor"):
        add([0.0], x, x, 4)


def test_unchecked_calls_still_reject_non_tensors(library):
    add = library.kernel("add_f32", ptr(torch.float32), check_args=False)
    with pytest.raises(AttributeError):
        add([0.0], [0.0], [0.0], 1)


def test_missing_symbol_and_bad_signature(library, tmp_path):
    with pytest.raises(KernelLoadError, match="no exported function 'absent'"):
        library.kernel("absent", ptr(torch.float32))
    with pytest.raises(TypeError, match="not an argument kind"):
        KernelSignature([torch.float32])
    bogus = tmp_path / "bogus.so"
    bogus.write_bytes(b"not an ELF file")
    with pytest.raises(KernelLoadError, match="could not load"):
        LoadedKernelLibrary(bogus)


def test_per_call_overhead(library):
    nothing = library.kernel("nothing", ptr(torch.float32))
    a = torch.zeros(8)
    calls = 20_000
    start = time.perf_counter()
    for _ in range(calls):
        nothing(a, a, a, 8)
    per_call = (time.perf_counter() - start) / calls
    start = time.perf_counter()
    for _ in range(calls):
        torch.add(a, a, out=a)
    eager = (time.perf_counter() - start) / calls
    print(f"\nper-call overhead, 3 tensors + 1 int: {per_call * 1e6:.2f} us "
          f"(eager torch.add(out=) on 8 floats: {eager * 1e6:.2f} us)")  # fmt: skip
    assert per_call < 20e-6  # loose: a quiet machine measures about 0.7 us


def test_kernels_build_and_run_without_openmp(builder, tmp_path):
    """A compiler without OpenMP still builds the same sources (pragmas ignored, 1 thread)."""
    import dataclasses

    from ember_codegen import CppBuilder, KernelCache

    serial = dataclasses.replace(builder.toolchain, openmp_flags=())
    library = CppBuilder(KernelCache(tmp_path / "serial"), serial).compile(KERNELS)
    x = make(torch.float64, 100_000, 7)
    out = torch.empty((), dtype=torch.float64)
    library.kernel("sum_f64", ptr(torch.float64, 2))(x, out, x.numel())
    torch.testing.assert_close(out, x.sum())
