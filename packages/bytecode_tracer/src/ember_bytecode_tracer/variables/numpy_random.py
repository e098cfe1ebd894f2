"""NumPy's global random draws (`np.random.uniform(low, high, size=(20, 1))`) as graph inputs.

The draw is a call into NumPy's C code and its values are random: the trace cannot compute
them, and a constant would repeat one draw forever. Like eager, the compiled frame calls the
same method of the same global `RandomState` with the same constant arguments, each call
once, in trace order, right before its graph runs (convert_frame's runner); the array it
returns enters the graph as an input (`OutputGraph.drawn_input`), held as an ndarray of the
trace. Nothing else in a graph region touches NumPy's global generator (its other calls are
C calls: a break), so the draws see the generator state eager's would. Only draws that
return an array (`size=` given) qualify: a Python float draw would be a value of the trace
that no guard can fix. The trace learns the result's shape and dtype from a draw on a copy
of the generator, leaving the real one untouched.
"""

from __future__ import annotations

import functools
import types
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

import ember_frame_hook as fh
from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import AttrSource, GuardKind
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import guard, wrap_rule
from ember_bytecode_tracer.variables.generator_draws import GeneratorDrawVariable
from ember_bytecode_tracer.variables.numpy_arrays import NumpyArrayVariable

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator

#: RandomState methods whose `size=` draw returns an ndarray of that size
DRAWS = frozenset(
    {
        "uniform", "normal", "standard_normal", "random_sample", "random", "randint",
        "exponential", "standard_exponential", "poisson", "binomial", "beta", "gamma",
        "standard_gamma", "laplace", "logistic", "lognormal", "geometric",
    }
)  # fmt: skip


def _global_state() -> Any:
    return np.random.mtrand._rand


class NumpyDrawVariable(GeneratorDrawVariable):
    """A bound draw method of NumPy's global RandomState (`np.random.uniform`)."""

    label = "np.random"

    def call_function(self, tx, args, kwargs):
        values, kw_values = self.constant_arguments(args, kwargs)
        if kw_values.get("size") is None:
            raise Unsupported(f"np.random.{self.name}() without size= draws a Python scalar")
        copy = np.random.RandomState()
        copy.set_state(_global_state().get_state())
        example = getattr(copy, self.name)(*values, **kw_values)
        if not isinstance(example, np.ndarray) or example.dtype == object:
            raise Unsupported(f"np.random.{self.name}() does not draw a numeric array here")
        draw = functools.partial(_draw, getattr(_global_state(), self.name), values, kw_values)
        node, fake = tx.output.drawn_input(draw, torch.from_numpy(example))
        return NumpyArrayVariable(node, fake)

    def __repr__(self) -> str:
        return f"NumpyDrawVariable({self.name})"


def _draw(method: Any, args: list, kwargs: dict) -> torch.Tensor:
    """The draw, as eager makes it: NumPy's own Python helpers (randint's) run as they are,
    not compiled (this call is Ember's, not the program's)."""
    with fh.eval_frame(None):
        return torch.from_numpy(np.ascontiguousarray(method(*args, **kwargs)))


def _is_global_draw(tx: Translator, value: Any, source: Source | None) -> bool:
    return (
        source is not None
        and isinstance(value, types.MethodType)
        and value.__self__ is _global_state()
        and getattr(value.__func__, "__name__", None) in DRAWS
    )


@wrap_rule("numpy_random_draw", when=_is_global_draw)
def _wrap_draw(tx: Translator, value: Any, source: Source) -> VariableTracker:
    """Guarded as the same method of the same generator (a bound method is a new object at
    each attribute read: its parts are what stays)."""
    guard(tx, AttrSource(source, "__self__"), GuardKind.ID_MATCH, value.__self__)
    guard(tx, AttrSource(source, "__func__"), GuardKind.ID_MATCH, value.__func__)
    return NumpyDrawVariable(value.__func__.__name__, source=source)
