"""Iterators over sequences whose items are known at trace time (for-loops unroll)."""

from __future__ import annotations

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker


class ListIteratorVariable(VariableTracker):
    """`kind`: the type of the iterator eager code has here, when it is a plain iterator
    over a sequence (`iter(a_list)`: list_iterator), so that it can leave the trace as one
    (iterator_recipes.py); None for the others (zip, enumerate...)."""

    def __init__(self, items: list[VariableTracker], kind: type | None = None) -> None:
        super().__init__()
        self.items = list(items)
        self.index = 0
        self.kind = kind

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
        return self.kind or type(iter([]))

    def call_method(self, tx, name, args, kwargs):
        if name == "__next__":
            item = self.next(tx)
            if item is None:
                raise TracedException(StopIteration)
            return item
        raise Unsupported(f"iterator.{name}")


class LiveListIterator(ListIteratorVariable):
    """iter(list): reads the list at each step by position, as CPython's list iterator does,
    so a loop body that assigns, appends or pops items sees them (a snapshot would not)."""

    def __init__(self, items: list[VariableTracker]) -> None:
        VariableTracker.__init__(self)
        self.live = items  # the list tracker's own item list, mutated in place
        self.index = 0
        self.kind = None

    @property
    def items(self) -> list[VariableTracker]:
        return self.live

    def next(self, tx=None) -> VariableTracker | None:
        if self.index >= len(self.live):
            return None
        item = self.live[self.index]
        self.index += 1
        return item

    def unpack(self, tx) -> list[VariableTracker]:
        rest = list(self.live[self.index :])
        self.index = len(self.live)
        return rest


class DictViewIterator(ListIteratorVariable):
    """iter(d.keys() / d.values() / d.items()): the values read when reached; a dict that
    changed size or keys during the loop is a graph break (eager raises RuntimeError)."""

    def __init__(self, entries: dict, make_item) -> None:
        super().__init__([])
        self.entries = entries  # the dict tracker's own item dict, mutated in place
        self.keys = list(entries)
        self.make_item = make_item

    def next(self, tx=None) -> VariableTracker | None:
        if list(self.entries) != self.keys:
            raise Unsupported("dict changed size or keys during iteration")
        if self.index >= len(self.keys):
            return None
        key = self.keys[self.index]
        self.index += 1
        return self.make_item(key, self.entries[key])

    def unpack(self, tx) -> list[VariableTracker]:
        rest = []
        while (item := self.next(tx)) is not None:
            rest.append(item)
        return rest


# iter() of these gives an iterator that can be made again from the remaining items
_REBUILT_KINDS = {list: type(iter([])), tuple: type(iter(()))}


def sequence_iterator_kind(value: VariableTracker) -> type | None:
    """The type of `iter(value)` when it is a plain list or tuple iterator, else None."""
    try:
        return _REBUILT_KINDS.get(value.python_type())
    except Unsupported:
        return None
