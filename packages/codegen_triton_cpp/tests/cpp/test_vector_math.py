"""ember_vmath.h: our float32 log/log1p/expm1/tanh/erf (and ember_runtime.h's exp) against a
float64 reference and
against eager, over random bit patterns (every exponent), dense ranges, subnormals, +-inf,
NaN and signed zeros; the functions the kernels call (ours or libmvec's); and proof that a
loop calling them vectorizes."""

from __future__ import annotations

import math
import subprocess

import pytest
import torch

from ember_codegen import Int64, KernelSignature, LoadedKernelLibrary, Pointer

FUNCTIONS = {
    "exp": torch.exp,
    "log": torch.log,
    "log1p": torch.log1p,
    "expm1": torch.expm1,
    "tanh": torch.tanh,
    "erf": torch.erf,
}
#: worst error allowed for our versions, in float32 ulps of the correctly rounded result
MAX_ULP = 2.0


def _ours(fn: str) -> str:
    """exp lives in ember_runtime.h (every kernel may call it), the others in ember::vmath."""
    return "ember::exp" if fn == "exp" else f"ember::vmath::{fn}"


def _kernel(name: str, call: str) -> str:
    return (
        f"EMBER_KERNEL void {name}(const float* x, float* out, int64_t n) {{\n"
        f"  for (int64_t i = 0; i < n; ++i) out[i] = {call}(x[i]);\n}}\n"
    )


@pytest.fixture(scope="module")
def vmath(builder) -> LoadedKernelLibrary:
    parts = ['#include "ember_vmath.h"\n']
    for fn in FUNCTIONS:
        parts.append(_kernel(f"ours_{fn}", _ours(fn)))
        parts.append(_kernel(f"called_{fn}", f"ember::{fn}"))
    return builder.compile("".join(parts))


def _run(lib: LoadedKernelLibrary, name: str, x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    sig = KernelSignature([Pointer(torch.float32), Pointer(torch.float32), Int64])
    lib.kernel(name, sig, check_args=True)(x, out, x.numel())
    return out


def _inputs(fn: str) -> torch.Tensor:
    g = torch.Generator().manual_seed(5)
    bits = torch.randint(-(2**31), 2**31, (1_000_000,), generator=g, dtype=torch.int64)
    random_patterns = bits.to(torch.int32).view(torch.float32)  # every exponent and sign
    dense = torch.linspace(-12.0, 12.0, 400_001)
    tiny = torch.tensor([1e-45, 1e-40, 1e-38, 1.2e-38, 1e-30, 1e-10, 3e-8, 1e-7, 1e-4])
    # exp's subnormal results and its overflow/underflow edges
    exp_edges = torch.linspace(-104.5, -86.0, 100_001)
    special = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 0.625, 0.875, 3.92, 3.93, 10.0, 88.7, 88.73,
               89.0, -30.0, -31.0, -1.0000001, -0.9999999, 2.0**24, 3.4e38, -3.4e38,
               math.inf, -math.inf, math.nan]  # fmt: skip
    parts = [random_patterns, dense, tiny, -tiny, torch.tensor(special)]
    if fn == "exp":
        parts += [exp_edges, torch.tensor([88.72283935546875, 88.7228, 88.72284, -103.972084])]
    if fn in ("log", "log1p"):  # the interesting inputs are positive (and near -1 for log1p)
        parts += [dense.abs() * 1e3, torch.linspace(-1.0, 1.0, 200_001)]
    return torch.cat(parts).float()


def _ulp_error(got: torch.Tensor, x: torch.Tensor, fn: str) -> tuple[float, float]:
    """Worst error in ulps of the float32 result (float64 reference) and its input; inputs
    whose result is inf/NaN/zero must match exactly (same sign of zero too)."""
    exact = FUNCTIONS[fn](x.double())
    rounded = exact.float()
    finite = rounded.isfinite() & (rounded != 0)
    special_ok = torch.where(
        rounded.isnan(),
        got.isnan(),
        (got == rounded) & (got.signbit() == rounded.signbit()),
    )
    bad = ~finite & ~special_ok
    assert not bad.any(), (
        f"{fn}: special results differ at x={x[bad][:5].tolist()}: "
        f"got {got[bad][:5].tolist()}, want {rounded[bad][:5].tolist()}"
    )
    magnitude = rounded[finite].abs()
    ulp = torch.nextafter(magnitude, torch.tensor(math.inf)) - magnitude
    ulp = ulp.double().clamp_min(2.0**-149)
    errors = (got[finite].double() - exact[finite]).abs() / ulp
    worst = int(errors.argmax())
    return errors[worst].item(), x[finite][worst].item()


@pytest.mark.parametrize("fn", list(FUNCTIONS))
def test_ours_is_within_two_ulp_of_float64(vmath, fn):
    x = _inputs(fn)
    worst, where = _ulp_error(_run(vmath, f"ours_{fn}", x), x, fn)
    print(f"\n{fn}: worst {worst:.3f} ulp at x={where!r}")
    assert worst <= MAX_ULP, f"{fn}: {worst:.2f} ulp at x={where!r}"


@pytest.mark.parametrize("kind", ["ours", "called"])
@pytest.mark.parametrize("fn", list(FUNCTIONS))
def test_matches_eager_within_its_tolerance(vmath, fn, kind):
    x = _inputs(fn)
    torch.testing.assert_close(_run(vmath, f"{kind}_{fn}", x), FUNCTIONS[fn](x), equal_nan=True)


def _vectorizer_report(builder, source: str, tmp_path) -> str:
    path = tmp_path / "loops.cpp"
    path.write_text(source)
    command = builder.toolchain.command(path, tmp_path / "loops.so", ["-fopt-info-vec-optimized"])
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return done.stdout + done.stderr


@pytest.mark.parametrize("fn", list(FUNCTIONS))
def test_a_loop_over_ours_vectorizes(builder, fn, tmp_path):
    if "g++" not in builder.toolchain.version and "GCC" not in builder.toolchain.version:
        pytest.skip("the vectorizer report is GCC's -fopt-info")
    if not builder.toolchain.arch_flags:
        pytest.skip("no -march=native: the vector width is the baseline's")
    # a gelu-like fused body: the function inside other arithmetic and a select
    source = (
        '#include "ember_vmath.h"\n'
        "EMBER_KERNEL void loop(const float* EMBER_RESTRICT x, float* EMBER_RESTRICT out,\n"
        "                       int64_t n) {\n"
        "  for (int64_t i = 0; i < n; ++i) {\n"
        "    const float a = x[i];\n"
        f"    const float v = {_ours(fn)}(a > 0.0f ? a * 0.5f : -a);\n"
        "    out[i] = a * (v + 1.0f);\n"
        "  }\n"
        "}\n"
    )
    report = _vectorizer_report(builder, source, tmp_path)
    assert "loop vectorized" in report, report[-2000:]
