"""Print sympy expressions over size symbols as Python source.

The guard function evaluates these strings with each symbol replaced by the Python
expression that reads its value (for example `L['x'].size()[0]`), so the output is plain
integer Python: `//` for floor division, `%` for Mod, `max`/`min`, chained `and`/`or`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import sympy

Printer = Callable[[sympy.Basic, Mapping[sympy.Symbol, str]], str]

_RELATIONS = {"Equality": "==", "Unequality": "!=", "StrictLessThan": "<", "LessThan": "<=",
              "StrictGreaterThan": ">", "GreaterThan": ">="}  # fmt: skip


def to_python(expr: sympy.Basic, names: Mapping[sympy.Symbol, str] | None = None) -> str:
    """Python source for `expr`; a symbol missing from `names` prints as its own name."""
    return _print(sympy.sympify(expr), names or {})


def _print(expr: sympy.Basic, names: Mapping[sympy.Symbol, str]) -> str:
    if isinstance(expr, sympy.Symbol):
        return names.get(expr, expr.name)
    if expr is sympy.true or expr is sympy.false:
        return str(bool(expr))
    if expr.is_Integer:
        return str(int(expr))
    if expr.is_Rational:
        return f"({expr.p} / {expr.q})"
    if expr.is_Float:
        return repr(float(expr))
    kind = type(expr).__name__
    if kind in _RELATIONS:
        lhs, rhs = (_print(a, names) for a in expr.args)
        return f"{lhs} {_RELATIONS[kind]} {rhs}"
    handler = _HANDLERS.get(kind)
    if handler is None:
        raise NotImplementedError(f"no Python form for {kind}: {expr}")
    return handler(expr, names)


def _args(expr: sympy.Basic, names: Mapping) -> list[str]:
    return [_print(a, names) for a in expr.args]


def _add(expr: sympy.Add, names: Mapping) -> str:
    terms = list(expr.as_ordered_terms())
    out = _print(terms[0], names)
    for term in terms[1:]:
        coeff = term.as_coeff_Mul()[0]
        if coeff.is_negative:
            out += f" - {_print(-term, names)}"
        else:
            out += f" + {_print(term, names)}"
    return f"({out})"


def _mul(expr: sympy.Mul, names: Mapping) -> str:
    num, den = expr.as_numer_denom()
    if den != 1:  # a true division (int_truediv): keep it a float division
        return f"({_print(num, names)} / {_print(den, names)})"
    coeff, rest = expr.as_coeff_Mul()
    if coeff == -1:
        return f"(-{_print(rest, names)})"
    return "(" + " * ".join(_print(a, names) for a in expr.as_ordered_factors()) + ")"


def _floor(expr: sympy.floor, names: Mapping) -> str:
    num, den = expr.args[0].as_numer_denom()
    if den != 1:
        return f"({_print(num, names)} // {_print(den, names)})"
    return f"math.floor({_print(expr.args[0], names)})"


def _ceiling(expr: sympy.ceiling, names: Mapping) -> str:
    num, den = expr.args[0].as_numer_denom()
    if den != 1:
        return f"(-((-{_print(num, names)}) // {_print(den, names)}))"
    return f"math.ceil({_print(expr.args[0], names)})"


def _pow(expr: sympy.Pow, names: Mapping) -> str:
    base, exp = expr.args
    if exp.is_Integer and exp < 0:
        return f"(1 / {_print(base**-exp, names)})"
    return f"({_print(base, names)} ** {_print(exp, names)})"


def _piecewise(expr: sympy.Piecewise, names: Mapping) -> str:
    out = None
    for value, cond in reversed(expr.args):
        text = _print(value, names)
        out = (
            text
            if out is None or cond is sympy.true
            else f"({text} if {_print(cond, names)} else {out})"
        )
    return out


_HANDLERS: dict[str, Printer] = {
    "Add": _add,
    "Mul": _mul,
    "Pow": _pow,
    "floor": _floor,
    "ceiling": _ceiling,
    "Mod": lambda e, n: "({} % {})".format(*_args(e, n)),
    "Max": lambda e, n: "max({})".format(", ".join(_args(e, n))),
    "Min": lambda e, n: "min({})".format(", ".join(_args(e, n))),
    "Abs": lambda e, n: "abs({})".format(*_args(e, n)),
    "And": lambda e, n: "(" + " and ".join(f"({a})" for a in _args(e, n)) + ")",
    "Or": lambda e, n: "(" + " or ".join(f"({a})" for a in _args(e, n)) + ")",
    "Not": lambda e, n: "(not ({}))".format(*_args(e, n)),
    "Piecewise": _piecewise,
}
