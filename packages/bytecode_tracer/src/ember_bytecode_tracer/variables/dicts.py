"""Dicts whose keys are constants known at trace time, tensors, or value objects made in
the trace.

A tensor key is a `TensorKey`: hashed and compared by the tensor's identity, as
Tensor.__hash__ (id) and dict lookup (identity first) do, its fake example standing for the
tensor (one per tensor object, see translator/handlers/operators.py `identity`). A frozen
dataclass made in the trace is a `ValueKey` (variables/constructed.py).
"""

from __future__ import annotations

import abc
import collections
import collections.abc
import inspect
import types
from typing import TYPE_CHECKING, Any

import torch

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.guards import DictKeysSource, GuardKind, ItemSource, dict_item_source
from ember_bytecode_tracer.variables.base import VariableTracker, attribute_of_c_instance
from ember_bytecode_tracer.variables.builder import aliased_container, guard, wrap_rule
from ember_bytecode_tracer.variables.constant import (
    ConstantVariable,
    is_constant_value,
    is_enum_member,
)
from ember_bytecode_tracer.variables.iterators import DictViewIterator
from ember_bytecode_tracer.variables.lazy import LazyEntries, entry
from ember_bytecode_tracer.variables.lists import BoundMethodOfTracker, ListVariable, TupleVariable
from ember_bytecode_tracer.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator


class TrackerKey:
    """A dict key that is a tracker of the trace, not a constant (the dict is rebuilt with
    the key's object as the tracker is rebuilt)."""

    __slots__ = ("tracker",)

    def __init__(self, tracker: VariableTracker) -> None:
        self.tracker = tracker


class TensorKey(TrackerKey):
    """A tensor as a dict key (its tracker inside): equal only to the same tensor."""

    __slots__ = ()

    def __hash__(self) -> int:
        return id(self.tracker.example)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorKey) and other.tracker.example is self.tracker.example

    def __repr__(self) -> str:
        return f"TensorKey({self.tracker!r})"


class ValueKey(TrackerKey):
    """An object made in the trace that hashes and compares by value (a frozen dataclass of
    constants): hashed and compared as `value`, an equal object made now, is; equal to a
    real object that equals it (a constant key of the same value)."""

    __slots__ = ("value",)

    def __init__(self, tracker: VariableTracker, value: Any) -> None:
        super().__init__(tracker)
        self.value = value

    def __hash__(self) -> int:
        return hash(self.value)

    def __eq__(self, other: object) -> bool:
        return self.value == (other.value if isinstance(other, ValueKey) else other)

    def __repr__(self) -> str:
        return f"ValueKey({self.value!r})"


class IdentityKey(TrackerKey):
    """An object read from the frame whose class hashes and compares by identity (object's
    own __hash__ and __eq__): equal to itself only, as the object would be (the real object
    as a key of a dict read from the frame, too); the trace guards its identity."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(self.tracker.value)

    def __eq__(self, other: object) -> bool:
        value = other.tracker.value if isinstance(other, IdentityKey) else other
        return value is self.tracker.value

    def __repr__(self) -> str:
        return f"IdentityKey({self.tracker!r})"


def hashes_by_identity(value: Any) -> bool:
    cls = type(value)
    return cls.__hash__ is object.__hash__ and cls.__eq__ is object.__eq__


# How a tracker that is not a constant becomes a dict key, by the tracker's class (the
# nearest along its MRO; a rule returns None where it cannot: the key must then be a
# constant); registered by the module that defines the tracker.
TRACKER_KEYS: dict[type, Any] = {TensorVariable: lambda tx, key: TensorKey(key)}


def dict_key(key: VariableTracker, tx: Translator | None = None) -> Any:
    """What `key` is in a dict tracker's items: the constant, or a TrackerKey (some need
    the translator, to guard what the key's lookups rely on)."""
    make = next((TRACKER_KEYS[k] for k in type(key).__mro__ if k in TRACKER_KEYS), None)
    made = make(tx, key) if make is not None else None
    return key.as_python_constant() if made is None else made


def key_tracker(key: Any) -> VariableTracker:
    """The tracker of a key of a dict tracker's items."""
    if isinstance(key, TrackerKey):
        return key.tracker
    make = KEY_TRACKERS.get(type(key))
    return ConstantVariable(key) if make is None else make(key)


# Trackers of keys compared by identity that are more than a constant (a function is
# called), by the key's exact type; registered by the module that defines the tracker.
KEY_TRACKERS: dict[type, Any] = {}


def missing_key(key: Any) -> Exception:
    """The KeyError eager raises for `key` (a tracker key's: a break, its object is not here)."""
    if isinstance(key, TrackerKey):
        return Unsupported(f"KeyError of {key!r}")
    return TracedException(KeyError, key)


def constant_keys(items: dict) -> None:
    if any(isinstance(k, TrackerKey) for k in items):
        raise Unsupported("a dict with keys made in the trace is not a constant")


class DictViewVariable(ListVariable):
    """d.keys() / d.values() / d.items(): a live view of its dict tracker (every read sees the
    dict as it is now, as eager's views do after `d[k] = v`), and iterated live (a loop over
    it sees the dict as the body changes it; a size change is a break, as eager raises)."""

    def __init__(self, owner: ConstDictVariable, method: str) -> None:
        self.owner = owner
        self.method = method  # "keys", "values" or "items"
        self.make_item = _VIEW_ITEMS[method]
        super().__init__([])

    @property
    def items(self) -> list[VariableTracker]:
        return [self.make_item(k, v) for k, v in self.owner.items.items()]

    @items.setter
    def items(self, value: list[VariableTracker]) -> None:
        pass  # the items are always the owner's

    def python_type(self) -> type:
        return type(getattr({}, self.method)())

    def as_python_constant(self) -> Any:
        constant_keys(self.owner.items)
        if self.method == "keys":  # the keys are constants even where the values are not
            return dict.fromkeys(self.owner.items).keys()
        return getattr(self.owner.as_python_constant(), self.method)()

    def call_method(self, tx, name, args, kwargs):
        if name in _LIST_ONLY:
            raise TracedException(AttributeError, f"dict view has no attribute {name!r}")
        return super().call_method(tx, name, args, kwargs)

    def iterate(self) -> DictViewIterator:
        return DictViewIterator(self.owner.items, self.make_item)


_LIST_ONLY = frozenset(
    ("append", "extend", "insert", "pop", "clear", "__setitem__", "reverse", "remove",
     "__delitem__", "sort", "index", "count")
)  # fmt: skip


_VIEW_ITEMS = {
    "keys": lambda k, v: key_tracker(k),
    "values": lambda k, v: v,
    "items": lambda k, v: TupleVariable([key_tracker(k), v]),
}


class ConstDictVariable(LazyEntries, VariableTracker):
    def __init__(
        self, items: dict[Any, VariableTracker], *, source: Source | None = None, dict_type=dict
    ) -> None:
        super().__init__(source=source)
        self.items = dict(items)
        self.dict_type = dict_type

    def python_type(self) -> type:
        return self.dict_type

    def as_python_constant(self) -> Any:
        constant_keys(self.items)
        return self.dict_type({k: v.as_python_constant() for k, v in self.items.items()})

    def truthiness(self, tx) -> bool:
        return bool(self._items)

    def unpack(self, tx) -> list[VariableTracker]:
        return [key_tracker(k) for k in self._items]

    def var_getattr(self, tx, name):
        return BoundMethodOfTracker(self, name)

    def has_attribute(self, name: str) -> bool | None:
        known = attribute_of_c_instance(self.python_type(), name)
        if known is None and self.source is None and self.python_type() in _FRESH:
            return hasattr(_FRESH[self.python_type()], name)  # built here: no attribute set
        return known

    def copied(self) -> ConstDictVariable:
        """`d.copy()`: dict.copy gives a plain dict (a subclass's too)."""
        return ConstDictVariable(self.items)

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        k = dict_key(key, tx)
        if k not in self._items:
            raise missing_key(k)  # the keys are guarded (or built here)
        return self.entry_at(tx, k)

    def call_method(self, tx, name, args, kwargs):
        items = self._items  # keys and length; values through entry_at (or self.items)
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name == "get":
            k = dict_key(args[0], tx)
            if k in items:
                return self.entry_at(tx, k)
            return args[1] if len(args) > 1 else ConstantVariable(None)
        if name in _VIEW_ITEMS:
            return DictViewVariable(self, name)
        if name in ("__contains__",):
            return ConstantVariable(dict_key(args[0], tx) in items)
        if name == "__len__":
            return ConstantVariable(len(items))
        if name == "copy" and not args and not kwargs:
            return self.copied()
        if name in ("__setitem__", "update", "pop", "setdefault", "__delitem__", "clear"):
            result = self._mutate(tx, name, args, kwargs)
            if self.source is not None:
                tx.output.side_effects.containers[self.source] = self
            return result
        raise Unsupported(f"dict.{name}")

    def _mutate(self, tx, name, args, kwargs):
        items = self.items
        if name == "__setitem__":
            items[dict_key(args[0], tx)] = args[1]
        elif name == "update":
            if args:
                items.update(_update_items(tx, args[0]))
            items.update(kwargs)
        elif name == "pop":
            k = dict_key(args[0], tx)
            if k in items:
                return items.pop(k)
            if len(args) > 1:
                return args[1]
            raise Unsupported(f"KeyError {k!r} at trace time")
        elif name == "setdefault":
            k = dict_key(args[0], tx)
            return items.setdefault(k, args[1] if len(args) > 1 else ConstantVariable(None))
        elif name == "__delitem__":
            del items[dict_key(args[0], tx)]
        elif name == "clear":
            items.clear()
        return ConstantVariable(None)

    def __repr__(self) -> str:
        return f"ConstDictVariable({self._items!r})"


_FRESH = {collections.OrderedDict: collections.OrderedDict()}


def _update_items(tx, other: VariableTracker) -> dict[Any, VariableTracker]:
    """What `d.update(other)` adds: a mapping's items, else an iterable of key/value pairs."""
    mapped = mapping_items(tx, other)
    return mapped if mapped is not None else pair_items(tx, other)


def pair_items(tx, other: VariableTracker) -> dict[Any, VariableTracker]:
    added = {}
    for pair in other.unpack(tx):
        parts = pair.unpack(tx)
        if len(parts) != 2:  # eager raises with the earlier pairs added: eager does it
            raise Unsupported("a dict built from an element that is not a pair")
        added[dict_key(parts[0], tx)] = parts[1]
    return added


def mapping_items(tx, other: VariableTracker) -> dict[Any, VariableTracker] | None:
    """A mapping's items as CPython's dict merge reads them (`dict(m)`, `d.update(m)`,
    `f(**m)`): a dict's own; a user's mapping (its class defines keys() in Python) through
    its keys() and [] in order; None for anything else (an iterable of pairs)."""
    if isinstance(other, ConstDictVariable):
        return other.items
    try:
        cls = other.python_type()
    except Unsupported:
        return None
    keys = inspect.getattr_static(cls, "keys", None)
    if keys is None:
        return None
    if not inspect.isfunction(keys) and _c_lookup(cls) and hasattr(other, "dict_contents"):
        # a dict subclass read from the frame whose keys() and [] are dict's (or
        # OrderedDict's): its entries, guarded by keys and values
        return other.dict_contents(tx).items
    if not inspect.isfunction(keys):  # a mapping of C (a mappingproxy): its own keys()
        raise Unsupported(f"dict merge of a {cls.__qualname__}")
    items = {}
    # Mapping's own keys() is a view whose iteration is the mapping's
    keys_of = (
        other if keys is collections.abc.Mapping.keys else other.call_method(tx, "keys", [], {})
    )
    for key in keys_of.unpack(tx):
        items[dict_key(key, tx)] = tx.subscript(other, key)
    return items


def _c_lookup(cls: type) -> bool:
    """A dict subclass whose merge reads entries through C (keys(), [] and iteration)."""
    return issubclass(cls, dict) and not any(
        inspect.isfunction(inspect.getattr_static(cls, name))
        for name in ("__getitem__", "__iter__")
    )


# ---- wrapping real values (variables/builder.py) ----------------------------------------
@wrap_rule("dict", types=dict, exact=True)
def _wrap_dict(tx: Translator, value: dict, source: Source | None) -> VariableTracker:
    return aliased_container(tx, value, source, build_dict)


def build_dict(tx: Translator, value: dict, source: Source | None) -> VariableTracker:
    if not all(
        is_constant_value(k)
        or _is_class_key(k)
        or is_enum_member(k)
        or _is_tensor(k)
        or _is_size(k)
        or hashes_by_identity(k)
        for k in value
    ):
        raise Unsupported("dict with non-constant keys")
    by_position = not all(is_constant_value(k) for k in value)
    if source is not None and not by_position:
        guard(tx, source, GuardKind.DICT_KEYS, (type(value), tuple(value.keys())))
    elif source is not None:  # classes or tensors as keys: each key by position
        guard(tx, source, GuardKind.LEN_MATCH, (type(value), len(value)))
    keys = [_key_of_entry(tx, source, i, k, by_position) for i, k in enumerate(value)]
    # keys without a literal (dtypes, devices, tensors) reach their values by position: the
    # guards above pin every key's position
    items = {
        key: entry(tx, v, dict_item_source(source, k, i))
        if source is not None
        else tx.wrap(v, None)
        for i, (key, (k, v)) in enumerate(zip(keys, value.items(), strict=True))
    }
    return ConstDictVariable(items, source=source)


def _is_tensor(key: Any) -> bool:
    return isinstance(key, torch.Tensor)


def _is_size(key: Any) -> bool:
    """A torch.Size of ints as a key (a cache by shape): compared by value, as a tuple."""
    return type(key) is torch.Size and all(type(d) is int for d in key)


def _key_of_entry(
    tx: Translator, source: Source | None, index: int, key: Any, by_position: bool
) -> Any:
    """A key of a dict read from the frame, guarded by position when the dict's keys are
    not all constants: a constant by value, a class by identity, a tensor as a graph input
    (the one placeholder of that tensor however reached, guarded to stay distinct), another
    object hashed by identity as its tracker (an IdentityKey, guarded by identity)."""
    if not by_position:
        return key
    if source is None:
        if not (is_constant_value(key) or _is_size(key) or _is_class_key(key)):
            raise Unsupported("a dict with tensor or object keys without a source")
        return key
    key_source = ItemSource(DictKeysSource(source), index)
    if _is_tensor(key) or not (is_constant_value(key) or _is_size(key) or _is_class_key(key)):
        # a tensor, or an object hashed by identity (its tracker: what is read from it
        # is guarded as anywhere else)
        return dict_key(tx.wrap(key, key_source), tx)
    by_value = is_constant_value(key) or _is_size(key)
    guard(tx, key_source, GuardKind.EQUALS_MATCH if by_value else GuardKind.ID_MATCH, key)
    return key


def _is_class_key(key: Any) -> bool:
    """A class, a typing special form or a Python function as a dict key (a table of
    handlers by type: pytree's registry): the dict is guarded by length and each key by
    identity at its position (each hashes and compares by identity)."""
    return (
        type(key) in (type, abc.ABCMeta)
        or type(key).__module__ == "typing"
        or type(key) is types.FunctionType
        or isinstance(key, _CALLABLE_KEYS)
    )


# C functions and methods, and torch operators, as keys of a table of handlers (each
# compares by identity; torch.masked's function table is keyed by all of them).
_CALLABLE_KEYS = (
    types.BuiltinFunctionType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    torch._ops.OpOverloadPacket,
    torch._ops.OpOverload,
)
