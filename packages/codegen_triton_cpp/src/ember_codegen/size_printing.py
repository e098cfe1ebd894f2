"""Integer size/index arithmetic as source text: the part every code generator shares.

`IntegerExprPrinter` knows what all of them print alike (symbols by name, floor quotients in
their three sympy forms, ceiling quotients of sizes, positive integer powers as products, a refusal for anything
else); a target's printer says how it writes a quotient, Mod, Max/Min and what a refusal
raises. `python_size` prints a size as Python over locals named after its symbols: what the
wrappers of both targets (C++ and Triton) use where one wrapper serves every binding of the
size symbols. Target-neutral: imports neither emitter.
"""

from __future__ import annotations

from typing import Any

import sympy
from sympy.printing.str import StrPrinter


class NeedsConcreteSizes(Exception):
    """A wrapper decision that holds for some bindings of the size symbols and not others:
    the graph's wrapper is written per binding instead (the declared fallback)."""


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

    def _print_ceiling(self, expr: sympy.Expr) -> str:
        # ceiling(n / d) of sizes, n >= 0 and d > 0: the quotient of n + d - 1
        num, den = expr.args[0].as_numer_denom()
        if not (den.is_positive and num.is_nonnegative):
            raise self._refuse(f"{expr} may round a negative quotient")
        return self._quotient(num + den - 1, den)

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


class PythonSizePrinter(IntegerExprPrinter):
    """Sympy size expressions -> Python integer arithmetic over the symbols' locals: // and %
    are the floor division and modulo the IR means, for negative operands too (ceil(s0/2)
    is -floor(-s0/2)). Every operator result is parenthesized whole, so that a product or a
    negation around it applies to the result."""

    def _print_ModularIndexing(self, expr: sympy.Expr) -> str:
        base, divisor, modulus = expr.args
        return f"((({self._print(base)}) // {self._paren(divisor)}) % {self._paren(modulus)})"

    def _print_Mod(self, expr: sympy.Expr) -> str:
        a, b = expr.args
        return f"(({self._print(a)}) % {self._paren(b)})"

    def _print_Max(self, expr: sympy.Expr) -> str:
        return f"max({', '.join(self._print(a) for a in expr.args)})"

    def _print_Min(self, expr: sympy.Expr) -> str:
        return f"min({', '.join(self._print(a) for a in expr.args)})"

    def _print_Relational(self, expr: sympy.Basic) -> str:
        # a bool of sizes or read ints (`n != 0`, a graph's SymBool output): Python's operator
        return f"({self._print(expr.lhs)} {expr.rel_op} {self._print(expr.rhs)})"

    def _print_And(self, expr: sympy.Basic) -> str:
        return "(" + " and ".join(self._print(a) for a in expr.args) + ")"

    def _print_Or(self, expr: sympy.Basic) -> str:
        return "(" + " or ".join(self._print(a) for a in expr.args) + ")"

    def _print_Not(self, expr: sympy.Basic) -> str:
        return f"(not {self._print(expr.args[0])})"

    def _print_BooleanTrue(self, expr: sympy.Basic) -> str:
        return "True"

    def _print_BooleanFalse(self, expr: sympy.Basic) -> str:
        return "False"

    def _quotient(self, num: sympy.Expr, den: sympy.Expr) -> str:
        # parenthesized whole: inside a product, `2*(s0) // 2` would be (2*s0)//2
        return f"(({self._print(num)}) // {self._paren(den)})"

    def _refuse(self, what: str) -> Exception:
        return NeedsConcreteSizes(f"size {what}")


_PRINTER = PythonSizePrinter()


def python_size(expr: Any) -> str:
    """Python source of a size expression over locals named after its symbols."""
    return _PRINTER.doprint(sympy.sympify(expr))
