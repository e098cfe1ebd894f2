"""collections.OrderedDict, defaultdict and deque built during a trace.

Both are dicts whose keys are constants (`ConstDictVariable`), with the few behaviours
that differ: OrderedDict's `move_to_end` and `popitem(last=...)`, defaultdict's missing-key
read, which calls the factory and stores its result as CPython does. They are rebuilt after
the graph by calling the class (a defaultdict with its factory rebuilt, recipe_rules.py); a
defaultdict passed in is guarded like a dict, its factory by what it is. A deque is a list with its left-end methods (a `maxlen` only on one made in the trace). Registered
as rules of the builtins table, keyed by the class.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.guards import AttrSource, GuardKind, ItemSource
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import aliased_container, guard, wrap_rule
from ember_bytecode_tracer.variables.builtins import RULES, rule
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.dicts import (
    ConstDictVariable,
    build_dict,
    constant_keys,
    dict_key,
    key_tracker,
    missing_key,
)
from ember_bytecode_tracer.variables.lists import ListVariable, TupleVariable

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator


class OrderedDictVariable(ConstDictVariable):
    def __init__(self, items: dict[Any, VariableTracker], **kwargs: Any) -> None:
        super().__init__(items, dict_type=collections.OrderedDict, **kwargs)

    def call_method(self, tx, name, args, kwargs):
        if name == "move_to_end":
            key = dict_key(args[0], tx)
            last = _flag(args[1] if len(args) > 1 else kwargs.get("last"), True)
            if key not in self.items:
                raise missing_key(key)
            value = self.items.pop(key)
            self.items = {key: value, **self.items} if not last else {**self.items, key: value}
            self._record(tx)
            return ConstantVariable(None)
        if name == "popitem":
            last = _flag(args[0] if args else kwargs.get("last"), True)
            if not self.items:
                raise TracedException(KeyError, "dictionary is empty")
            key = list(self.items)[-1 if last else 0]
            value = self.items.pop(key)
            self._record(tx)
            return TupleVariable([key_tracker(key), value])
        return super().call_method(tx, name, args, kwargs)

    def _record(self, tx) -> None:
        if self.source is not None:
            tx.output.side_effects.containers[self.source] = self

    def copied(self) -> ConstDictVariable:
        return OrderedDictVariable(self.items)


class DefaultDictVariable(ConstDictVariable):
    """A defaultdict: its factory is any tracker (a class, a lambda or closure made in the
    trace, None); a missing key's read stores what calling it returns, as CPython does."""

    def __init__(
        self,
        factory: VariableTracker,
        items: dict[Any, VariableTracker],
        *,
        source: Source | None = None,
    ) -> None:
        super().__init__(items, source=source, dict_type=collections.defaultdict)
        self.factory = factory

    def python_type(self) -> type:
        return collections.defaultdict

    def as_python_constant(self) -> Any:
        constant_keys(self.items)
        pairs = {k: v.as_python_constant() for k, v in self.items.items()}
        return collections.defaultdict(self.factory.as_python_constant(), pairs)

    def _no_factory(self) -> bool:
        return self.factory.is_python_constant() and self.factory.as_python_constant() is None

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        k = dict_key(key, tx)
        if k not in self.items:
            if self._no_factory():
                raise missing_key(k)
            self.items[k] = self.factory.call_function(tx, [], {})
            if self.source is not None:
                tx.output.side_effects.containers[self.source] = self
        return self.items[k]

    def copied(self) -> ConstDictVariable:
        return DefaultDictVariable(self.factory, self.items)

    def var_getattr(self, tx, name):
        if name == "default_factory":
            return self.factory
        return super().var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name == "__missing__":
            if self._no_factory():
                raise Unsupported("defaultdict.__missing__ without a factory (a KeyError)")
            return self.getitem(tx, args[0])
        return super().call_method(tx, name, args, kwargs)


def _flag(value: VariableTracker | None, default: bool) -> bool:
    return default if value is None else bool(value.as_python_constant())


def _dict_items(tx, args, kwargs) -> dict[Any, VariableTracker]:
    return RULES[dict](tx, args, kwargs).items


@rule(collections.OrderedDict)
def _ordered_dict(tx, args, kwargs):
    return OrderedDictVariable(_dict_items(tx, args, kwargs))


@rule(collections.defaultdict)
def _defaultdict(tx, args, kwargs):
    factory = args[0] if args else ConstantVariable(None)
    if factory.is_python_constant():
        real = factory.as_python_constant()
        if real is not None and not callable(real):
            raise TracedException(TypeError, "first argument must be callable or None")
    return DefaultDictVariable(factory, _dict_items(tx, list(args[1:]), kwargs))


def _from_keys(make: Callable[[dict[Any, VariableTracker]], VariableTracker]):
    def run(tx, args, kwargs):
        value = args[1] if len(args) > 1 else kwargs.get("value", ConstantVariable(None))
        keys = [k.as_python_constant() for k in args[0].unpack(tx)]
        return make(dict.fromkeys(keys, value))  # one value object for every key, as in C

    return run


rule(dict.fromkeys)(_from_keys(ConstDictVariable))
rule(collections.OrderedDict.fromkeys)(_from_keys(OrderedDictVariable))
rule(collections.defaultdict.fromkeys)(
    _from_keys(lambda items: DefaultDictVariable(ConstantVariable(None), items))
)


@wrap_rule("defaultdict", types=collections.defaultdict, exact=True)
def _wrap_defaultdict(tx: Translator, value: Any, source: Source | None) -> VariableTracker:
    return aliased_container(tx, value, source, _build_defaultdict)


@wrap_rule("ordered_dict", types=collections.OrderedDict, exact=True)
def _wrap_ordered_dict(tx: Translator, value: Any, source: Source | None) -> VariableTracker:
    return aliased_container(tx, value, source, _build_ordered_dict)


def _build_ordered_dict(tx: Translator, value: Any, source: Source | None) -> VariableTracker:
    # Its items, keys guarded in order; attributes on the instance are not read through it.
    return OrderedDictVariable(build_dict(tx, value, source)._items, source=source)


def _build_defaultdict(tx: Translator, value: Any, source: Source | None) -> VariableTracker:
    plain = build_dict(tx, value, source)  # keys guarded, values wrapped
    factory_source = AttrSource(source, "default_factory") if source is not None else None
    factory = tx.wrap(value.default_factory, factory_source)
    return DefaultDictVariable(factory, plain._items, source=source)


class DequeVariable(ListVariable):
    """`maxlen` (a deque made in the trace): appends drop items from the other end, as
    CPython's do; growing it any other way is a break."""

    container_type = collections.deque
    maxlen: int | None = None

    def call_method(self, tx, name, args, kwargs):
        if self.maxlen is None:
            return self._call_unbounded(tx, name, args, kwargs)
        if name in ("insert", "__iadd__", "__imul__"):
            raise Unsupported(f"deque.{name} with maxlen")
        result = self._call_unbounded(tx, name, args, kwargs)
        excess = len(self.items) - self.maxlen
        if excess > 0 and name in _TRIMS:
            del self.items[_TRIMS[name](excess)]
            self._record(tx)
        return result

    def var_getattr(self, tx, name):
        if name == "maxlen":  # (a deque passed in is guarded to have none)
            return ConstantVariable(self.maxlen)
        return super().var_getattr(tx, name)

    def _call_unbounded(self, tx, name, args, kwargs):
        items = self.items
        if name == "appendleft":
            items.insert(0, args[0])
        elif name == "popleft":
            if not items:
                raise TracedException(IndexError, "pop from an empty deque")
            result = items.pop(0)
            self._record(tx)
            return result
        elif name == "extendleft":
            for item in args[0].unpack(tx):
                items.insert(0, item)
        elif name == "rotate":
            n = args[0].as_python_constant() if args else 1
            if items:
                n %= len(items)
                items[:] = items[-n:] + items[:-n] if n else items
        elif name == "pop" and args:
            raise Unsupported("deque.pop() takes no index")
        elif name == "copy" and not args:
            return bounded_deque(list(items), self.maxlen)
        else:
            return super().call_method(tx, name, args, kwargs)
        self._record(tx)
        return ConstantVariable(None)


# the items a bounded deque drops when `name` made it `excess` items too long
_TRIMS = {
    "append": lambda excess: slice(None, excess),
    "extend": lambda excess: slice(None, excess),
    "appendleft": lambda excess: slice(-excess, None),
    "extendleft": lambda excess: slice(-excess, None),
}


def bounded_deque(items: list[VariableTracker], maxlen: int | None) -> DequeVariable:
    """deque(items, maxlen): the last `maxlen` items, as CPython keeps."""
    made = DequeVariable(items[len(items) - maxlen :] if maxlen is not None else items)
    made.maxlen = maxlen
    return made


@wrap_rule("deque", types=collections.deque, exact=True)
def _wrap_deque(tx: Translator, value: Any, source: Source | None) -> VariableTracker | None:
    if value.maxlen is not None:
        return None  # appends drop items from the other end: not modelled
    return aliased_container(tx, value, source, _build_deque)


def _build_deque(tx: Translator, value: Any, source: Source | None) -> VariableTracker:
    """A deque passed in: its items, guarded as a list's (type and length) plus `maxlen is
    None`; the trace's pops and appends are written back to the same deque."""
    if source is not None:
        guard(tx, source, GuardKind.LEN_MATCH, (collections.deque, len(value)))
        tx.wrap(value.maxlen, AttrSource(source, "maxlen"))
    items = [
        tx.wrap(item, ItemSource(source, i) if source is not None else None)
        for i, item in enumerate(value)
    ]
    return DequeVariable(items, source=source)


@rule(collections.deque)
def _deque(tx, args, kwargs):
    given = args[1] if len(args) > 1 else kwargs.get("maxlen")
    maxlen = given.as_python_constant() if given is not None else None
    if maxlen is not None and (type(maxlen) is not int or maxlen < 0):
        raise Unsupported("deque() with a maxlen that is not an int >= 0")
    iterable = args[0] if args else kwargs.get("iterable")
    return bounded_deque(iterable.unpack(tx) if iterable is not None else [], maxlen)
