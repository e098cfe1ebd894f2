"""`inspect.signature(f)` of a function the trace knows: answered at trace time.

Libraries count a callback's parameters to decide how to call it (HF's chunked feed-forward);
the signature of a known function cannot change without the function's identity guard
failing, so it is a constant of the trace.
"""

from __future__ import annotations

import inspect
from typing import Any

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builtins import rule
from ember_bytecode_tracer.variables.constant import ConstantVariable, is_constant_value
from ember_bytecode_tracer.variables.dicts import ConstDictVariable
from ember_bytecode_tracer.variables.functions import (
    NestedUserFunctionVariable,
    UserFunctionVariable,
    UserMethodVariable,
)


def _signature_of(value: VariableTracker) -> inspect.Signature:
    if isinstance(value, UserFunctionVariable):
        return inspect.signature(value.fn)
    if isinstance(value, UserMethodVariable):
        parameters = list(inspect.signature(value.fn).parameters.values())
        return inspect.Signature(parameters[1:])  # bound: self is not a parameter
    if isinstance(value, NestedUserFunctionVariable):
        return inspect.signature(_stand_in(value))
    raise Unsupported(f"inspect.signature() of {value}")


def _stand_in(value: NestedUserFunctionVariable) -> Any:
    # A function with the same code object has the same parameters; defaults only mark
    # which parameters have one, so their count is what matters.
    import types

    fn = types.FunctionType(value.code, {}, value.qualname)
    fn.__defaults__ = tuple(None for _ in value.defaults) or None
    fn.__kwdefaults__ = {name: None for name in value.kwdefaults} or None
    return fn


class ParameterVariable(VariableTracker):
    def __init__(self, parameter: inspect.Parameter) -> None:
        super().__init__()
        self.parameter = parameter

    def python_type(self) -> type:
        return inspect.Parameter

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "name":
            return ConstantVariable(self.parameter.name)
        if name == "kind":
            return ConstantVariable(int(self.parameter.kind))
        if name == "default" and is_constant_value(self.parameter.default):
            return ConstantVariable(self.parameter.default)
        raise Unsupported(f"inspect.Parameter.{name} at trace time")


class SignatureVariable(VariableTracker):
    def __init__(self, signature: inspect.Signature) -> None:
        super().__init__()
        self.signature = signature

    def python_type(self) -> type:
        return inspect.Signature

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "parameters":
            return ConstDictVariable(
                {n: ParameterVariable(p) for n, p in self.signature.parameters.items()}
            )
        raise Unsupported(f"inspect.Signature.{name} at trace time")


@rule(inspect.signature)
def _signature(tx, args, kwargs):
    if kwargs or len(args) != 1:
        raise Unsupported("inspect.signature() with options")
    return SignatureVariable(_signature_of(args[0]))
