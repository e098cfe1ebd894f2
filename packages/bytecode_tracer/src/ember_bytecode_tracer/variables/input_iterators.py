"""C iterators passed into the frame whose items are plain values: a range or str/bytes
iterator, itertools.count. Their position is guarded (`it.__reduce__()`'s arguments and
position equal what the trace saw); the trace reads items from a copy, and each item it
takes is a `next()` made on the real iterator after the graph, so the caller sees it
advanced as in eager. Returned, the iterator is the same object."""

from __future__ import annotations

import copy
import itertools
from typing import TYPE_CHECKING, Any

from ember_bytecode_tracer.guards import AttrSource, GuardKind, ItemSource, MethodCallSource
from ember_bytecode_tracer.variables.builder import guard, wrap_rule
from ember_bytecode_tracer.variables.constant import ConstantVariable, is_constant_value
from ember_bytecode_tracer.variables.iterator_tools import LazyIteratorVariable
from ember_bytecode_tracer.variables.logging_calls import DeferredCall

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator, VariableTracker

# every item of these is a constant, and __reduce__ gives their whole state
_KINDS = frozenset(
    type(it) for it in (
        iter(range(0)), iter(range(1 << 64)), iter(""), iter("\u00e9"), iter(b""),
        itertools.count(),
    )
)  # fmt: skip


class InputIteratorVariable(LazyIteratorVariable):
    def __init__(self, value: Any, *, source: Source) -> None:
        self._copy = copy.copy(value)  # advanced by the trace instead of the real one
        super().__init__(self._take, infinite=type(value) is itertools.count, what="input")
        self.source = source
        self._kind = type(value)

    def _take(self, tx: Translator) -> VariableTracker | None:
        try:
            item = next(self._copy)
        except StopIteration:
            return None
        tx.output.side_effects.calls.append(DeferredCall(self, "__next__", [], {}))
        return ConstantVariable(item)

    def python_type(self) -> type:
        return self._kind

    def __repr__(self) -> str:
        return f"InputIteratorVariable({self.source})"


def _is_plain_iterator(tx, value: Any, source) -> bool:
    if type(value) not in _KINDS or source is None:
        return False
    state = value.__reduce__()
    return all(is_constant_value(part) for part in state[1:])


@wrap_rule("input_iterator", when=_is_plain_iterator)
def _wrap_input_iterator(tx, value: Any, source: Source) -> VariableTracker:
    guard(tx, source, GuardKind.TYPE_MATCH, type(value))
    state = value.__reduce__()
    for index in range(1, len(state)):  # its arguments and position, not the callable
        _guard_equal(tx, ItemSource(MethodCallSource(source, "__reduce__"), index), state[index])
    return InputIteratorVariable(value, source=source)


def _guard_equal(tx, source: Source, value: Any) -> None:
    """EQUALS_MATCH, through a range's bounds and a tuple's items (a range is no guard
    constant)."""
    if type(value) is range:
        guard(tx, source, GuardKind.TYPE_MATCH, range)
        for bound in ("start", "stop", "step"):
            guard(tx, AttrSource(source, bound), GuardKind.EQUALS_MATCH, getattr(value, bound))
    elif type(value) is tuple:
        guard(tx, source, GuardKind.LEN_MATCH, (tuple, len(value)))
        for i, item in enumerate(value):
            _guard_equal(tx, ItemSource(source, i), item)
    else:
        guard(tx, source, GuardKind.EQUALS_MATCH, value)
