"""Sympy index expressions -> Triton (Python) source.

Iteration variables are replaced by the kernel's flat ``xindex`` / ``rindex`` before
printing (see kernel.py), so what is printed is sums and products of those with
``FloorDiv`` (``//``) and ``ModularIndexing`` (``// d % m``); every operand is a
non-negative integer, where Triton's truncating division equals floor division. Symbols of
indirect indexing print as the temporaries that hold them.
"""

from __future__ import annotations

import sympy

from ember_codegen.exc import CodegenError
from ember_inductor_ir.indexing import FloorDiv, ModularIndexing

from .cache import interpreter_source

#: int32 index arithmetic is used when every offset of a kernel stays below this
INT32_LIMIT = 2**31 - 1


def triton_index(expr: sympy.Expr, wide: bool = False) -> str:
    """``wide``: compute in int64 whatever the variables' type (values, not offsets: an
    ``index_expr`` of int64 may exceed int32 although every offset fits)."""
    if wide:
        expr = expr.xreplace({s: sympy.Symbol(f"{s.name}.to(tl.int64)") for s in expr.free_symbols})
    return _print(expr)


def _print(expr: sympy.Expr) -> str:
    triton_index = _print
    if expr.is_Integer:
        return str(int(expr))
    if isinstance(expr, sympy.Symbol):
        return expr.name
    if expr.is_Add:
        terms = sorted(expr.args, key=lambda t: (t.is_Integer, sympy.default_sort_key(t)))
        text = triton_index(terms[0])
        for term in terms[1:]:
            coeff, rest = term.as_coeff_Mul()
            if coeff.is_Integer and int(coeff) < 0:
                text += f" - {triton_index(-term)}"
            else:
                text += f" + {triton_index(term)}"
        return f"({text})"
    if expr.is_Mul:
        num, den = expr.as_numer_denom()
        if den != 1:  # a size the env proved divisible (s0/4): exact integer division
            return f"({triton_index(num)} // {triton_index(den)})"
        return "(" + " * ".join(triton_index(a) for a in expr.args) + ")"
    if isinstance(expr, sympy.floor):  # floor(n / d) of sizes (ember-symbolic-shapes' form)
        num, den = expr.args[0].as_numer_denom()
        return f"({triton_index(num)} // {triton_index(den)})"
    if isinstance(expr, sympy.Mod):  # floored, as sympy's Mod (Triton's % truncates)
        a, b = (triton_index(x) for x in expr.args)
        return f"((({a} % {b}) + {b}) % {b})"
    if isinstance(expr, FloorDiv):
        base, div = expr.args
        return f"({triton_index(base)} // {triton_index(div)})"
    if isinstance(expr, ModularIndexing):
        base, div, mod = expr.args
        inner = triton_index(base) if div == 1 else f"({triton_index(base)} // {triton_index(div)})"
        return f"({inner} % {triton_index(mod)})"
    if expr.is_Pow and expr.args[1].is_Integer and int(expr.args[1]) > 0:
        return "(" + " * ".join([triton_index(expr.args[0])] * int(expr.args[1])) + ")"
    if isinstance(expr, (sympy.Max, sympy.Min)):
        fn = "tl.maximum" if isinstance(expr, sympy.Max) else "tl.minimum"
        a, *rest = expr.args
        text = triton_index(a)
        for b in rest:
            text = f"{fn}({text}, {triton_index(b)})"
        return text
    raise CodegenError(f"cannot print index expression {expr} ({type(expr).__name__}) for Triton")


def fits_int32(*bounds: int) -> bool:
    """Whether index arithmetic bounded by these element counts is safe in int32."""
    return all(b <= INT32_LIMIT for b in bounds)


def masked_offset(offset: str, mask: str) -> str:
    """The offset text of a masked load. A GPU never dereferences a masked-off lane, so the
    offset is left as it is: a ``tl.where`` on it would hide its contiguity from Triton, which
    then loads element by element instead of 16 bytes at a time (a concatenation's branches,
    a pooling window's padded reads). Triton's CPU interpreter reads every lane's address
    (an address out of bounds crashes it), so there masked-off lanes point at element 0."""
    if interpreter_source():
        return f"tl.where({mask}, {offset}, 0)"
    return offset
