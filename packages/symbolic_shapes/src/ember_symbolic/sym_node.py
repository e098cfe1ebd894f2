"""Our SymNode: the object behind torch.SymInt / SymFloat / SymBool.

torch's C++ (`PythonSymNodeImpl`) and the Python magic methods on SymInt call a fixed set of
methods on whatever object a SymInt wraps: arithmetic and comparisons returning new nodes,
`guard_*` methods returning Python values, `wrap_*` to lift constants, type queries. This
class implements that protocol over a sympy expression and the ShapeEnv that owns its
symbols. Operations are table-driven: `_BINARY` and `_UNARY` map a protocol name to the
sympy construction and the result's Python type.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import sympy
import torch

import ember_symbolic.layout as layout

if TYPE_CHECKING:
    from ember_symbolic.shape_env import ShapeEnv

PyType = type  # int, float or bool


class SymNode:
    """A sympy expression with its Python type, owned by a ShapeEnv."""

    __slots__ = ("_expr", "pytype", "shape_env")

    def __init__(self, expr: sympy.Basic, shape_env: ShapeEnv, pytype: PyType) -> None:
        self._expr = expr
        self.shape_env = shape_env
        self.pytype = pytype

    # ---- identity and values -----------------------------------------------------
    @property
    def expr(self) -> sympy.Basic:
        """The expression with the env's replacements applied (equal symbols, constants)."""
        return self.shape_env.simplify(self._expr)

    @property
    def hint(self) -> int | float | bool | None:
        return self.shape_env.size_hint(self._expr) if self.has_hint() else None

    @property
    def _hint(self) -> int | float | bool | None:
        """torch's helpers (statically_known_true, optimization_hint) read this name."""
        return self.hint

    def has_hint(self) -> bool:
        return self.shape_env.has_hint(self._expr)

    def is_int(self) -> bool:
        return self.pytype is int

    def is_float(self) -> bool:
        return self.pytype is float

    def is_bool(self) -> bool:
        return self.pytype is bool

    def is_nested_int(self) -> bool:
        return False

    def nested_int(self) -> None:
        return None

    def is_symbolic(self) -> bool:
        return not self.is_constant()

    def is_constant(self) -> bool:
        expr = self.expr
        return expr.is_Number or expr is sympy.true or expr is sympy.false

    def maybe_as_int(self) -> int | None:
        return int(self.expr) if self.pytype is int and self.expr.is_Integer else None

    def maybe_as_float(self) -> float | None:
        return float(self.expr) if self.pytype is float and self.expr.is_Number else None

    def maybe_as_bool(self) -> bool | None:
        expr = self.expr
        return bool(expr) if expr is sympy.true or expr is sympy.false else None

    def wrap_int(self, num: int) -> SymNode:
        return SymNode(sympy.Integer(num), self.shape_env, int)

    def wrap_float(self, num: float) -> SymNode:
        return SymNode(sympy.Float(num), self.shape_env, float)

    def wrap_bool(self, num: bool) -> SymNode:
        return SymNode(sympy.true if num else sympy.false, self.shape_env, bool)

    def clone(self) -> SymNode:
        return self

    def with_shape_env(self, shape_env: ShapeEnv) -> SymNode:
        return SymNode(self._expr, shape_env, self.pytype)

    def str(self) -> str:
        return str(self.expr)

    def _graph_repr(self) -> str:
        return str(self.expr)

    def __str__(self) -> str:
        return str(self.expr)

    def __repr__(self) -> str:
        return f"SymNode({self.expr}, {self.pytype.__name__})"

    # ---- decisions (each may record a guard in the env) ----------------------------
    def _decide(self) -> int | float | bool:
        return self.pytype(self.shape_env.evaluate(self.expr))

    def guard_int(self, file: str = "", line: int = 0) -> int:
        return int(self._decide())

    def guard_float(self, file: str = "", line: int = 0) -> float:
        return float(self._decide())

    def guard_bool(self, file: str = "", line: int = 0) -> bool:
        return bool(self._decide())

    def bool_(self) -> bool:
        return self.guard_bool()

    def int_(self) -> int:
        return self.guard_int()

    def guard_size_oblivious(self, file: str = "", line: int = 0) -> bool:
        return self.guard_bool(file, line)

    def statically_known_true(self, file: str = "", line: int = 0) -> bool:
        return self.shape_env.statically_known_true(self.expr)

    def _guard_or(self, fallback: bool) -> bool:
        known = self.shape_env.static_value(self.expr)
        if known is not None:
            return bool(known)
        if not self.has_hint():  # unbacked: no guard possible, take the safe answer
            return fallback
        return self.guard_bool()

    def guard_or_false(self, file: str = "", line: int = 0) -> bool:
        return self._guard_or(False)

    def guard_or_true(self, file: str = "", line: int = 0) -> bool:
        return self._guard_or(True)

    def expect_true(self, file: str = "", line: int = 0) -> bool:
        if self.has_hint():
            return self.guard_bool()
        return self.shape_env.defer_runtime_assert(self.expr)

    def evaluate(self) -> int | float | bool:
        return self._decide()

    # ---- operations ----------------------------------------------------------------
    def _make(self, expr: sympy.Basic, pytype: PyType) -> SymNode:
        return SymNode(expr, self.shape_env, pytype)

    def sym_sum(self, args: Sequence[SymNode]) -> SymNode:
        pytype = float if any(a.pytype is float for a in args) else int
        return self._make(sympy.Add(*(a.expr for a in args)), pytype)

    def sym_ite(self, then_node: SymNode, else_node: SymNode) -> SymNode:
        expr = sympy.Piecewise((then_node.expr, self.expr), (else_node.expr, True))
        return self._make(expr, then_node.pytype)

    def sym_float(self) -> SymNode:
        return self._make(self.expr, float)

    def sym_int(self) -> SymNode:
        expr = self.expr
        if self.pytype is not float:
            return self._make(expr, int)
        return self._make(_truncate(expr), int)

    # sizes/strides predicates: torch computes a symbolic tensor's flags through these
    def is_contiguous(self, sizes: Sequence[SymNode], strides: Sequence[SymNode]) -> SymNode:
        return self._bool(layout.is_contiguous(_exprs(sizes), _exprs(strides)))

    def is_channels_last_contiguous_2d(self, sizes: Sequence, strides: Sequence) -> SymNode:
        return self._bool(layout.is_channels_last_contiguous(_exprs(sizes), _exprs(strides), 4))

    def is_channels_last_contiguous_3d(self, sizes: Sequence, strides: Sequence) -> SymNode:
        return self._bool(layout.is_channels_last_contiguous(_exprs(sizes), _exprs(strides), 5))

    def is_channels_last_strides_2d(self, sizes: Sequence, strides: Sequence) -> SymNode:
        return self._bool(layout.is_channels_last_strides(_hints(sizes), _hints(strides), 4))

    def is_channels_last_strides_3d(self, sizes: Sequence, strides: Sequence) -> SymNode:
        return self._bool(layout.is_channels_last_strides(_hints(sizes), _hints(strides), 5))

    def is_non_overlapping_and_dense(self, sizes: Sequence, strides: Sequence) -> SymNode:
        cond = layout.is_non_overlapping_and_dense(
            _exprs(sizes), _exprs(strides), _hints(sizes), _hints(strides)
        )
        return self._bool(cond)

    def is_non_overlapping_and_dense_indicator(self, sizes: Sequence, strides: Sequence) -> SymNode:
        cond = self.is_non_overlapping_and_dense(sizes, strides).expr
        return self._make(sympy.Piecewise((1, cond), (0, True)), int)

    def _bool(self, cond: sympy.Basic | bool) -> SymNode:
        return self._make(sympy.sympify(cond), bool)


def _exprs(nodes: Sequence[Any]) -> list[sympy.Basic]:
    return [n.expr if isinstance(n, SymNode) else sympy.Integer(n) for n in nodes]


def _hints(nodes: Sequence[Any]) -> list[int]:
    out = []
    for n in nodes:
        hint = n.hint if isinstance(n, SymNode) else n
        out.append(0 if hint is None else int(hint))  # unbacked: any order is fine
    return out


def _numeric_type(a: SymNode, b: SymNode) -> PyType:
    return float if float in (a.pytype, b.pytype) else int


def _floordiv(a: sympy.Expr, b: sympy.Expr) -> sympy.Expr:
    return sympy.floor(a / b)


def _lshift(a: sympy.Expr, b: sympy.Expr) -> sympy.Expr:
    return a * 2**b


def _rshift(a: sympy.Expr, b: sympy.Expr) -> sympy.Expr:
    return sympy.floor(a / 2**b)


_INT, _FLOAT, _BOOL = (lambda a, b: int), (lambda a, b: float), (lambda a, b: bool)
_NUMERIC = _numeric_type

# protocol name -> (sympy construction, result type from the operand nodes)
_BINARY: dict[str, tuple[Callable, Callable[[SymNode, SymNode], PyType]]] = {
    "add": (sympy.Add, _NUMERIC),
    "sub": (lambda a, b: a - b, _NUMERIC),
    "mul": (sympy.Mul, _NUMERIC),
    "mod": (sympy.Mod, _NUMERIC),
    "floordiv": (_floordiv, _NUMERIC),
    "int_floordiv": (_floordiv, _INT),
    "truediv": (lambda a, b: a / b, _FLOAT),
    "int_truediv": (lambda a, b: a / b, _FLOAT),
    "float_truediv": (lambda a, b: a / b, _FLOAT),
    "pow": (sympy.Pow, _NUMERIC),
    "pow_by_natural": (sympy.Pow, _INT),
    "float_pow": (sympy.Pow, _FLOAT),
    "lshift": (_lshift, _INT),
    "rshift": (_rshift, _INT),
    "sym_min": (sympy.Min, _NUMERIC),
    "sym_max": (sympy.Max, _NUMERIC),
    "eq": (sympy.Eq, _BOOL),
    "ne": (sympy.Ne, _BOOL),
    "lt": (sympy.Lt, _BOOL),
    "le": (sympy.Le, _BOOL),
    "gt": (sympy.Gt, _BOOL),
    "ge": (sympy.Ge, _BOOL),
    "sym_and": (sympy.And, _BOOL),
    "sym_or": (sympy.Or, _BOOL),
    "and_": (sympy.And, _BOOL),
    "or_": (sympy.Or, _BOOL),
}


def _truncate(a: sympy.Expr) -> sympy.Expr:
    return sympy.Piecewise((sympy.floor(a), a >= 0), (sympy.ceiling(a), True))


_SAME = lambda a: a.pytype  # noqa: E731
_UNARY: dict[str, tuple[Callable, Callable[[SymNode], PyType]]] = {
    "neg": (lambda a: -a, _SAME),
    "pos": (lambda a: a, _SAME),
    "abs": (sympy.Abs, _SAME),
    "floor": (sympy.floor, lambda a: int),
    "ceil": (sympy.ceiling, lambda a: int),
    "trunc": (_truncate, lambda a: int),
    "sym_not": (sympy.Not, lambda a: bool),
    "is_integer": (lambda a: sympy.Eq(sympy.floor(a), a), lambda a: bool),
}


def _binary_method(name: str, build: Callable, result_type: Callable) -> Callable:
    def method(self: SymNode, other: SymNode) -> SymNode:
        return self._make(build(self.expr, other.expr), result_type(self, other))

    method.__name__ = name
    return method


def _unary_method(name: str, build: Callable, result_type: Callable) -> Callable:
    def method(self: SymNode) -> SymNode:
        return self._make(build(self.expr), result_type(self))

    method.__name__ = name
    return method


for _name, (_build, _type) in _BINARY.items():
    setattr(SymNode, _name, _binary_method(_name, _build, _type))
for _name, (_build, _type) in _UNARY.items():
    setattr(SymNode, _name, _unary_method(_name, _build, _type))


def is_ember_symbolic(value: object) -> bool:
    """True for a SymInt/SymFloat/SymBool whose node is ours."""
    sym_types = (torch.SymInt, torch.SymFloat, torch.SymBool)
    return isinstance(value, sym_types) and isinstance(value.node, SymNode)
