"""Symbolic sizes in traced graphs: SymInt values as FX nodes.

Example values whose sizes are `torch.SymInt`s (made by ember-symbolic-shapes) carry their
ShapeEnv in `symint.node.shape_env`; nothing here reaches a global. A traced op whose
arguments hold SymInts (`view(x, [s0, 8])`) gets, in place of each SymInt, an FX node that
computes it at run time from the graph's inputs: `aten.sym_size.int(input, dim)` for a size
symbol, the placeholder itself for a SymInt input, and `operator.*` nodes for expressions
over them (sympy's tree, rebuilt). Each such node's meta['val'] is the SymInt.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import sympy
import torch
import torch.fx

from ember_aot_autograd.aliasing import alias_pattern

SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)
aten = torch.ops.aten


def is_symbolic_value(value: Any) -> bool:
    """A SymInt/SymFloat/SymBool, or a tensor with a symbolic size, stride or offset."""
    if isinstance(value, SYM_TYPES):
        return True
    if isinstance(value, torch.Tensor):
        return any(isinstance(s, torch.SymInt) for s in (*value.shape, *value.stride()))
    return False


def env_of(values: Iterable[Any]) -> Any | None:
    """The ShapeEnv the symbolic example values belong to (None when all are static)."""
    for value in values:
        if isinstance(value, SYM_TYPES):
            return value.node.shape_env
        if isinstance(value, torch.Tensor):
            for size in (*value.shape, *value.stride()):
                if isinstance(size, torch.SymInt):
                    return size.node.shape_env
    return None


def symbolic_dispatch(
    values: Iterable[Any], *, always: bool = False
) -> contextlib.AbstractContextManager:
    """The dispatch a trace over these example values runs under: the Python dispatcher where
    a tensor has a symbolic size. Aten's C++ composites (`constant_pad_nd` on any device;
    on a machine with a GPU, `matmul` and friends on CUDA fakes) read `tensor.sizes()`, which
    FakeTensorMode answers with `int()` of each size: a guard `Eq(s0, 77)` per dim, so one
    compile per length ("added at backend ... compiling the graph"). Through the Python
    dispatcher those composites decompose in Python, where sizes stay symbolic."""
    if always or any(is_symbolic_value(v) for v in values if isinstance(v, torch.Tensor)):
        from torch._dispatch.python import enable_python_dispatcher

        return enable_python_dispatcher()
    return contextlib.nullcontext()


def static_fake(mode: Any, tensor: torch.Tensor) -> torch.Tensor:
    """A fake copy of a real tensor with its static sizes, never asking the mode's shape env
    for symbols (ours is not PyTorch's ShapeEnv)."""
    return mode.from_tensor(tensor, static_shapes=True)


def _binary(op: Callable) -> Callable:
    return lambda graph, args: graph.call_function(op, tuple(args))


_RELATIONS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
              "==": operator.eq, "!=": operator.ne}  # fmt: skip


class SymbolNodes:
    """Maps size symbols to FX nodes of one graph and builds nodes for expressions."""

    def __init__(self, graph: torch.fx.Graph) -> None:
        self.graph = graph
        self.env: Any = None
        self.roots: dict[sympy.Symbol, Callable[[], torch.fx.Node]] = {}
        self.nodes: dict[sympy.Expr, torch.fx.Node] = {}

    def bind_tensor(self, fake: torch.Tensor, node: torch.fx.Node) -> None:
        """Each size of `fake` that is a plain symbol reads as sym_size(node, d)."""
        for dim, size in enumerate(fake.shape):
            if isinstance(size, torch.SymInt):
                self._note_env(size)
                expr = size.node.expr
                if isinstance(expr, sympy.Symbol) and expr not in self.roots:
                    self.roots[expr] = self._size_reader(node, dim, size)

    def bind_unbacked(self, fake: torch.Tensor, node: torch.fx.Node) -> None:
        """A size of an op's result that no input determines (an unbacked symbol: nonzero's
        length) reads as sym_size(node, d), so later ops and assertions can use it."""
        for size in fake.shape:
            if isinstance(size, torch.SymInt) and not size.node.has_hint():
                self.bind_tensor(fake, node)
                return

    def bind_symint(self, value: torch.SymInt, node: torch.fx.Node) -> None:
        self._note_env(value)
        node.meta["val"] = value
        expr = value.node.expr
        if isinstance(expr, sympy.Symbol):
            self.roots.setdefault(expr, lambda: node)
            self.nodes.setdefault(expr, node)

    def _note_env(self, value: torch.SymInt) -> None:
        if self.env is None:
            self.env = value.node.shape_env

    def _size_reader(self, node: torch.fx.Node, dim: int, size: torch.SymInt):
        def read() -> torch.fx.Node:
            # made where first needed (the graph's end): the input is defined by then
            size_node = self.graph.call_function(aten.sym_size.int, (node, dim))
            size_node.meta["val"] = size
            return size_node

        return read

    def node_of(self, value: torch.SymInt | torch.SymFloat | torch.SymBool) -> Any:
        """The node computing `value` (an int when the env knows it is a constant)."""
        env = value.node.shape_env
        expr = env.simplify(value.node.expr)
        if expr.is_Integer:
            return int(expr)
        # a SymFloat's divisions are true divisions; a SymInt's are exact/floor divisions
        self._real = isinstance(value, torch.SymFloat)
        try:
            return self._build(expr)
        finally:
            self._real = False

    _real = False

    def _build(self, expr: sympy.Expr) -> Any:
        if expr.is_Integer:
            return int(expr)
        if expr.is_Number:
            return float(expr)
        key = (expr, self._real) if not isinstance(expr, sympy.Symbol) else expr
        known = self.nodes.get(key)
        if known is not None:
            return known
        if isinstance(expr, sympy.Symbol):
            reader = self.roots.get(expr)
            if reader is None:
                raise NotImplementedError(f"size symbol {expr} is not a size of any graph input")
            node = reader()
        else:
            node = self._compose(expr)
        self.nodes[key] = node
        return node

    def _compose(self, expr: sympy.Expr) -> Any:
        if isinstance(expr, sympy.Rel):  # a condition (a run-time assertion's): compared
            lhs, rhs = (self._build(side) for side in expr.args)
            return self._emit(_RELATIONS[expr.rel_op], [lhs, rhs])
        num, den = expr.as_numer_denom()
        if den != 1:  # true division of a float; else exact (the env proved divisibility)
            op = operator.truediv if self._real else operator.floordiv
            return self._emit(op, [self._build(num), self._build(den)])
        kind = type(expr).__name__
        builder = _COMPOSERS.get(kind)
        if builder is None:
            raise NotImplementedError(f"no FX form for a size expression of kind {kind}: {expr}")
        return builder(self, expr)

    def _emit(self, op: Callable, args: Sequence[Any]) -> Any:
        if all(isinstance(a, int | float) for a in args):
            return op(*args)
        node = self.graph.call_function(op, tuple(args))
        # SymInt arithmetic gives the value (our SymNode computes the expression)
        node.meta["val"] = op(*[a.meta["val"] if isinstance(a, torch.fx.Node) else a for a in args])
        return node

    def _fold(self, op: Callable, terms: Sequence[sympy.Expr]) -> Any:
        out = self._build(terms[0])
        for term in terms[1:]:
            out = self._emit(op, [out, self._build(term)])
        return out


def _add(table: SymbolNodes, expr: sympy.Add) -> Any:
    return table._fold(operator.add, list(expr.as_ordered_terms()))


def _mul(table: SymbolNodes, expr: sympy.Mul) -> Any:
    return table._fold(operator.mul, list(expr.as_ordered_factors()))


def _floor(table: SymbolNodes, expr: sympy.floor) -> Any:
    num, den = expr.args[0].as_numer_denom()
    if den == 1:
        return table._build(num)
    return table._emit(operator.floordiv, [table._build(num), table._build(den)])


def _mod(table: SymbolNodes, expr: sympy.Mod) -> Any:
    return table._emit(operator.mod, [table._build(a) for a in expr.args])


def _pow(table: SymbolNodes, expr: sympy.Pow) -> Any:
    """A positive whole power (`u**3`, or `u**3.0` of a float read: sympy's form of the
    product `k * k * k`) as that product; another numeric power of a float as `**`."""
    base, exponent = expr.args
    if exponent.is_Number and exponent > 0 and float(exponent).is_integer():
        return table._fold(operator.mul, [base] * int(exponent))
    if exponent.is_Number and table._real:
        return table._emit(operator.pow, [table._build(base), float(exponent)])
    raise NotImplementedError(f"no FX form for the size expression {expr}")


def _max(table: SymbolNodes, expr: sympy.Max) -> Any:
    return table._fold(torch.sym_max, list(expr.args))


def _min(table: SymbolNodes, expr: sympy.Min) -> Any:
    return table._fold(torch.sym_min, list(expr.args))


_COMPOSERS: dict[str, Callable[[SymbolNodes, Any], Any]] = {
    "Add": _add,
    "Mul": _mul,
    "floor": _floor,
    "FloorDiv": _floor,
    "Mod": _mod,
    "Pow": _pow,
    "Max": _max,
    "Min": _min,
}


class DynamicSignature:
    """The key of a variant compiled for symbolic example values: everything but the sizes
    (the tracer's shape guards already decided that these sizes are in the graph's range);
    non-tensor inputs are keyed by type where symbolic, by value elsewhere."""

    def __init__(self, example_values: Sequence[Any]) -> None:
        self.symbolic = {i for i, v in enumerate(example_values) if isinstance(v, SYM_TYPES)}

    def __call__(self, args: Sequence[Any]) -> tuple:
        symbolic = self.symbolic
        return (
            torch.is_grad_enabled(),
            tuple(
                (v.dtype, v.device, v.requires_grad, v.dim())
                if isinstance(v, torch.Tensor)
                else (type(v) if i in symbolic else ("value", v))
                for i, v in enumerate(args)
            ),
            alias_pattern(args),  # inputs sharing storage (aliasing.py)
        )


def symbol_readers(example_values: Sequence[Any]) -> dict[sympy.Symbol, Callable]:
    """For each size symbol of the example values, how to read its value from the
    run-time arguments (a tensor argument's size or a SymInt argument's int)."""
    readers: dict[sympy.Symbol, Callable] = {}
    for position, value in enumerate(example_values):
        if isinstance(value, torch.SymInt):
            expr = value.node.expr
            if isinstance(expr, sympy.Symbol):
                readers.setdefault(expr, lambda args, p=position: sympy.Integer(int(args[p])))
        elif isinstance(value, torch.Tensor):
            for dim, size in enumerate(value.shape):
                expr = size.node.expr if isinstance(size, torch.SymInt) else None
                if isinstance(expr, sympy.Symbol):
                    readers.setdefault(
                        expr, lambda args, p=position, d=dim: sympy.Integer(args[p].shape[d])
                    )
    return readers
