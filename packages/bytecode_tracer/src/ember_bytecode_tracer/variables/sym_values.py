"""Symbolic Python scalars: sizes and ints whose value is a SymInt (or SymFloat/SymBool).

A `SymNodeVariable` holds the example value, an `ember_symbolic` SymInt over the trace's
ShapeEnv. Arithmetic on it runs on the example values (sympy), so `x.shape[0] * 2` is
just an expression; when a tensor operation or the frame's result needs it, `as_fx_arg`
turns the expression into graph nodes: `size` calls on the tensor inputs (or the SymInt
placeholder of an int argument) combined with `operator` nodes, each with its SymInt as
`meta["example_value"]`. A branch on a symbolic condition asks the example value, which
makes the ShapeEnv record the guard (no graph break). Where the trace needs a real
constant (a `range()` bound, a list repeat) the value specializes, with its guard.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import sympy
import torch
import torch.fx

import ember_symbolic as es
from ember_bytecode_tracer.dynamic import trace_of
from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import GuardKind
from ember_bytecode_tracer.variables.base import PROBING, VariableTracker
from ember_bytecode_tracer.variables.builder import guard, wrap_rule
from ember_bytecode_tracer.variables.constant import ConstantVariable, register_symbolic_tracker
from ember_bytecode_tracer.variables.lists import BoundMethodOfTracker, TupleVariable
from ember_symbolic import SymNode, TensorPropertySource

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.output_graph import OutputGraph
    from ember_bytecode_tracer.variables.base import Translator

SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)
# What an int's own attributes and argument-free methods are, for a symbolic int n: n itself
# (None) or a constant; `n.as_integer_ratio()` is (n, 1), as for every int.
_INT_ATTRIBUTES = {"real": None, "numerator": None, "imag": ConstantVariable(0),
                   "denominator": ConstantVariable(1)}  # fmt: skip
_INT_METHODS = {
    "conjugate": lambda n: n,
    "__index__": lambda n: n,
    "__int__": lambda n: n,
    "as_integer_ratio": lambda n: TupleVariable([n, ConstantVariable(1)]),
}

_PYTYPE = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}


def is_symbolic(value: Any) -> bool:
    return isinstance(value, SYM_TYPES) and value.node.is_symbolic()


class SymNodeVariable(VariableTracker):
    """A symbolic int/float/bool: its example value and, once it has one, its graph node."""

    def __init__(
        self, value: Any, *, node: torch.fx.Node | None = None, source: Source | None = None
    ) -> None:
        super().__init__(source=source)
        self.value = value
        self.node = node

    def python_type(self) -> type:
        return _PYTYPE[type(self.value)]

    def is_python_constant(self) -> bool:
        return False  # asking must not specialize it

    def as_python_constant(self) -> Any:
        """The trace needs a constant here: specialize (the env records `expr == value`;
        a dim marked dynamic raises ConstraintViolationError naming the line)."""
        if PROBING[0]:
            raise Unsupported("a symbolic value is not a constant")
        return _decide(self.python_type(), self.value)

    def truthiness(self, tx: Translator) -> bool:
        return _decide(bool, self.value)  # the env decides it and records the guard

    def var_getattr(self, tx: Translator, name: str) -> VariableTracker:
        if self.python_type() is int:
            if name in _INT_ATTRIBUTES:
                return self if _INT_ATTRIBUTES[name] is None else _INT_ATTRIBUTES[name]
            if name in _INT_METHODS:
                return BoundMethodOfTracker(self, name)
        raise Unsupported(f"attribute {name!r} of a symbolic {self.python_type().__name__}")

    def call_method(self, tx, name, args, kwargs):
        if self.python_type() is int and name in _INT_METHODS and not args and not kwargs:
            return _INT_METHODS[name](self)
        raise Unsupported(f"method {name!r} of a symbolic {self.python_type().__name__}")

    def __repr__(self) -> str:
        return f"SymNodeVariable({self.value})"


def _decide(pytype: type, value: Any) -> Any:
    try:
        return pytype(value)
    except es.DataDependentError as exc:  # a size only the graph's run will know: a break
        raise Unsupported(f"a decision on a data-dependent size: {exc}") from exc


def decide_bool(value: Any) -> bool:
    """A condition the trace depends on, decided now: on a symbolic value the env records
    its guard; a data-dependent one is a break."""
    return _decide(bool, value)


def wrap_scalar(value: Any, node: torch.fx.Node | None = None) -> VariableTracker:
    """A tracker for a scalar result: symbolic values stay symbolic, others are constants."""
    if isinstance(value, SYM_TYPES):
        if value.node.is_symbolic():
            return SymNodeVariable(value, node=node)
        value = _PYTYPE[type(value)](value)  # a constant expression: no guard needed
    return ConstantVariable(value)


def has_symbolic(var: VariableTracker) -> bool:
    """A symbolic scalar, or a tuple/list/Size holding one."""
    if isinstance(var, SymNodeVariable):
        return True
    items = getattr(var, "items", None)
    return isinstance(items, list) and any(has_symbolic(v) for v in items)


def example_of(var: VariableTracker) -> Any:
    """The trace-time value with symbolic scalars left as SymInts (never specialized)."""
    if isinstance(var, SymNodeVariable):
        return var.value
    items = getattr(var, "items", None)
    if isinstance(items, list) and has_symbolic(var):
        return var.python_type()(example_of(v) for v in items)
    return var.as_python_constant()


#: bit operators: no symbolic form here, so a size they read is made its value (guarded);
#: one only the run knows (an item()) cannot be: a break (sym_values._decide)
_BIT_OPERATORS = frozenset({operator.or_, operator.and_, operator.xor, operator.lshift,
                            operator.rshift, operator.invert})  # fmt: skip


def sym_operator(tx: Translator, fn: Any, args: list[VariableTracker]) -> VariableTracker:
    """`fn` on symbolic scalars (and constants), evaluated on the example values."""
    values = [example_of(a) for a in args]
    if fn in _BIT_OPERATORS:
        values = [_decide(int, v) if isinstance(v, torch.SymInt) else v for v in values]
    try:
        result = fn(*values)
    except Exception as exc:
        raise Unsupported(f"{fn.__name__} on symbolic values raised {type(exc).__name__}") from exc
    return wrap_scalar(result)


# ---- expressions -> graph nodes -------------------------------------------------------
def output_of(var: SymNodeVariable) -> OutputGraph:
    trace = trace_of(var.value.node.shape_env)
    if trace is None or trace.output is None:
        raise Unsupported(f"symbolic value {var.value} from another trace")
    return trace.output


def as_fx_arg(output: OutputGraph, var: SymNodeVariable) -> Any:
    """The graph argument for a symbolic scalar: its node, built from its expression."""
    if var.node is not None:
        return var.node
    value = var.value
    node = fx_of(output, value.node.expr, value.node.pytype)
    if isinstance(node, torch.fx.Node):
        var.node = node
    return node


def fx_of(output: OutputGraph, expr: sympy.Basic, pytype: type = int) -> Any:
    """Graph nodes (or a Python number) computing `expr` from the graph's inputs."""
    cache = output.dynamic.node_cache
    key = (expr, pytype)
    if key not in cache:
        cache[key] = _build(output, expr, pytype)
    return cache[key]


def _example(output: OutputGraph, expr: sympy.Basic, pytype: type) -> Any:

    if pytype is int:
        return output.dynamic.env.symint(expr)
    wrapper = torch.SymFloat if pytype is float else torch.SymBool
    return wrapper(SymNode(expr, output.dynamic.env, pytype))


def _call(output: OutputGraph, expr: sympy.Basic, pytype: type, op: str, target, args):
    node = output.graph.create_node(op, target, tuple(args), {})
    node.meta["example_value"] = _example(output, expr, pytype)
    return node


def _build(output: OutputGraph, expr: sympy.Basic, pytype: type) -> Any:
    if expr.is_Integer:
        return int(expr)
    if expr.is_Number:
        return float(expr)
    if pytype is float and expr.is_integer:
        # float(n) of a size: the int expression, converted in the graph (an int would
        # change the dtype of what it multiplies: x.long() * float(n) is a float tensor)
        node = fx_of(output, expr, int)
        return _call(output, expr, float, "call_function", torch.sym_float, (node,))
    if isinstance(expr, sympy.Symbol):
        return _symbol_node(output, expr)
    kind = _BUILDERS.get(type(expr).__name__)
    if kind is None:
        raise Unsupported(f"symbolic expression {expr} cannot be computed in the graph")
    return kind(output, expr, pytype)


def _symbol_node(output: OutputGraph, symbol: sympy.Symbol) -> torch.fx.Node:

    env = output.dynamic.env
    if symbol in output.dynamic.scalar_nodes:  # an int read by item() (scalar_outputs.py)
        return output.dynamic.scalar_nodes[symbol]
    if symbol in output.dynamic.unbacked_nodes:
        node, dim = output.dynamic.unbacked_nodes[symbol]
        return _call(output, symbol, int, "call_method", "size", (node, dim))
    for source in env.var_to_sources.get(symbol, ()):
        if isinstance(source, TensorPropertySource) and source.prop == "size":
            base = output.input_node(source.base)
            if base is not None:
                return _call(output, symbol, int, "call_method", "size", (base, source.dim))
        else:
            node = output.input_node(source)
            if node is not None:
                return node
    raise Unsupported(f"size symbol {symbol} has no input in this graph")


def _fold(output, expr, pytype, fn, parts):
    nodes = [fx_of(output, p, pytype if p.free_symbols else int) for p in parts]
    result = nodes[0]
    for i, node in enumerate(nodes[1:], start=1):
        partial = type(expr)(*parts[: i + 1]) if len(parts) > 2 else expr
        result = _call(output, partial, pytype, "call_function", fn, (result, node))
    return result


def _add(output, expr, pytype):
    return _fold(output, expr, pytype, operator.add, list(expr.args))


def _mul(output, expr, pytype):
    coeff, rest = expr.as_coeff_Mul()
    if coeff == 1:
        return _fold(output, expr, pytype, operator.mul, list(expr.args))
    p, q = sympy.fraction(sympy.Rational(coeff)) if coeff.is_Rational else (coeff, 1)
    node = fx_of(output, rest, pytype)
    if p != 1:
        node = _call(output, p * rest, pytype, "call_function", operator.mul, (node, _num(p)))
    if q != 1:
        # In int context q divides p*rest exactly (a guard established it): floor division.
        div = operator.floordiv if pytype is int else operator.truediv
        node = _call(output, expr, pytype, "call_function", div, (node, _num(q)))
    return node


def _num(value: sympy.Basic) -> int | float:
    return int(value) if value.is_Integer else float(value)


def _pow(output, expr, pytype):
    base, exp = expr.args
    if not exp.is_Integer:
        raise Unsupported(f"symbolic power {expr}")
    node = fx_of(output, base, pytype)
    if exp > 0:
        return _call(output, expr, pytype, "call_function", operator.pow, (node, int(exp)))
    power = _call(output, base**-exp, pytype, "call_function", operator.pow, (node, int(-exp)))
    return _call(output, expr, float, "call_function", operator.truediv, (1.0, power))


def _floor(output, expr, pytype):
    num, den = expr.args[0].as_numer_denom()
    if not den.free_symbols and den == 1:
        return fx_of(output, num, int)
    args = (fx_of(output, num, int), fx_of(output, den, int))
    return _call(output, expr, int, "call_function", operator.floordiv, args)


def _ceiling(output, expr, pytype):
    num, den = expr.args[0].as_numer_denom()
    negated = fx_of(output, -num, int)
    div = _call(output, sympy.floor(-num / den), int, "call_function", operator.floordiv,
                (negated, fx_of(output, den, int)))  # fmt: skip
    return _call(output, expr, int, "call_function", operator.neg, (div,))


def _mod(output, expr, pytype):
    a, b = expr.args
    args = (fx_of(output, a, int), fx_of(output, b, int))
    return _call(output, expr, int, "call_function", operator.mod, args)


def _extreme(fn):
    def build(output, expr, pytype):
        return _fold(output, expr, pytype, fn, list(expr.args))

    return build


def _relation(fn):
    def build(output, expr, pytype):
        lhs, rhs = expr.args
        args = (fx_of(output, lhs, int), fx_of(output, rhs, int))
        return _call(output, expr, bool, "call_function", fn, args)

    return build


_BUILDERS = {
    "Add": _add,
    "Mul": _mul,
    "Pow": _pow,
    "floor": _floor,
    "FloorDiv": _floor,
    "ceiling": _ceiling,
    "Mod": _mod,
    "Max": _extreme(torch.sym_max),
    "Min": _extreme(torch.sym_min),
    "StrictGreaterThan": _relation(operator.gt),
    "GreaterThan": _relation(operator.ge),
    "StrictLessThan": _relation(operator.lt),
    "LessThan": _relation(operator.le),
    "Equality": _relation(operator.eq),
    "Unequality": _relation(operator.ne),
}


# A symbolic size or int computed at trace time (`len(x)`, `x.numel()`, torch.numel) is not
# a constant: whoever wraps one as a ConstantVariable gets a SymNodeVariable.
register_symbolic_tracker(SymNodeVariable)


# ---- wrapping real values (variables/builder.py) ----------------------------------------
def _int_is_dynamic(tx: Translator, value: int, source: Source | None) -> bool:
    return source is not None and tx.output.dynamic.int_is_dynamic(source, value)


@wrap_rule("symbolic_int", types=int, exact=True, when=_int_is_dynamic)
def wrap_symbolic_int(tx: Translator, value: int, source: Source) -> VariableTracker:
    """An int argument the dynamic policy made symbolic: a SymInt graph input, guarded by
    type here and by the shape guards (ranges, branches) of the trace."""
    symint = tx.output.dynamic.symint(source, value)
    if not isinstance(symint, torch.SymInt):  # specialized (0 or 1): the env guards it
        guard(tx, source, GuardKind.EQUALS_MATCH, value)
        return ConstantVariable(value, source=source)
    guard(tx, source, GuardKind.TYPE_MATCH, int)
    node = tx.output.sym_input(source, value, symint)
    return SymNodeVariable(symint, node=node, source=source)
