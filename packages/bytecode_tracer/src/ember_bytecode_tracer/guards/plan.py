"""Which guards a compiled guard checks, and in what order.

Duplicates go (the first keeps its user_location), as do checks another guard on the same
source already implies (a TYPE_MATCH next to a TENSOR_MATCH of that class, a NOT_NONE next
to anything that pins a non-None value). The rest run cheapest cost class first, shallow
sources before deep ones within a class (a base's type test before reads through it), and
otherwise in the order the tracer recorded them.
"""

from __future__ import annotations

from collections.abc import Iterable

from ember_bytecode_tracer.guards.checks import cost
from ember_bytecode_tracer.guards.guard import Guard, GuardKind
from ember_bytecode_tracer.guards.sources import Source

_NONE_TYPE = type(None)


def plan(guards: Iterable[Guard]) -> tuple[Guard, ...]:
    unique = list(dict.fromkeys(guards))
    implied: dict[Source, set[type]] = {}
    for guard in unique:
        pinned = implied_type(guard)
        if pinned is not None and guard.kind is not GuardKind.TYPE_MATCH:
            implied.setdefault(guard.source, set()).add(pinned)
    kept = [g for g in unique if not _subsumed(g, unique, implied.get(g.source, set()))]
    return tuple(sorted(kept, key=lambda g: (cost(g), g.source.depth())))


def implied_type(guard: Guard) -> type | None:
    """The exact class a passing guard proves its value has, if it proves one."""
    kind, expected = guard.kind, guard.expected
    if kind is GuardKind.TYPE_MATCH:
        return expected
    if kind is GuardKind.TENSOR_MATCH:
        return expected.tensor_type
    if kind in (GuardKind.LEN_MATCH, GuardKind.DICT_KEYS):
        return expected[0]
    if kind is GuardKind.EQUALS_MATCH:
        return type(expected)
    if kind is GuardKind.NONE_MATCH:
        return _NONE_TYPE
    return None


def _subsumed(guard: Guard, guards: list[Guard], implied: set[type]) -> bool:
    if guard.kind is GuardKind.TYPE_MATCH:
        return guard.expected in implied
    if guard.kind is GuardKind.NOT_NONE:
        if implied - {_NONE_TYPE}:
            return True
        return any(
            g.source == guard.source
            and (
                (g.kind is GuardKind.ID_MATCH and g.expected is not None)
                or (g.kind is GuardKind.TYPE_MATCH and g.expected is not _NONE_TYPE)
                or g.kind is GuardKind.MODULE_TRAINING
            )
            for g in guards
        )
    return False
