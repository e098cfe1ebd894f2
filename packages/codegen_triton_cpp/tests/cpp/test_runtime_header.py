"""ember_runtime.h against eager on edge cases: each helper is wrapped in an elementwise
kernel, run over tensors of tricky values, and compared with the torch op it stands for."""

from __future__ import annotations

import math

import pytest
import torch

from ember_codegen import Int64, KernelSignature, LoadedKernelLibrary, Pointer

C_TYPES = {
    torch.float32: "float",
    torch.float64: "double",
    torch.int64: "int64_t",
    torch.int32: "int32_t",
    torch.int16: "int16_t",
    torch.uint8: "uint8_t",
    torch.int8: "int8_t",
    torch.bool: "bool",
}

# name -> (C expression over a (and b), input dtype, output dtype, eager function)
UNARY: dict[str, tuple] = {}
BINARY: dict[str, tuple] = {}


def unary(name, expr, dtype, out_dtype, eager):
    UNARY[name] = (expr, dtype, out_dtype, eager)


def binary(name, expr, dtype, out_dtype, eager):
    BINARY[name] = (expr, dtype, out_dtype, eager)


for dt in (torch.int64, torch.int32, torch.int16, torch.uint8, torch.float32, torch.float64):
    tag = str(dt).removeprefix("torch.")
    binary(f"floordiv_{tag}", "ember::floordiv(a, b)", dt, dt, torch.floor_divide)
    binary(f"remainder_{tag}", "ember::remainder(a, b)", dt, dt, torch.remainder)
for dt in (torch.int64, torch.int32):
    tag = str(dt).removeprefix("torch.")
    binary(f"truncdiv_{tag}", "ember::truncdiv(a, b)", dt, dt,
           lambda a, b: torch.div(a, b, rounding_mode="trunc"))  # fmt: skip
    binary(f"truncmod_{tag}", "ember::truncmod(a, b)", dt, dt, torch.fmod)
for dt in (torch.int64, torch.int32, torch.int16, torch.uint8):
    tag = str(dt).removeprefix("torch.")
    binary(f"shl_{tag}", "ember::shift_left(a, b)", dt, dt, torch.bitwise_left_shift)
    binary(f"shr_{tag}", "ember::shift_right(a, b)", dt, dt, torch.bitwise_right_shift)
binary("ipow_int64", "ember::ipow(a, b)", torch.int64, torch.int64, torch.pow)
binary("ipow_int32", "ember::ipow(a, b)", torch.int32, torch.int32, torch.pow)
for dt in (torch.float32, torch.float64, torch.int64):
    tag = str(dt).removeprefix("torch.")
    binary(f"maximum_{tag}", "ember::maximum(a, b)", dt, dt, torch.maximum)
    binary(f"minimum_{tag}", "ember::minimum(a, b)", dt, dt, torch.minimum)
for dt in (torch.float32, torch.float64):
    tag = str(dt).removeprefix("torch.")
    unary(f"sign_{tag}", "ember::sign(a)", dt, dt, torch.sign)
    unary(f"round_{tag}", "ember::round_half_even(a)", dt, dt, torch.round)
    unary(f"sigmoid_{tag}", "ember::sigmoid(a)", dt, dt, torch.sigmoid)
    unary(f"erfinv_{tag}", "ember::erfinv(a)", dt, dt, torch.erfinv)
    for target in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool):
        ttag = str(target).removeprefix("torch.")
        unary(f"cast_{tag}_{ttag}", f"ember::cast<{C_TYPES[target]}>(a)", dt, target,
              lambda x, target=target: x.to(target))  # fmt: skip
unary("sign_int64", "ember::sign(a)", torch.int64, torch.int64, torch.sign)

EXACT = {"floordiv", "remainder", "truncdiv", "truncmod", "shl", "shr", "ipow", "maximum",
         "minimum", "sign", "round", "cast"}  # fmt: skip


def _wrapper(name: str, expr: str, dtype, out_dtype, arity: int) -> str:
    t, r = C_TYPES[dtype], C_TYPES[out_dtype]
    b_param = f"const {t}* y, " if arity == 2 else ""
    b_load = "T b = y[i];" if arity == 2 else ""
    return (
        f"EMBER_KERNEL void {name}(const {t}* x, {b_param}{r}* out, int64_t n) {{\n"
        f"  using T = {t};\n"
        f"  for (int64_t i = 0; i < n; ++i) {{ T a = x[i]; {b_load} out[i] = {expr}; }}\n}}\n"
    )


CONVERSIONS = r"""
EMBER_KERNEL void to_bf16(const float* x, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = ember::float_to_bf16(x[i]);
}
EMBER_KERNEL void from_bf16(const uint16_t* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = ember::bf16_to_float(x[i]);
}
EMBER_KERNEL void to_half(const float* x, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = ember::float_to_half(x[i]);
}
EMBER_KERNEL void from_half(const uint16_t* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = ember::half_to_float(x[i]);
}
// mean and variance by Welford: per-thread partials over chunks, combined in thread order
EMBER_KERNEL void var_mean(const double* x, double* out, int64_t n) {
  ember::Welford<double> partials[256];
  int threads = ember::max_threads() < 256 ? ember::max_threads() : 256;
#pragma omp parallel num_threads(threads)
  {
    int t = ember::thread_id();
    int64_t chunk = (n + threads - 1) / threads;
    int64_t end = (t + 1) * chunk < n ? (t + 1) * chunk : n;
    ember::Welford<double> acc;
    for (int64_t i = t * chunk; i < end; ++i) acc = ember::welford_update(acc, x[i]);
    partials[t] = acc;
  }
  ember::Welford<double> total;
  for (int t = 0; t < threads; ++t) total = ember::welford_combine(total, partials[t]);
  out[0] = total.mean;
  out[1] = total.m2 / (total.weight - 1);
}
EMBER_KERNEL void rand_bits(int64_t seed, int64_t offset, int64_t* out, int64_t n) {
  uint32_t key = ember::random_key(seed, 0);
  for (int64_t i = 0; i < n; ++i) out[i] = ember::random_bits(key, offset + i);
}
EMBER_KERNEL void rand_uniform_f32(int64_t seed, int64_t offset, float* out, int64_t n) {
  uint32_t key = ember::random_key(seed, 0);
  for (int64_t i = 0; i < n; ++i)
    out[i] = ember::random_uniform_float(ember::random_bits(key, offset + i), 24);
}
EMBER_KERNEL void rand_uniform_bf16(int64_t seed, int64_t offset, uint16_t* out, int64_t n) {
  uint32_t key = ember::random_key(seed, 0);
  for (int64_t i = 0; i < n; ++i)
    out[i] = ember::float_to_bf16(ember::random_uniform_float(ember::random_bits(key, offset + i), 8));
}
EMBER_KERNEL void rand_uniform_f16(int64_t seed, int64_t offset, uint16_t* out, int64_t n) {
  uint32_t key = ember::random_key(seed, 0);
  for (int64_t i = 0; i < n; ++i)
    out[i] = ember::float_to_half(ember::random_uniform_float(ember::random_bits(key, offset + i), 11));
}
EMBER_KERNEL void rand_uniform_f64(int64_t seed, int64_t offset, double* out, int64_t n) {
  uint32_t key = ember::random_key(seed, 0);
  for (int64_t i = 0; i < n; ++i)
    out[i] = ember::random_uniform_double(ember::random_bits(key, offset + i));
}
EMBER_KERNEL void rand_normal_f32(int64_t seed, int64_t offset, float* out, int64_t n) {
  uint32_t k1 = ember::random_key(seed, 1), k2 = ember::random_key(seed, 2);
  for (int64_t i = 0; i < n; ++i) out[i] = ember::random_normal_float(k1, k2, offset + i);
}
EMBER_KERNEL void rand_normal_f64(int64_t seed, int64_t offset, double* out, int64_t n) {
  uint32_t k1 = ember::random_key(seed, 1), k2 = ember::random_key(seed, 2);
  for (int64_t i = 0; i < n; ++i) out[i] = ember::random_normal_double(k1, k2, offset + i);
}
"""


@pytest.fixture(scope="module")
def runtime(builder) -> LoadedKernelLibrary:
    parts = ['#include "ember_runtime.h"\n', CONVERSIONS]
    parts += [_wrapper(n, e, d, o, 1) for n, (e, d, o, _) in UNARY.items()]
    parts += [_wrapper(n, e, d, o, 2) for n, (e, d, o, _) in BINARY.items()]
    return builder.compile("".join(parts))


def _call(runtime, name, out_dtype, *inputs):
    out = torch.empty(inputs[0].shape, dtype=out_dtype)
    kinds = [Pointer(t.dtype) for t in inputs] + [Pointer(out_dtype), Int64]
    runtime.kernel(name, KernelSignature(kinds), check_args=True)(*inputs, out, out.numel())
    return out


def _float_values(dtype) -> torch.Tensor:
    inf, nan = math.inf, math.nan
    special = [0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.5, 1e-30, -1e-30, 7.0, -7.0,
               1e10, -1e10, 3e9, -3e9, 40000.0, 70000.5, 300.0, -129.0, inf, -inf, nan]  # fmt: skip
    rand = torch.randn(200, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 50
    return torch.cat([torch.tensor(special, dtype=torch.float64), rand]).to(dtype)


def _int_values(dtype) -> torch.Tensor:
    info = torch.iinfo(dtype)
    special = [0, 1, -1, 2, -2, 7, -7, 13, -13, info.max, info.min, info.max - 1, info.min + 1]
    special = [v for v in special if info.min <= v <= info.max]
    g = torch.Generator().manual_seed(1)
    rand = torch.randint(max(info.min, -1000), min(info.max, 1000), (200,), generator=g)
    return torch.cat([torch.tensor(special), rand]).to(dtype)


def _pairs(name: str, dtype):
    """All pairs of tricky values (as two flat tensors), plus shift counts for shifts."""
    values = _float_values(dtype) if dtype.is_floating_point else _int_values(dtype)
    if name.startswith(("shl", "shr")):
        bits = torch.iinfo(dtype).bits
        counts = [0, 1, 3, bits - 1, bits, bits + 1, 70] + (
            [-1, -64] if dtype != torch.uint8 else []
        )
        rhs = torch.tensor(counts).to(dtype)
    elif name.startswith("ipow"):
        rhs = torch.tensor([-3, -2, -1, 0, 1, 2, 3, 7, 40, 63]).to(dtype)
        values = values[:40]
    else:
        rhs = values[:40]
    if (
        name.startswith(("floordiv", "remainder", "truncdiv", "truncmod"))
        and not dtype.is_floating_point
    ):
        rhs = rhs[rhs != 0]  # eager raises on zero divisors: tested separately
    a = values.repeat_interleave(len(rhs))
    b = rhs.repeat(len(values))
    if name.startswith(("truncdiv", "truncmod")):  # eager itself traps (SIGFPE) on MIN / -1
        keep = ~((a == torch.iinfo(dtype).min) & (b == -1))
        a, b = a[keep], b[keep]
    return a, b


def _same(got: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    """Elementwise bit-level agreement: equal values with equal signs of zero, or both NaN."""
    if not got.is_floating_point():
        return got == expected
    both_nan = got.isnan() & expected.isnan()
    return both_nan | ((got == expected) & (got.signbit() == expected.signbit()))


def _compare(name: str, got: torch.Tensor, eager, inputs) -> None:
    """Exact helpers must equal eager; where eager's vectorized loop and its scalar loop
    disagree (signed-zero ties in max/min, float32 remainder when a / b overflows), either
    answer is eager's, so a mismatch is rechecked one element at a time."""
    expected = eager(*inputs)
    if name.split("_")[0] not in EXACT:
        torch.testing.assert_close(got, expected, equal_nan=True)
        return
    same = _same(got, expected)
    rows = []
    for i in (~same).nonzero().flatten().tolist():
        scalar_path = eager(*(t[i : i + 1] for t in inputs))
        if not bool(_same(got[i : i + 1], scalar_path).all()):
            rows.append((tuple(t[i].item() for t in inputs), got[i].item(), expected[i].item()))
    assert not rows, f"{name}: (inputs, ours, eager) differ: {rows[:5]} ({len(rows)} in all)"


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_helper_matches_eager(runtime, name):
    _, dtype, out_dtype, eager = BINARY[name]
    a, b = _pairs(name, dtype)
    _compare(name, _call(runtime, name, out_dtype, a, b), eager, (a, b))


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_helper_matches_eager(runtime, name):
    _, dtype, out_dtype, eager = UNARY[name]
    x = _float_values(dtype) if dtype.is_floating_point else _int_values(dtype)
    if name.startswith("erfinv"):
        x = torch.cat(
            [
                torch.linspace(-1, 1, 2001, dtype=dtype),
                torch.tensor([1 - 1e-7, -1 + 1e-7, 2.0, math.nan], dtype=dtype),
            ]
        )
    _compare(name, _call(runtime, name, out_dtype, x), eager, (x,))


@pytest.mark.parametrize("name", ["floordiv_int64", "remainder_int32", "truncdiv_int64"])
def test_integer_division_by_zero_sets_the_error_code(runtime, name):
    _, dtype, out_dtype, eager = BINARY[name]
    a, b = torch.tensor([5, 6], dtype=dtype), torch.tensor([1, 0], dtype=dtype)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        eager(a, b)
    runtime.take_error()
    _call(runtime, name, out_dtype, a, b)
    assert runtime.take_error() == 1 and runtime.take_error() == 0


def _float32_bit_patterns() -> torch.Tensor:
    """Random bit patterns plus rounding ties, the largest values, subnormals, inf and NaN."""
    g = torch.Generator().manual_seed(2)
    rand = torch.randint(-(2**31), 2**31, (200_000,), generator=g, dtype=torch.int64)
    mantissas = torch.randint(0, 2**8, (2000,), generator=g) << 16
    bf16_ties = (torch.randint(0, 2**15, (2000,), generator=g) << 16) | 0x8000  # exactly halfway
    half_ties = [(e << 23) | (m << 13) | 0x1000 for e in (103, 110, 112, 113, 120, 142) for m in (0, 1, 2, 1022, 1023)]  # fmt: skip
    half_edges = [0x477FE000, 0x477FEFFF, 0x477FF000, 0x477FF001, 0x38800000, 0x387FFFFF, 0x33000000, 0x33000001, 0x32FFFFFF, 1, 0x7F800000, 0x7F800001, 0x7FC00000, 0x7F7FFFFF]  # fmt: skip
    parts = [
        rand,
        mantissas | (127 << 23),
        bf16_ties,
        torch.tensor(half_ties),
        torch.tensor(half_edges),
    ]
    bits = torch.cat(parts)
    bits = torch.cat([bits, bits | (1 << 31)])  # both signs
    return ((bits + 2**31) % 2**32 - 2**31).to(torch.int32)


@pytest.mark.parametrize("name,target", [("to_bf16", torch.bfloat16), ("to_half", torch.float16)])
def test_float_to_reduced_precision_rounds_like_eager(runtime, name, target):
    x = _float32_bit_patterns().view(torch.float32)
    got = _call(runtime, name, torch.int16, x)
    expected = x.to(target).view(torch.int16)
    nan = x.isnan()
    assert torch.equal(got[~nan], expected[~nan])
    assert bool(got[nan].view(target).isnan().all())


@pytest.mark.parametrize(
    "name,source", [("from_bf16", torch.bfloat16), ("from_half", torch.float16)]
)
def test_reduced_precision_to_float_is_exact_for_every_pattern(runtime, name, source):
    every = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16)
    got = _call(runtime, name, torch.float32, every)
    expected = every.view(source).float()
    nan = expected.isnan()
    assert torch.equal(got[~nan].view(torch.int32), expected[~nan].view(torch.int32))
    assert bool(got[nan].isnan().all())


def test_welford_partials_match_var_mean(runtime):
    x = (
        torch.randn(1_000_003, dtype=torch.float64) * 3 + 1e4
    )  # offset: naive sums would lose digits
    out = _call(runtime, "var_mean", torch.float64, x)[:2]
    var, mean = torch.var_mean(x)
    torch.testing.assert_close(out, torch.stack([mean, var]))


# ---------------------------------------------------------------- random numbers
primops = pytest.importorskip("ember_primops")

RANDOM_CASES = {
    "rand_uniform_f32": (torch.float32, torch.float32, "uniform"),
    "rand_uniform_f64": (torch.float64, torch.float64, "uniform"),
    "rand_uniform_bf16": (torch.bfloat16, torch.int16, "uniform"),
    "rand_uniform_f16": (torch.float16, torch.int16, "uniform"),
}


def _run_random(runtime, name, out_dtype, seed, offset, n):
    out = torch.empty(n, dtype=out_dtype)
    sig = KernelSignature([Int64, Int64, Pointer(out_dtype), Int64])
    runtime.kernel(name, sig, check_args=True)(seed, offset, out, n)
    return out


SEEDS = [(0, 0), (12345, 0), (-(2**62) + 17, 3), (2**62 - 1, 2**32 - 5)]  # the last crosses n_hi


@pytest.mark.parametrize("seed,offset", SEEDS)
def test_random_bits_are_bit_exact(runtime, seed, offset):
    expected = primops.prims.random_bits([1000], torch.tensor(seed), offset, device="cpu")
    assert torch.equal(_run_random(runtime, "rand_bits", torch.int64, seed, offset, 1000), expected)


@pytest.mark.parametrize("seed,offset", SEEDS)
@pytest.mark.parametrize("name", list(RANDOM_CASES))
def test_uniform_is_bit_exact(runtime, name, seed, offset):
    dtype, storage, _ = RANDOM_CASES[name]
    expected = primops.prims.uniform([1000], torch.tensor(seed), offset, dtype=dtype, device="cpu")
    got = _run_random(runtime, name, storage, seed, offset, 1000).view(dtype)
    assert torch.equal(got, expected)


@pytest.mark.parametrize("seed,offset", SEEDS)
@pytest.mark.parametrize(
    "name,dtype", [("rand_normal_f32", torch.float32), ("rand_normal_f64", torch.float64)]
)
def test_normal_matches_prims(runtime, name, dtype, seed, offset):
    n = 5000
    expected = primops.prims.normal([n], torch.tensor(seed), offset, dtype=dtype, device="cpu")
    got = _run_random(runtime, name, dtype, seed, offset, n)
    # uniform bits feed log/cos: glibc's and eager's (SLEEF) differ in the last ulp at times
    exact = (got == expected).float().mean().item()
    ulps = ((got - expected).abs() / torch.finfo(dtype).eps / expected.abs().clamp_min(1e-3)).max()
    print(f"\n{name} seed={seed}: {exact:.1%} bit-exact, worst {ulps.item():.1f} ulp")
    torch.testing.assert_close(got, expected)
