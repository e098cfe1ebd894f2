"""Scalar arguments read on the host (``t.item()``, ember_inductor_ir's scalar_reads): the
text of a kernel constant over them, in C++ and Triton alike.

A float read is a float kernel argument (a ``double`` in C++, a Python float to Triton); an
expression over such arguments (``u2 - 1.0*u3``) is printed only where it is sums and
products of symbols and exact numbers, which both languages read alike; anything else
(powers, functions, non-integer ratios that C++ would divide as integers) is declared:
DynamicShapeUnsupported, which the backend turns into an eager run of a graph reading scalars.
"""

from __future__ import annotations

from typing import Any

import sympy

from ember_inductor_ir import DynamicShapeUnsupported


def _whole_power(expr: sympy.Basic) -> int | None:
    """n for `b**n` with n a positive whole number (`u**3.0` of a float read: k * k * k)."""
    if not isinstance(expr, sympy.Pow):
        return None
    exponent = expr.args[1]
    if exponent.is_Number and exponent > 0 and float(exponent).is_integer():
        return int(exponent)
    return None


def _printable(expr: sympy.Basic) -> bool:
    if isinstance(expr, sympy.Symbol | sympy.Integer | sympy.Float):
        return True
    if isinstance(expr, sympy.Add | sympy.Mul):
        return all(_printable(a) for a in expr.args)
    if _whole_power(expr) is not None:
        return _printable(expr.args[0])
    return False


def _as_products(expr: sympy.Basic) -> sympy.Basic:
    """Whole powers written as the products they are (both languages read `*`, not `**`)."""
    if (n := _whole_power(expr)) is not None:
        base = _as_products(expr.args[0])
        return sympy.Mul(*[base] * n, evaluate=False)
    if isinstance(expr, sympy.Add | sympy.Mul):
        return expr.func(*map(_as_products, expr.args), evaluate=False)
    return expr


def is_symbolic_constant(value: Any) -> bool:
    return isinstance(value, sympy.Basic) and bool(value.free_symbols)


def scalar_text(expr: sympy.Expr) -> str:
    """``expr`` over scalar arguments as text both C++ and Triton evaluate in double."""
    if not _printable(expr):
        raise DynamicShapeUnsupported(f"a kernel constant {expr} over host scalars")
    return f"({sympy.sstr(_as_products(expr), full_prec=True)})"


__all__ = ["is_symbolic_constant", "scalar_text"]
