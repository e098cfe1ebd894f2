"""Symbolic sizes in Triton kernels: what a kernel decides so that one binary serves every
size in its symbols' ranges.

* Size symbols the kernel's code names are int arguments after the pointers (not
  specialized by Triton: ``do_not_specialize``), passed by the wrapper from its binding.
* The kind of a reduction is valid for every size: persistent (the whole row in one
  RBLOCK) only when the range's upper bound of the row fits PERSISTENT_MAX, else looped;
  never split (its chunking is computed from the row length). Block sizes follow the
  example sizes (the hints): masks handle any size.
* int32 index arithmetic only where the ranges prove every offset fits, else int64.
* A contiguous access over symbolic sizes prints as the flat index (``xindex``), not as
  digits ``(xindex // s1) * s1 + xindex % s1`` that the simplifier cannot merge.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import sympy

from ember_inductor_ir import Schedule
from ember_inductor_ir.indexing import contiguous_strides

from .heuristics import (
    LOOPED_RBLOCK,
    PERSISTENT_MAX,
    TILE_MAX,
    LaunchConfig,
    default_config,
    next_power_of_2,
)
from .index_printer import INT32_LIMIT


def upper_bound(env: Any, expr: Any) -> int | None:
    """The largest value ``expr`` takes over its symbols' ranges (None: unbounded)."""
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return int(expr)
    if env is None:
        return None
    hi = env.bound(expr).hi
    return int(hi) if hi.is_Integer else None


def fits_int32_for_every_size(env: Any, *bounds: Any) -> bool:
    """Whether index arithmetic bounded by these element counts fits int32 at every size."""
    for value in bounds:
        hi = upper_bound(env, value)
        if hi is None or hi > INT32_LIMIT:
            return False
    return True


def size_params(env: Any, lines: Sequence[str], reads: Any = ()) -> list[str]:
    """The size symbols a kernel's code names: its int arguments, in symbol order; and the
    scalars read on the host (``reads``: t.item(), ints or floats) it names."""
    if env is None:
        return []
    text = "\n".join(lines)
    names = sorted({str(s) for s in (*env.var_to_val, *reads)}, key=lambda n: (len(n), n))
    return [n for n in names if re.search(rf"\b{n}\b", text)]


def symbolic_choice(
    xnumel: Any, rnumel: Any, reduction: bool, sched: Schedule
) -> tuple[str, LaunchConfig]:
    """Kernel kind and launch configuration of a kernel with symbolic sizes."""
    xhint = max(1, sched.size_hint(xnumel))
    if not reduction:
        return "pointwise", default_config("pointwise", xhint, 1)
    upper = upper_bound(sched.shape_env, rnumel)
    if upper is not None and upper <= PERSISTENT_MAX:
        return "persistent", default_config("persistent", xhint, max(upper, 1))
    rhint = max(1, sched.size_hint(rnumel))
    rblock = min(LOOPED_RBLOCK, next_power_of_2(rhint))
    xblock = max(1, min(next_power_of_2(xhint), TILE_MAX // rblock, 8))
    warps = max(1, min(8, next_power_of_2(xblock * rblock) // 256))
    return "looped", LaunchConfig(xblock, rblock, num_warps=warps)


def collapse_contiguous(
    expr: sympy.Expr, flat: sympy.Symbol, variables: Sequence[sympy.Symbol], sizes: Sequence[Any]
) -> sympy.Expr:
    """``expr`` with ``A * (contiguous linearization of variables)`` replaced by ``A * flat``
    when expr is linear in the variables with exactly those coefficients (else unchanged)."""
    live = [(v, n) for v, n in zip(variables, sizes, strict=True) if n != 1]
    if not live or not any(v in expr.free_symbols for v, _ in live):
        return expr
    strides = contiguous_strides([sympy.sympify(n) for _, n in live])
    coeffs = [expr.coeff(v) for v, _ in live]
    rest = sympy.expand(expr - sum(c * v for c, (v, _) in zip(coeffs, live, strict=True)))
    names = {v for v, _ in live}
    if rest.free_symbols & names or any(c.free_symbols & names for c in coeffs):
        return expr  # not linear in the variables (a view's division, an indirect index)
    scale = sympy.simplify(coeffs[-1] / strides[-1])
    if scale == 0 or any(
        sympy.expand(c - scale * s) != 0 for c, s in zip(coeffs, strides, strict=True)
    ):
        return expr
    return sympy.expand(scale * flat + rest)
