"""Dataclasses and namedtuples constructed during a trace.

The object is not built at trace time: the runner builds it by calling the class with the
rebuilt arguments, exactly as eager code would. The trace may read its fields where they
cannot differ from the arguments (namedtuples; dataclasses without __post_init__);
anything else on the object is a graph break, after which it is a real object.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.constant import ConstantVariable, is_constant_value


def is_namedtuple_class(cls: type) -> bool:
    return isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")


def is_constructible(cls: type) -> bool:
    return is_namedtuple_class(cls) or dataclasses.is_dataclass(cls)


class ConstructedObjectVariable(VariableTracker):
    def __init__(self, cls: type, args: list[VariableTracker], kwargs: dict[str, VariableTracker]):
        super().__init__()
        self.cls = cls
        self.args = args
        self.kwargs = kwargs

    def python_type(self) -> type:
        return self.cls

    def _fields(self) -> list[str]:
        if is_namedtuple_class(self.cls):
            return list(self.cls._fields)
        return [f.name for f in dataclasses.fields(self.cls) if f.init]

    def _field_value(self, name: str) -> VariableTracker:
        if name in self.kwargs:
            return self.kwargs[name]
        names = self._fields()
        if name in names and names.index(name) < len(self.args):
            return self.args[names.index(name)]
        default = _default_of(self.cls, name)
        if default is not _MISSING and is_constant_value(default):
            return ConstantVariable(default)
        raise Unsupported(f"field {name!r} of {self.cls.__qualname__} is not known at trace time")

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if hasattr(self.cls, "__post_init__") or name not in self._fields():
            raise Unsupported(
                f"reading {self.cls.__qualname__}.{name} of an object built in the trace"
            )
        return self._field_value(name)

    def unpack(self, tx) -> list[VariableTracker]:
        if not is_namedtuple_class(self.cls):
            raise Unsupported(f"iterating over a {self.cls.__qualname__}")
        return [self._field_value(n) for n in self._fields()]

    def call_method(self, tx, name, args, kwargs):
        if name == "__getitem__" and is_namedtuple_class(self.cls):
            return self.unpack(tx)[args[0].as_python_constant()]
        raise Unsupported(f"{self.cls.__qualname__}.{name} on an object built in the trace")

    def __repr__(self) -> str:
        return f"ConstructedObjectVariable({self.cls.__qualname__})"


_MISSING = object()


def _default_of(cls: type, name: str) -> Any:
    if is_namedtuple_class(cls):
        return cls._field_defaults.get(name, _MISSING)
    for f in dataclasses.fields(cls):
        if f.name == name and f.default is not dataclasses.MISSING:
            return f.default
    return _MISSING
