"""Sympy index expressions -> C++ int64 arithmetic.

Loop variables are ``int64_t``, so every product and sum of them is int64 arithmetic.
``FloorDiv`` and ``ModularIndexing`` only ever see non-negative operands (the loop IR's
contract), where C++'s truncating ``/`` and ``%`` equal floor division and modulo.
"""

from __future__ import annotations

import sympy
from sympy.printing.str import StrPrinter

from ember_codegen.exc import CodegenError


class IntegerExprPrinter(StrPrinter):
    """What every printer of integer size/index arithmetic shares: symbols by name, floor
    divisions (FloorDiv, sympy's floor(n/d), a Mul the env proved divisible) as the target's
    integer quotient, positive integer powers as products, and a refusal for anything else.
    Subclasses say how a quotient is written and what a refusal raises."""

    def _quotient(self, num: sympy.Expr, den: sympy.Expr) -> str:
        raise NotImplementedError

    def _refuse(self, what: str) -> Exception:
        raise NotImplementedError

    def _print_Symbol(self, expr: sympy.Symbol) -> str:
        return expr.name

    def _print_FloorDiv(self, expr: sympy.Expr) -> str:
        base, divisor = expr.args
        return self._quotient(base, divisor)

    def _print_floor(self, expr: sympy.Expr) -> str:
        # floor(n / d) of sizes (ember-symbolic-shapes' form of a size's floor division)
        num, den = expr.args[0].as_numer_denom()
        return self._quotient(num, den)

    def _print_Mul(self, expr: sympy.Expr) -> str:
        num, den = expr.as_numer_denom()
        if den != 1:  # a size the env proved divisible (s0/4): exact integer division
            return self._quotient(num, den)
        return super()._print_Mul(expr)

    def _print_Pow(self, expr: sympy.Expr, rational: bool = False) -> str:
        base, exponent = expr.args
        if exponent.is_Integer and int(exponent) > 0:
            return "(" + " * ".join([self._paren(base)] * int(exponent)) + ")"
        raise self._refuse(f"{expr} has a non-integer power")

    def _print_Rational(self, expr: sympy.Expr) -> str:
        raise self._refuse(f"{expr} is a fraction")

    def _print_Function(self, expr: sympy.Expr) -> str:
        raise self._refuse(f"{expr} uses {type(expr).__name__}, which this printer does not know")

    def _paren(self, expr: sympy.Expr) -> str:
        text = self._print(expr)
        return text if expr.is_Atom else f"({text})"


class IndexPrinter(IntegerExprPrinter):
    def _quotient(self, num: sympy.Expr, den: sympy.Expr) -> str:
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
