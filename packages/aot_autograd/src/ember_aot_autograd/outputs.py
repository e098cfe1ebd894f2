"""How the traced function's outputs are rebuilt at run time from the graph's outputs.

Each leaf of the function's output is one of: a graph output, a graph input returned as is,
a view of a graph input (regenerated outside the graph so that it aliases the real input as
in eager), a size of a symbolic variant (an int, float or bool computed from the sizes of the
call's inputs, outside the graph), or a constant (a non-tensor value fixed at trace time).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sympy
import torch
from torch.utils._pytree import TreeSpec, tree_leaves, tree_map, tree_unflatten

from ember_aot_autograd.errors import UnsupportedOpError
from ember_aot_autograd.symbolic import symbol_readers
from ember_aot_autograd.tensor_table import ViewStep


@dataclass(frozen=True)
class FromGraph:
    index: int  # among the graph's user outputs


@dataclass(frozen=True)
class SameAsInput:
    input_index: int


@dataclass(frozen=True)
class ViewOfInput:
    input_index: int
    chain: tuple[ViewStep, ...]
    # a chain whose arguments hold sizes (a symbolic variant): made concrete per call
    symbolic: SymbolicChain | None = None

    def steps(self, inputs: list[Any]) -> tuple[ViewStep, ...]:
        return self.chain if self.symbolic is None else self.symbolic.concrete(inputs)


class SymbolicChain:
    """A view chain traced on symbolic sizes (`slice(y, [1, 0], [s0, s1])`): each SymInt
    argument is evaluated from the call's inputs (the sizes its symbols stand for); the
    concrete chain is cached per binding of the symbols."""

    def __init__(self, chain: tuple[ViewStep, ...], readers: dict[sympy.Symbol, Callable]) -> None:
        self.chain = chain
        self.readers = readers
        self._concrete: dict[tuple, tuple[ViewStep, ...]] = {}

    def concrete(self, inputs: list[Any]) -> tuple[ViewStep, ...]:
        values = {symbol: read(inputs) for symbol, read in self.readers.items()}
        key = tuple(values.values())
        chain = self._concrete.get(key)
        if chain is None:
            chain = self._concrete[key] = tuple(
                dataclasses.replace(
                    step,
                    args=tree_map(lambda v: _evaluate(v, values), step.args),
                    kwargs=tree_map(lambda v: _evaluate(v, values), step.kwargs),
                )
                for step in self.chain
            )
        return chain


def _evaluate(value: Any, values: dict) -> Any:
    if isinstance(value, torch.SymInt):
        return int(_expr(value).xreplace(values))
    if isinstance(value, torch.SymFloat):
        return float(_expr(value).xreplace(values))
    return value


def _expr(value: torch.SymInt | torch.SymFloat) -> sympy.Expr:
    """The size's expression over the env's canonical symbols (those the inputs' sizes are)."""
    return value.node.shape_env.simplify(value.node.expr)


def view_of_input(
    index: int, chain: tuple[ViewStep, ...], example_values: list[Any]
) -> ViewOfInput:
    """The output leaf for a view of input `index`; symbolic sizes in the chain are read
    from the call's inputs (`example_values`: the traced values of the function's inputs)."""
    sizes = [v for step in chain for v in tree_leaves((step.args, step.kwargs)) if _is_size(v)]
    if not sizes:
        return ViewOfInput(index, chain)
    symbols = set().union(*(_expr(v).free_symbols for v in sizes))
    readers = symbol_readers(example_values)
    missing = symbols - readers.keys()
    if missing:
        raise UnsupportedOpError(
            "output", f"a view of input {index} has sizes {sorted(map(str, missing))} that "
            "are not sizes of any input"
        )  # fmt: skip
    chosen = {s: readers[s] for s in sorted(symbols, key=str)}
    return ViewOfInput(index, chain, SymbolicChain(chain, chosen))


def _is_size(value: Any) -> bool:
    return isinstance(value, torch.SymInt | torch.SymFloat)


class SizeOfInputs:
    """A SymInt/SymFloat/SymBool output of a symbolic variant (`x.shape[0] * 2`): its
    expression evaluated per call from the sizes of the call's inputs (cached per binding),
    as the Python int, float or bool eager returns."""

    def __init__(self, expr: Any, kind: type, readers: dict[sympy.Symbol, Callable]) -> None:
        self.expr, self.kind, self.readers = expr, kind, readers
        self._values: dict[tuple, Any] = {}

    def value(self, inputs: list[Any]) -> Any:
        values = {symbol: read(inputs) for symbol, read in self.readers.items()}
        key = tuple(values.values())
        known = self._values.get(key)
        if known is None:
            known = self._values[key] = self.kind(self.expr.xreplace(values))
        return known


_SIZE_KINDS = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}


def size_output(value: Any, example_values: list[Any]) -> SizeOfInputs | Constant:
    """The output leaf for a SymInt/SymFloat/SymBool the function returns; sizes that no
    input's size determines (data-dependent ones) raise UnsupportedOpError."""
    kind = _SIZE_KINDS[type(value)]
    expr = value.node.shape_env.simplify(value.node.expr)
    if not expr.free_symbols:
        return Constant(kind(expr))
    readers = symbol_readers(example_values)
    missing = expr.free_symbols - readers.keys()
    if missing:
        raise UnsupportedOpError(
            "output", f"a symbolic {kind.__name__} {expr} depends on {sorted(map(str, missing))},"
            " which are not sizes of any input (a data-dependent size)"
        )  # fmt: skip
    chosen = {s: readers[s] for s in sorted(expr.free_symbols, key=str)}
    return SizeOfInputs(expr, kind, chosen)


@dataclass(frozen=True)
class Constant:
    value: Any


Leaf = FromGraph | SameAsInput | ViewOfInput | SizeOfInputs | Constant


@dataclass(frozen=True)
class OutputSpec:
    """Leaves of the function's output, and its pytree structure."""

    leaves: tuple[Leaf, ...]
    treespec: TreeSpec

    def rebuild(self, inputs: list[Any], graph_outputs: list[Any]) -> Any:
        values = []
        for leaf in self.leaves:
            if isinstance(leaf, FromGraph):
                values.append(graph_outputs[leaf.index])
            elif isinstance(leaf, SameAsInput):
                values.append(inputs[leaf.input_index])
            elif isinstance(leaf, ViewOfInput):
                tensor = inputs[leaf.input_index]
                for step in leaf.steps(inputs):
                    tensor = step.apply(tensor)
                values.append(tensor)
            elif isinstance(leaf, SizeOfInputs):
                values.append(leaf.value(inputs))
            else:
                values.append(leaf.value)
        return tree_unflatten(values, self.treespec)


def is_tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)
