"""Sympy index expressions -> C++ int64 arithmetic.

Loop variables are ``int64_t``, so every product and sum of them is int64 arithmetic.
``FloorDiv`` and ``ModularIndexing`` only ever see non-negative operands (the loop IR's
contract), where C++'s truncating ``/`` and ``%`` equal floor division and modulo.
"""

from __future__ import annotations

import sympy

from ember_codegen.exc import CodegenError
from ember_codegen.size_printing import IntegerExprPrinter  # shared with the Python printer


class IndexPrinter(IntegerExprPrinter):
    def _quotient(self, num: sympy.Expr, den: sympy.Expr) -> str:
        if num.could_extract_minus_sign() or num.is_negative:
            # -floor(-s0/2) (a ceiling): C++'s / truncates toward zero, floordiv rounds down
            return f"ember::floordiv<int64_t>({self._print(num)}, {self._print(den)})"
        return f"(({self._print(num)}) / {self._paren(den)})"

    def _refuse(self, what: str) -> Exception:
        return CodegenError(f"index expression {what}; indices must be integer arithmetic")

    def _print_Integer(self, expr: sympy.Integer) -> str:
        value = int(expr)
        if abs(value) >= 2**31:
            return f"{value}LL"
        return str(value)

    def _print_ModularIndexing(self, expr: sympy.Expr) -> str:
        base, divisor, modulus = expr.args
        inner = (
            self._print(base) if divisor == 1 else f"({self._print(base)}) / {self._paren(divisor)}"
        )
        return f"(({inner}) % {self._paren(modulus)})"

    def _print_Mod(self, expr: sympy.Expr) -> str:
        a, b = expr.args
        return f"ember::remainder<int64_t>({self._print(a)}, {self._print(b)})"

    def _print_Max(self, expr: sympy.Expr) -> str:
        return self._fold("ember_extra::imax", expr.args)

    def _print_Min(self, expr: sympy.Expr) -> str:
        return self._fold("ember_extra::imin", expr.args)

    def _fold(self, fn: str, args: tuple) -> str:
        text = self._print(args[0])
        for arg in args[1:]:
            text = f"{fn}({text}, {self._print(arg)})"
        return text


_printer = IndexPrinter()


def cpp_index(expr: sympy.Expr) -> str:
    """C++ text of an integer index expression."""
    return _printer.doprint(sympy.sympify(expr))
