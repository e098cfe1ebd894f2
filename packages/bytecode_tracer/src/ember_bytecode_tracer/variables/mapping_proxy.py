"""A read-only `types.MappingProxyType` read through a source (a class's `__dict__`): its
keys guarded in order, each value wrapped (and guarded) only when the code reads it.
Writes are not modelled (eager raises TypeError): a break. Returned, it is loaded again
through its source, the same proxy."""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.guards import GuardKind, ItemSource
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import guard, wrap_rule
from ember_bytecode_tracer.variables.constant import ConstantVariable, is_constant_value
from ember_bytecode_tracer.variables.lists import BoundMethodOfTracker

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source


_METHODS = frozenset(("__getitem__", "get", "__contains__", "__len__"))


class MappingProxyVariable(VariableTracker):
    def __init__(self, proxy: types.MappingProxyType, *, source: Source) -> None:
        super().__init__(source=source)
        self.proxy = proxy

    def python_type(self) -> type:
        return types.MappingProxyType

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in _METHODS:
            return BoundMethodOfTracker(self, name)
        raise Unsupported(f"attribute {name!r} of a mappingproxy")

    def python_len(self, tx) -> VariableTracker:
        return ConstantVariable(len(self.proxy))

    def unpack(self, tx) -> list[VariableTracker]:
        return [ConstantVariable(k) for k in self.proxy]

    def _item(self, tx, key: VariableTracker, default: VariableTracker | None):
        name = key.as_python_constant() if key.is_python_constant() else None
        if not is_constant_value(name):
            raise Unsupported("a mappingproxy read with a key unknown at trace time")
        if name not in self.proxy:
            if default is not None:
                return default
            raise TracedException(KeyError, name)
        return tx.wrap(self.proxy[name], ItemSource(self.source, name))

    def call_method(self, tx, name, args, kwargs):
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            return self._item(tx, args[0], None)
        if name == "get" and len(args) in (1, 2) and not kwargs:
            return self._item(tx, args[0], args[1] if len(args) == 2 else ConstantVariable(None))
        if name == "__contains__" and len(args) == 1 and args[0].is_python_constant():
            return ConstantVariable(args[0].as_python_constant() in self.proxy)
        if name == "__len__" and not args:
            return self.python_len(tx)
        raise Unsupported(f"mappingproxy.{name}")

    def __repr__(self) -> str:
        return f"MappingProxyVariable({self.source})"


def _has_constant_keys(tx, value: Any, source) -> bool:
    return source is not None and all(is_constant_value(k) for k in value)


@wrap_rule("mapping_proxy", types=types.MappingProxyType, exact=True, when=_has_constant_keys)
def _wrap_mapping_proxy(tx, value: types.MappingProxyType, source: Source) -> VariableTracker:
    guard(tx, source, GuardKind.DICT_KEYS, (types.MappingProxyType, tuple(value)))
    return MappingProxyVariable(value, source=source)
