"""torch.get_rng_state / set_rng_state / manual_seed called in a trace (see rng_effects.py).

The calls do not go into the graph: each one updates the trace's `RngPlan`, which replays
them around the graph. The state `get_rng_state()` returns is a token naming a generator
state; it can only be handed back to `set_rng_state` (anything else is a graph break).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.rng_effects import RngState
from ember_bytecode_tracer.variables.base import CallableVariable, VariableTracker
from ember_bytecode_tracer.variables.builder import guard_identity, in_rule_table, wrap_rule
from ember_bytecode_tracer.variables.constant import ConstantVariable

RngRule = Callable[[Any, list[VariableTracker], dict[str, VariableTracker]], VariableTracker]
RNG_FUNCTIONS: dict[Any, RngRule] = {}


def rng_function(*fns: Any):
    def register(rule: RngRule) -> RngRule:
        for fn in fns:
            RNG_FUNCTIONS[fn] = rule
        return rule

    return register


# torch wraps some functions in `_disable_dynamo` (and torch.testing re-wraps manual_seed):
# the wrapper only calls the function, so the wrapped one's rule applies.
_DISABLE_DYNAMO_CODE = torch._compile._disable_dynamo(lambda: None).__code__


def rng_function_of(value: Any) -> Any | None:
    """The registered RNG function `value` is (or wraps through _disable_dynamo), or None."""
    for _ in range(4):
        if in_rule_table(value, RNG_FUNCTIONS):
            return value
        if getattr(value, "__code__", None) is not _DISABLE_DYNAMO_CODE:
            return None
        value = getattr(value, "__wrapped__", None)
    return None


class RngStateVariable(VariableTracker):
    """The ByteTensor torch.get_rng_state() returned, known by the state it names."""

    def __init__(self, state: RngState) -> None:
        super().__init__()
        self.state = state

    def python_type(self) -> type:
        return torch.Tensor

    def var_getattr(self, tx, name):
        raise Unsupported(
            f"using an RNG state read in the trace ({self.state.describe()}) other than "
            "passing it to torch.set_rng_state"
        )

    def __repr__(self) -> str:
        return f"RngStateVariable({self.state.describe()})"


class DefaultGeneratorVariable(VariableTracker):
    """What torch.manual_seed returns (the default generator): only droppable in a trace."""

    def python_type(self) -> type:
        return torch.Generator


class RngFunctionVariable(CallableVariable):
    def call_function(self, tx, args, kwargs):
        return RNG_FUNCTIONS[self.fn](tx, args, kwargs)


@rng_function(torch.random.get_rng_state)
def _get_rng_state(tx, args, kwargs) -> VariableTracker:
    if args or kwargs:
        raise Unsupported("torch.get_rng_state() takes no arguments")
    return RngStateVariable(tx.output.rng.read())


@rng_function(torch.random.set_rng_state)
def _set_rng_state(tx, args, kwargs) -> VariableTracker:
    values = [*args, *kwargs.values()]
    if len(values) != 1 or not isinstance(values[0], RngStateVariable):
        raise Unsupported(
            "torch.set_rng_state() with a state not read by torch.get_rng_state() in the trace"
        )
    tx.output.rng.restore(values[0].state)
    return ConstantVariable(None)


@rng_function(torch.random.manual_seed)
def _manual_seed(tx, args, kwargs) -> VariableTracker:
    values = [*args, *kwargs.values()]
    if len(values) != 1 or not values[0].is_python_constant():
        raise Unsupported("torch.manual_seed() with a seed unknown at trace time")
    seed = values[0].as_python_constant()
    if type(seed) is not int:
        raise Unsupported(f"torch.manual_seed({seed!r}): only int seeds are traced")
    tx.output.rng.seed(seed)
    return DefaultGeneratorVariable()


# ---- wrapping real values (variables/builder.py) ----------------------------------------
def _is_rng_function(tx, value: Any, source) -> bool:
    return rng_function_of(value) is not None


@wrap_rule("rng_function", when=_is_rng_function)
def _wrap_rng_function(tx, value: Any, source) -> VariableTracker:
    guard_identity(tx, value, source)
    return RngFunctionVariable(rng_function_of(value))
