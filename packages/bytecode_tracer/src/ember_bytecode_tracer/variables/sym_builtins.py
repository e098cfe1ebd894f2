"""Python's numeric builtins and `torch.sym_*` on symbolic sizes: kept symbolic.

Folded at trace time, `max(x.shape[0], 3)`, `int(n)`, `math.ceil(n / 2)` or `divmod(n, 3)`
would turn the size into a constant (a guard `Eq(s0, 7)`: one graph per size), where
torch.compile keeps them expressions. Each rule here computes the result on the example
values with torch's symbolic operation (`torch.sym_max`, `torch.sym_int`, `math.ceil` of a
SymFloat...), so the result is a SymInt that reaches the graph as size arithmetic
(`sym_values.fx_of`). A rule returns None when its arguments are not numbers it keeps exact
(floats in max/min, whose result type depends on the values; bools; keyword arguments): the
builtin's plain rule then runs, which specializes with a guard.

What still specializes, on purpose: `range(n)` (a loop unrolls per value) and anything that
needs a Python int (list repeats, indexing a Python list).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.lists import TupleVariable
from ember_bytecode_tracer.variables.sym_values import SymNodeVariable, has_symbolic, sym_operator

if TYPE_CHECKING:
    from ember_bytecode_tracer.variables.base import Translator, VariableTracker

SymRule = Callable[["Translator", list, dict], "VariableTracker | None"]
SYMBOLIC_RULES: dict[Any, SymRule] = {}


def symbolic_rule(*fns: Any) -> Callable[[SymRule], SymRule]:
    def register(rule: SymRule) -> SymRule:
        for fn in fns:
            SYMBOLIC_RULES[fn] = rule
        return rule

    return register


def call_symbolic(tx: Translator, fn: Any, args: list, kwargs: dict) -> Any:
    """The symbolic result of builtin `fn`, or None (then the builtin's plain rule runs)."""
    rule = SYMBOLIC_RULES.get(fn)
    if rule is None or not any(has_symbolic(a) for a in (*args, *kwargs.values())):
        return None
    return rule(tx, args, kwargs)


def _kind(var: VariableTracker) -> type | None:
    """int or float for a number this module keeps exact (bools excluded), else None."""
    if isinstance(var, SymNodeVariable):
        kind = var.python_type()
        return kind if kind in (int, float) else None
    if isinstance(var, ConstantVariable) and type(var.value) in (int, float):
        return type(var.value)
    return None


def _one(args: list, kwargs: dict, kind: type) -> SymNodeVariable | None:
    if kwargs or len(args) != 1 or not isinstance(args[0], SymNodeVariable):
        return None
    return args[0] if args[0].python_type() is kind else None


@symbolic_rule(int)
def _int(tx, args, kwargs):
    if (var := _one(args, kwargs, int)) is not None:
        return var  # int(n) of a SymInt is n itself: no guard
    if (var := _one(args, kwargs, float)) is not None:
        return sym_operator(tx, torch.sym_int, [var])  # truncation, as int() of a float
    return None


@symbolic_rule(bool, operator.truth)
def _bool(tx, args, kwargs):
    """bool(n) of a symbolic number is `n != 0` (a SymBool; bool of a SymBool is itself):
    kept symbolic, so one read from data (an item()) becomes a graph value rather than a
    decision the trace cannot make; a branch on it still decides it (sym_values._decide)."""
    if kwargs or len(args) != 1 or not isinstance(args[0], SymNodeVariable):
        return None
    (var,) = args
    if var.python_type() is bool:
        return var
    return sym_operator(tx, operator.ne, [var, ConstantVariable(0)])


@symbolic_rule(operator.index)
def _index(tx, args, kwargs):
    return _one(args, kwargs, int)  # a SymFloat raises TypeError in the plain rule, as eager


@symbolic_rule(float)
def _float(tx, args, kwargs):
    if (var := _one(args, kwargs, float)) is not None:
        return var
    if (var := _one(args, kwargs, int)) is not None:
        return sym_operator(tx, torch.sym_float, [var])
    return None


def _rounding(fn: Callable) -> SymRule:
    def run(tx, args, kwargs):
        if (var := _one(args, kwargs, int)) is not None:
            return var  # math.ceil(n) of an int is n
        if (var := _one(args, kwargs, float)) is not None:
            return sym_operator(tx, fn, [var])  # a SymInt: ceiling(s0/2), floor(s0/3)
        return None

    return run


for _fn in (math.ceil, math.floor, math.trunc):
    SYMBOLIC_RULES[_fn] = _rounding(_fn)


def _extreme(sym_fn: Callable) -> SymRule:
    """max/min over ints as torch.sym_max/sym_min (equal ints are interchangeable, so which
    one Python returns does not matter); floats and key=/default= are left to the plain rule
    (a NaN or the first of equal values makes the choice observable)."""

    def run(tx, args, kwargs):
        if kwargs:
            return None
        values = args
        if len(args) == 1:
            items = getattr(args[0], "items", None)
            if not isinstance(items, list):  # a list, tuple or torch.Size of numbers
                return None
            values = items
        if len(values) < 2 or any(_kind(v) is not int for v in values):
            return None
        best = values[0]
        for v in values[1:]:
            best = sym_operator(tx, sym_fn, [best, v])
        return best

    return run


SYMBOLIC_RULES[max] = _extreme(torch.sym_max)
SYMBOLIC_RULES[min] = _extreme(torch.sym_min)


@symbolic_rule(divmod)
def _divmod(tx, args, kwargs):

    if kwargs or len(args) != 2 or any(_kind(a) is not int for a in args):
        return None
    quotient = sym_operator(tx, operator.floordiv, list(args))
    remainder = sym_operator(tx, operator.mod, list(args))
    return TupleVariable([quotient, remainder])


@symbolic_rule(abs)
def _abs(tx, args, kwargs):
    # |n| as max(n, -n): an expression the graph can compute (no guard on n's sign)
    if (var := _one(args, kwargs, int)) is None:
        return None
    negated = sym_operator(tx, operator.neg, [var])
    return sym_operator(tx, torch.sym_max, [var, negated])


def _torch_sym(fn: Callable) -> SymRule:
    def run(tx, args, kwargs):
        return None if kwargs else sym_operator(tx, fn, list(args))

    return run


# torch's own symbolic helpers: on SymInts they are the operation itself
TORCH_SYM_FUNCTIONS = (torch.sym_max, torch.sym_min, torch.sym_int, torch.sym_float,
                       torch.sym_not)  # fmt: skip
for _fn in TORCH_SYM_FUNCTIONS:
    SYMBOLIC_RULES[_fn] = _torch_sym(_fn)
