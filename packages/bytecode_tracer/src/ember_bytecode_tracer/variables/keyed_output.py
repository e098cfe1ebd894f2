"""Model outputs that are both a dataclass and an ordered dict (HuggingFace `ModelOutput`).

Such an object is built from keyword fields; its dict holds the fields that are not None, in
field order, and integer indexing goes through that tuple. While every field but the first
is None and the first is not a tensor, its `__post_init__` may reinterpret the first field
as key/value pairs: such objects are a graph break on first use, as any other.

Writes follow the class's own `__setitem__`/`__setattr__` (both set the dict entry and the
attribute; an attribute write sets the entry only for a field and a value that is not None):
the tracker keeps the dict's entries and the attributes apart, as the object does, and the
runner replays those effects on the rebuilt object in their order, with the C methods the
class's own reach (the dict base's `__setitem__`, `object.__setattr__`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.constructed import ConstructedObjectVariable
from ember_bytecode_tracer.variables.lists import ListVariable, TupleVariable
from ember_bytecode_tracer.variables.objects import TypeVariable, constructor
from ember_bytecode_tracer.variables.tensor import TensorVariable

# (module prefix, class name) of base classes with these semantics.
KEYED_OUTPUT_BASES = {("transformers.utils.generic", "ModelOutput")}


def is_keyed_output_class(cls: type) -> bool:
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls) and issubclass(cls, dict)):
        return False
    return any((base.__module__, base.__name__) in KEYED_OUTPUT_BASES for base in cls.__mro__)


def _dict_setitem(cls: type) -> Callable:
    """The `__setitem__` of the dict class the keyed-output base derives from."""
    base = next(b for b in cls.__mro__ if (b.__module__, b.__name__) in KEYED_OUTPUT_BASES)
    return base.__mro__[1].__setitem__


def _is_none(value: VariableTracker) -> bool:
    return isinstance(value, ConstantVariable) and value.value is None


class KeyedOutputVariable(ConstructedObjectVariable):
    def __init__(self, cls, args, kwargs) -> None:
        super().__init__(cls, args, kwargs)
        self.entries: list[tuple[str, VariableTracker]] | None = None  # once written
        # (C setter, key, value) in order: the effects to replay on the rebuilt object
        self.writes: list[tuple[Callable, str, VariableTracker]] = []

    def _present(self) -> list[tuple[str, VariableTracker]]:
        """(key, value) of the dict's entries, in its order."""
        if self.entries is not None:
            return list(self.entries)
        return self._built()

    def _built(self) -> list[tuple[str, VariableTracker]]:
        """(name, value) of the fields the dict holds after construction, in field order."""
        names = self._fields()
        values = []
        for name in names:
            try:
                values.append(self._field_value(name))
            except Unsupported:
                values.append(ConstantVariable(None))  # an unset optional field
        first, rest = values[0], values[1:]
        if all(_is_none(v) for v in rest) and not isinstance(first, TensorVariable):
            raise Unsupported(
                f"{self.cls.__qualname__} built with only its first field, which is not a "
                "tensor (its __post_init__ may read it as key/value pairs)"
            )
        return [(n, v) for n, v in zip(names, values, strict=True) if not _is_none(v)]

    def _set_entry(self, key: str, value: VariableTracker) -> None:
        self.writes.append((_dict_setitem(self.cls), key, value))
        entries = self._present()
        keys = [k for k, _ in entries]
        if key in keys:  # an ordered dict keeps an existing key's place
            entries[keys.index(key)] = (key, value)
        else:
            entries.append((key, value))
        self.entries = entries

    def store_attribute(self, tx, name: str, value: VariableTracker) -> None:
        if self.source is not None:
            raise Unsupported(f"setting attribute {name!r} on a {self.cls.__qualname__}")
        if name in self._fields() and not _is_none(value):
            self._set_entry(name, value)
        self._set_attribute(name, value)

    def _set_attribute(self, name: str, value: VariableTracker) -> None:
        self.attrs[name] = value
        self.writes.append((object.__setattr__, name, value))

    def store_item(self, tx, key: VariableTracker, value: VariableTracker) -> None:
        name = key.as_python_constant() if key.is_python_constant() else None
        if self.source is not None or not isinstance(name, str):
            raise Unsupported(f"item assignment on a {self.cls.__qualname__}")
        self._present()  # refuses a first-field-only object before anything is written
        self._set_entry(name, value)
        self._set_attribute(name, value)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in self.attrs:  # written in the trace
            return self.attrs[name]
        if name in _METHODS:  # `out.to_tuple` as a value (3.12 loads methods this way)
            return BoundKeyedOutputMethod(self, name)
        if name not in self._fields():
            raise Unsupported(
                f"reading {self.cls.__qualname__}.{name} of an object built in the trace"
            )
        present = dict(self._built())  # the attribute as construction set it
        return present.get(name, ConstantVariable(None))

    def unpack(self, tx) -> list[VariableTracker]:
        return [ConstantVariable(n) for n, _ in self._present()]  # iterating a dict: its keys

    def call_method(self, tx, name, args, kwargs):
        if name == "__setitem__" and len(args) == 2 and not kwargs:
            self.store_item(tx, *args)
            return ConstantVariable(None)
        method = _METHODS.get(name)
        if method is None or kwargs:
            raise Unsupported(f"{self.cls.__qualname__}.{name} on an object built in the trace")
        return method(self, tx, *args)

    def __repr__(self) -> str:
        return f"KeyedOutputVariable({self.cls.__qualname__})"


class BoundKeyedOutputMethod(VariableTracker):
    def __init__(self, owner: KeyedOutputVariable, name: str) -> None:
        super().__init__()
        self.owner = owner
        self.name = name

    def call_function(self, tx, args, kwargs):
        return self.owner.call_method(tx, self.name, args, kwargs)


def _getitem(obj: KeyedOutputVariable, tx, key: VariableTracker) -> VariableTracker:
    index = key.as_python_constant()
    present = obj._present()
    if isinstance(index, str):
        found = dict(present)
        if index not in found:
            raise Unsupported(f"{obj.cls.__qualname__}[{index!r}]: no such key (KeyError in eager)")
        return found[index]
    values = [v for _, v in present]
    picked = values[index]
    return TupleVariable(picked) if isinstance(index, slice) else picked


def _contains(obj: KeyedOutputVariable, tx, key: VariableTracker) -> VariableTracker:
    return ConstantVariable(key.as_python_constant() in dict(obj._present()))


def _get(obj, tx, key, default=None) -> VariableTracker:
    found = dict(obj._present())
    fallback = default if default is not None else ConstantVariable(None)
    return found.get(key.as_python_constant(), fallback)


_METHODS = {
    "__getitem__": _getitem,
    "__contains__": _contains,
    "__len__": lambda obj, tx: ConstantVariable(len(obj._present())),
    "get": _get,
    "keys": lambda obj, tx: ListVariable([ConstantVariable(n) for n, _ in obj._present()]),
    "values": lambda obj, tx: ListVariable([v for _, v in obj._present()]),
    "items": lambda obj, tx: ListVariable(
        [TupleVariable([ConstantVariable(n), v]) for n, v in obj._present()]
    ),
    "to_tuple": lambda obj, tx: TupleVariable([v for _, v in obj._present()]),
}


@constructor("keyed_output")
def _construct_keyed_output(tx, kind: TypeVariable, args, kwargs) -> VariableTracker | None:
    if is_keyed_output_class(kind.cls):
        return KeyedOutputVariable(kind.cls, args, kwargs)
    return None
