"""`inspect.signature(f)` of a function or class the trace knows: answered at trace time.

Libraries count a callback's parameters to decide how to call it (HF's chunked feed-forward),
read a parameter's default or kind, or bind arguments to names. The signature of a known
function or class cannot change without its identity guard failing, and `inspect.Signature`
and `inspect.Parameter` are immutable, so both are constants of the trace, read now and
baked into what the graph returns. `Signature.bind()` binds trackers to names as eager binds
values; the `inspect.BoundArguments` it makes is an object of the trace (its `arguments` a
dict the code may change), rebuilt after the graph (recipe_rules.py).
"""

from __future__ import annotations

import inspect
import types
from typing import Any

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builtins import rule
from ember_bytecode_tracer.variables.constant import (
    ConstantVariable,
    is_constant_value,
    is_enum_member,
    register_constant_kind,
)
from ember_bytecode_tracer.variables.dicts import ConstDictVariable
from ember_bytecode_tracer.variables.functions import (
    NestedUserFunctionVariable,
    UserFunctionVariable,
    UserMethodVariable,
)
from ember_bytecode_tracer.variables.lists import BoundMethodOfTracker, TupleVariable
from ember_bytecode_tracer.variables.objects import TypeVariable
from ember_bytecode_tracer.variables.typing_values import is_typing_value


class _NotKnown:
    """The default or annotation of a function made in the trace that is not a constant:
    its stand-in signature holds this, and reading it is a break."""

    def __repr__(self) -> str:
        return "<not known at trace time>"


NOT_KNOWN = _NotKnown()


def _signature_of(value: VariableTracker) -> inspect.Signature:
    if isinstance(value, UserFunctionVariable):
        return inspect.signature(value.fn)
    if isinstance(value, UserMethodVariable):
        parameters = list(inspect.signature(value.fn).parameters.values())
        return inspect.Signature(parameters[1:])  # bound: self is not a parameter
    if isinstance(value, NestedUserFunctionVariable):
        return inspect.signature(_stand_in(value))
    if isinstance(value, TypeVariable) and value.source is not None:
        # the class is guarded by identity; its constructor's parameters are its own
        try:
            return inspect.signature(value.cls)
        except (TypeError, ValueError) as exc:
            raise TracedException(type(exc), *exc.args) from None
    raise Unsupported(f"inspect.signature() of {value}")


def _known(tracker: VariableTracker) -> Any:
    return tracker.as_python_constant() if tracker.is_python_constant() else NOT_KNOWN


def _stand_in(value: NestedUserFunctionVariable) -> Any:
    # A function with the same code object has the same parameters; the defaults and
    # annotations the trace knows as constants are theirs, the others NOT_KNOWN.
    fn = types.FunctionType(value.code, {}, value.qualname)
    fn.__defaults__ = tuple(_known(d) for d in value.defaults) or None
    fn.__kwdefaults__ = {n: _known(d) for n, d in value.kwdefaults.items()} or None
    fn.__annotations__ = {n: _known(a) for n, a in value.annotations.items()}
    return fn


def _is_inspect_value(value: Any) -> bool:
    return type(value) in (inspect.Signature, inspect.Parameter)


def _readable(value: Any) -> bool:
    """What a signature's attribute may be to be answered now: immutable, or a class."""
    return (
        is_constant_value(value)
        or is_enum_member(value)  # Parameter.kind
        or isinstance(value, type)  # Parameter.empty, an annotation
        or is_typing_value(value)
        or _is_inspect_value(value)
    )


class InspectConstantVariable(ConstantVariable):
    """An `inspect.Signature` or `inspect.Parameter`: immutable, its attributes read now."""

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in ("bind", "bind_partial") and type(self.value) is inspect.Signature:
            return BoundMethodOfTracker(self, name)
        try:
            attribute = getattr(self.value, name)
        except AttributeError as exc:
            raise TracedException(AttributeError, *exc.args) from None
        if isinstance(attribute, types.MappingProxyType):  # Signature.parameters
            return ConstDictVariable({n: ConstantVariable(p) for n, p in attribute.items()})
        if attribute is NOT_KNOWN:
            raise Unsupported(f"inspect.Parameter.{name} of a function made in the trace")
        if _readable(attribute):
            return tx.wrap(attribute, None)
        if callable(attribute):
            return super().var_getattr(tx, name)
        raise Unsupported(f"inspect.{type(self.value).__name__}.{name}: not a constant")

    def call_method(self, tx, name, args, kwargs):
        if name in ("bind", "bind_partial"):
            try:
                bound = getattr(self.value, name)(*args, **kwargs)
            except TypeError as exc:  # missing or surplus arguments: as eager raises it
                raise TracedException(TypeError, *exc.args) from None
            return BoundArgumentsVariable(self.value, _arguments(bound))
        return super().call_method(tx, name, args, kwargs)

    def __repr__(self) -> str:
        return f"InspectConstantVariable({self.value})"


register_constant_kind(_is_inspect_value, InspectConstantVariable)


def _arguments(bound: inspect.BoundArguments) -> ConstDictVariable:
    """The `arguments` of a binding of trackers: *args as a tuple, **kwargs as a dict."""
    items = {}
    for name, value in bound.arguments.items():
        if isinstance(value, tuple):
            value = TupleVariable(list(value))
        elif isinstance(value, dict):
            value = ConstDictVariable(value)
        items[name] = value
    return ConstDictVariable(items)


class BoundArgumentsVariable(VariableTracker):
    """An `inspect.BoundArguments` made in the trace: its signature (a constant) and its
    `arguments` dict, which the code may change or (apply_defaults) replace."""

    def __init__(self, signature: inspect.Signature, arguments: ConstDictVariable) -> None:
        super().__init__()
        self.signature = signature
        self.arguments = arguments

    def python_type(self) -> type:
        return inspect.BoundArguments

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "arguments":
            return self.arguments
        if name == "signature":
            return ConstantVariable(self.signature)
        if name in ("args", "kwargs"):
            return _args_or_kwargs(tx, self, name)
        if name == "apply_defaults":
            return BoundMethodOfTracker(self, name)
        raise Unsupported(f"inspect.BoundArguments.{name} at trace time")

    def call_method(self, tx, name, args, kwargs):
        if name == "apply_defaults" and not args and not kwargs:
            return self._apply_defaults()
        raise Unsupported(f"inspect.BoundArguments.{name} at trace time")

    def _apply_defaults(self) -> VariableTracker:
        # as eager does: a new dict, in the signature's order, missing ones filled in
        items = self.arguments.items
        filled = {}
        for name, parameter in self.signature.parameters.items():
            if name in items:
                filled[name] = items[name]
            elif parameter.kind is inspect.Parameter.VAR_POSITIONAL:
                filled[name] = TupleVariable([])
            elif parameter.kind is inspect.Parameter.VAR_KEYWORD:
                filled[name] = ConstDictVariable({})
            elif parameter.default is not inspect.Parameter.empty:
                if not _readable(parameter.default) or parameter.default is NOT_KNOWN:
                    raise Unsupported("apply_defaults() with a default that is not a constant")
                filled[name] = ConstantVariable(parameter.default)
        self.arguments = ConstDictVariable(filled)
        return ConstantVariable(None)

    def __repr__(self) -> str:
        return f"BoundArgumentsVariable({self.signature})"


def _args_or_kwargs(tx, bound: BoundArgumentsVariable, name: str) -> VariableTracker:
    """BoundArguments.args / .kwargs, computed by inspect itself over the trackers (the
    *args tuple's and **kwargs dict's items unpacked, so that it can spread them)."""
    plain: dict[str, Any] = {}
    for key, value in bound.arguments.items.items():
        kind = bound.signature.parameters[key].kind if key in bound.signature.parameters else None
        if kind is inspect.Parameter.VAR_POSITIONAL:
            value = tuple(value.unpack(tx))
        elif kind is inspect.Parameter.VAR_KEYWORD:
            if not isinstance(value, ConstDictVariable):
                raise Unsupported("BoundArguments.kwargs of a **kwargs that is not a dict")
            value = {k: value.items[k] for k in value.items}
        plain[key] = value
    result = getattr(inspect.BoundArguments(bound.signature, plain), name)
    if name == "args":
        return TupleVariable(list(result))
    return ConstDictVariable(result)


@rule(inspect.signature)
def _signature(tx, args, kwargs):
    if kwargs or len(args) != 1:
        raise Unsupported("inspect.signature() with options")
    return ConstantVariable(_signature_of(args[0]))
