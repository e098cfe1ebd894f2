"""Iterators over sequences whose items are known at trace time (for-loops unroll)."""

from __future__ import annotations

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker


class ListIteratorVariable(VariableTracker):
    def __init__(self, items: list[VariableTracker]) -> None:
        super().__init__()
        self.items = list(items)
        self.index = 0

    def next(self, tx=None) -> VariableTracker | None:
        """The next item, or None when exhausted (lazy subclasses need `tx`)."""
        if self.index >= len(self.items):
            return None
        item = self.items[self.index]
        self.index += 1
        return item

    def unpack(self, tx) -> list[VariableTracker]:
        rest = self.items[self.index :]
        self.index = len(self.items)
        return rest

    def python_type(self) -> type:
        return type(iter([]))

    def call_method(self, tx, name, args, kwargs):
        if name == "__next__":
            item = self.next(tx)
            if item is None:
                raise Unsupported("StopIteration from next() at trace time")
            return item
        raise Unsupported(f"iterator.{name}")
