"""Frame locals are wrapped (and guarded) on first use, so unused arguments cost nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ember_bytecode_tracer.variables.base import VariableTracker

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator


class LazyLocal(VariableTracker):
    def __init__(self, value: Any, source: Source) -> None:
        super().__init__(source=source)
        self.value = value

    def __repr__(self) -> str:
        return f"LazyLocal({self.source})"


def resolve_local(tx: Translator, name: str) -> VariableTracker:
    value = tx.symbolic_locals[name]
    if isinstance(value, LazyLocal):
        value = tx.wrap(value.value, value.source)
        tx.symbolic_locals[name] = value
    return value


# ---- entries of containers read from the frame ---------------------------------------
# A list, tuple or dict passed in is guarded by its length (or keys) at once; an entry
# that is a plain constant is wrapped, and so guarded by value, only when the trace reads
# it: `d[1]` of `{1: 1, 2: 2}` does not pin `d[2]`. Any read of a container's whole
# `items` realizes every entry first, so code that walks them sees trackers, guarded.
_LAZY_TYPES = (int, float, bool, str, bytes, type(None))


class LazyEntry(VariableTracker):
    """An unread constant entry of a container read through `source`."""

    def __init__(self, tx: Translator, value: Any, source: Source) -> None:
        super().__init__(source=source)
        self.tx, self.value = tx, value

    def realize(self, tx: Translator | None = None) -> VariableTracker:
        return (tx or self.tx).wrap(self.value, self.source)

    def __repr__(self) -> str:
        return f"LazyEntry({self.source})"


def entry(tx: Translator, value: Any, source: Source) -> VariableTracker:
    """The tracker for a container's entry: lazy for a plain constant that stays one (an
    int the dynamic policy makes a SymInt input is wrapped now: it is a graph input)."""
    if type(value) not in _LAZY_TYPES or tx.output.dynamic.int_is_dynamic(source, value):
        return tx.wrap(value, source)
    return LazyEntry(tx, value, source)


class LazyEntries:
    """`items` (a list or a dict of trackers) whose LazyEntry values are realized when the
    whole is read; `entry_at` realizes one. `_items` is for reads of keys or length."""

    _items: Any
    _lazy: bool

    @property
    def items(self) -> Any:
        if self._lazy:
            self._lazy = False
            keys = self._items if isinstance(self._items, dict) else range(len(self._items))
            for k in keys:
                if isinstance(self._items[k], LazyEntry):
                    self._items[k] = self._items[k].realize()
        return self._items

    @items.setter
    def items(self, items: Any) -> None:
        self._items = items
        values = items.values() if isinstance(items, dict) else items
        self._lazy = any(isinstance(v, LazyEntry) for v in values)

    def entry_at(self, tx: Translator, key: Any) -> VariableTracker:
        """`_items[key]`, realized (raises like `_items[key]` when absent)."""
        value = self._items[key]
        if isinstance(value, LazyEntry):
            value = self._items[key] = value.realize(tx)
        return value
