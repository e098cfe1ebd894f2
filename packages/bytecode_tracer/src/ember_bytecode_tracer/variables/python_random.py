"""Python's `random` module in traced code: `random.random()`, `random.uniform(a, b)`.

Each call of the compiled code must draw a new value and advance the module's generator as
eager does; a value seen at trace time baked into the graph would repeat one draw forever.
A float draw of the module's global generator (`random._inst`) with constant arguments is
made by the compiled frame itself: it calls the same method with the same arguments, each
call once, in trace order, right before its graph runs (convert_frame's runner, as NumPy's
draws in numpy_random.py). The value enters the graph as a 0-d float64 input read back
with `item()`: an unbacked SymFloat, exact as the Python float it is (a float64 tensor would
change the dtype eager's scalar gives an op; a float32 one would round it). Arithmetic on it
stays in the graph; a branch on it cannot be decided at trace time: a graph break. The
trace learns nothing else from the draw, so it leaves the real generator untouched.
Other methods (`randint`, `seed`, `getstate`...) are not drawn here: they reach the C
generator and break the graph, after which Python runs them; the draws of a graph all come
before that break, so the generator sees eager's order of calls.
"""

from __future__ import annotations

import functools
import random
import types
from typing import TYPE_CHECKING, Any

import torch

import ember_frame_hook as fh
from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import AttrSource, GuardKind
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import guard, wrap_rule
from ember_bytecode_tracer.variables.generator_draws import GeneratorDrawVariable
from ember_bytecode_tracer.variables.sym_values import wrap_scalar

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator

#: methods of random.Random that draw one float from constant arguments
FLOAT_DRAWS = frozenset({"random", "uniform"})


class PythonRandomDrawVariable(GeneratorDrawVariable):
    """A bound float-drawing method of the `random` module's global generator."""

    label = "random"

    def call_function(self, tx, args, kwargs):
        values, kw_values = self.constant_arguments(args, kwargs)
        copy = random.Random()
        copy.setstate(random._inst.getstate())
        try:
            example = getattr(copy, self.name)(*values, **kw_values)
        except Exception as exc:  # a bad call: Python raises it after a break, as eager
            raise Unsupported(f"random.{self.name}(): {type(exc).__name__}: {exc}") from exc
        if type(example) is not float:
            raise Unsupported(f"random.{self.name}() does not draw a float here")
        method = getattr(random._inst, self.name)
        draw = functools.partial(_draw, method, values, kw_values)
        node, _ = tx.output.drawn_input(draw, torch.tensor(example, dtype=torch.float64))
        return _unbacked_item(tx, node)

    def __repr__(self) -> str:
        return f"PythonRandomDrawVariable({self.name})"


def _unbacked_item(tx: Translator, node: torch.fx.Node) -> VariableTracker:
    """`node.item()` as a fresh unbacked SymFloat: its value is known only when the graph runs
    (made here, not by the fake kernel, which gives one only under capture_scalar_outputs)."""
    shape_env = tx.output.fake_mode.shape_env
    if shape_env is None:
        raise Unsupported("a random draw in a trace without symbolic values")
    value = shape_env.create_unbacked_symfloat()
    item = tx.output.graph.call_method("item", (node,))
    item.meta["example_value"] = value
    tx.output.dynamic.scalar_nodes.setdefault(value.node.expr, item)
    return wrap_scalar(value, item)


def _draw(method: Any, args: list, kwargs: dict) -> torch.Tensor:
    """The draw, as eager makes it (uniform's Python body runs as it is, not compiled)."""
    with fh.eval_frame(None):
        return torch.tensor(method(*args, **kwargs), dtype=torch.float64)


def _draw_name(value: Any) -> str | None:
    """The method's name where `value` is a draw method bound to the module's generator:
    `random.uniform` (a Python method) or `random.random` (a C one, no `__func__`)."""
    if not isinstance(value, types.MethodType | types.BuiltinMethodType):
        return None
    if getattr(value, "__self__", None) is not random._inst:
        return None
    name = getattr(value, "__name__", None)
    return name if name in FLOAT_DRAWS else None


def _is_global_float_draw(tx: Translator, value: Any, source: Source | None) -> bool:
    return source is not None and _draw_name(value) is not None


@wrap_rule("python_random_draw", when=_is_global_float_draw)
def _wrap_draw(tx: Translator, value: Any, source: Source) -> VariableTracker:
    """Guarded as the same method of the same generator (a bound method is a new object at
    each attribute read: its parts are what stays)."""
    name = _draw_name(value)
    guard(tx, source, GuardKind.TYPE_MATCH, type(value))
    guard(tx, AttrSource(source, "__self__"), GuardKind.ID_MATCH, value.__self__)
    if isinstance(value, types.MethodType):
        guard(tx, AttrSource(source, "__func__"), GuardKind.ID_MATCH, value.__func__)
    else:
        guard(tx, AttrSource(source, "__name__"), GuardKind.EQUALS_MATCH, name)
    return PythonRandomDrawVariable(name, source=source)
