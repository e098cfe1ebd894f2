"""collections.OrderedDict, defaultdict and deque built during a trace.

Both are dicts whose keys are constants (`ConstDictVariable`), with the few behaviours
that differ: OrderedDict's `move_to_end` and `popitem(last=...)`, defaultdict's missing-key
read, which calls the factory and stores its result as CPython does. They are rebuilt after
the graph by calling the class (a defaultdict with its factory, which must be known at trace
time). A deque is a list with its left-end methods (no `maxlen`: a graph break). Registered
as rules of the builtins table, keyed by the class.
"""

from __future__ import annotations

import collections
from typing import Any

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builtins import RULES, rule
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.dicts import ConstDictVariable
from ember_bytecode_tracer.variables.lists import ListVariable, TupleVariable


class OrderedDictVariable(ConstDictVariable):
    def __init__(self, items: dict[Any, VariableTracker], **kwargs: Any) -> None:
        super().__init__(items, dict_type=collections.OrderedDict, **kwargs)

    def call_method(self, tx, name, args, kwargs):
        if name == "move_to_end":
            key = args[0].as_python_constant()
            last = _flag(args[1] if len(args) > 1 else kwargs.get("last"), True)
            if key not in self.items:
                raise TracedException(KeyError, key)
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
            return TupleVariable([ConstantVariable(key), value])
        return super().call_method(tx, name, args, kwargs)

    def _record(self, tx) -> None:
        if self.source is not None:
            tx.output.side_effects.containers[self.source] = self


class DefaultDictVariable(ConstDictVariable):
    def __init__(self, factory: VariableTracker, items: dict[Any, VariableTracker]) -> None:
        real_factory = factory.as_python_constant()  # rebuilt as defaultdict(factory, ...)
        super().__init__(
            items, dict_type=lambda pairs: collections.defaultdict(real_factory, pairs)
        )
        self.factory = factory
        self.real_factory = real_factory

    def python_type(self) -> type:
        return collections.defaultdict

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        k = key.as_python_constant()
        if k not in self.items:
            if self.real_factory is None:
                raise TracedException(KeyError, k)
            self.items[k] = self.factory.call_function(tx, [], {})
        return self.items[k]

    def call_method(self, tx, name, args, kwargs):
        if name == "__getitem__":
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
    if not factory.is_python_constant():
        raise Unsupported("defaultdict() with a factory not known at trace time")
    return DefaultDictVariable(factory, _dict_items(tx, list(args[1:]), kwargs))


class DequeVariable(ListVariable):
    container_type = collections.deque

    def call_method(self, tx, name, args, kwargs):
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
        else:
            return super().call_method(tx, name, args, kwargs)
        self._record(tx)
        return ConstantVariable(None)


@rule(collections.deque)
def _deque(tx, args, kwargs):
    maxlen = args[1] if len(args) > 1 else kwargs.get("maxlen")
    if maxlen is not None and not (
        maxlen.is_python_constant() and maxlen.as_python_constant() is None
    ):
        raise Unsupported("deque(maxlen=...) built in the trace")
    iterable = args[0] if args else kwargs.get("iterable")
    return DequeVariable(iterable.unpack(tx) if iterable is not None else [])
