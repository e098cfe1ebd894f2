"""Which cache entries of a code object count against the cache limit for a frame.

One code object can be many functions: a decorator's `wrapper` (transformers'
`can_return_tuple`, `deprecate_kwarg`...) is one code object with a different closure per
decorated function. A trace pins such a frame's identity through ID_MATCH guards on its
locals (closure variables included: `L['func'] is <the decorated function>`). Entries that
pin other objects are other functions, not recompiles of this one: the limit counts only
the entries whose pinned locals are the frame's (its *group*), so calling many decorated
functions never exhausts it, while a frame whose guards keep failing for the same function
still gives up after `limit` tries.
"""

from __future__ import annotations

from typing import Any

from ember_bytecode_tracer.guards import Guard, GuardKind, LocalSource


def pinned_locals(guards: list[Guard]) -> tuple[tuple[str, Any], ...]:
    """(local name, object) for each frame local a trace guarded by identity."""
    return tuple(
        (g.source.name, g.expected)
        for g in guards
        if g.kind is GuardKind.ID_MATCH and isinstance(g.source, LocalSource)
    )


def in_group(entry: Any, f_locals: dict[str, Any]) -> bool:
    """Whether `entry` was compiled for the objects this frame's locals hold (entries made
    elsewhere, without a record, count for every frame)."""
    record = getattr(entry, "record", None)
    pinned = getattr(record, "pinned_locals", ())
    return all(name in f_locals and f_locals[name] is obj for name, obj in pinned)


def group_entries(entries: tuple, f_locals: dict[str, Any]) -> list:
    return [entry for entry in entries if in_group(entry, f_locals)]


def group_key(f_locals: dict[str, Any], entries: tuple) -> tuple:
    """A hashable name of the frame's group, for warning once per group."""
    names = sorted({n for e in entries for n, _ in getattr(e.record, "pinned_locals", ())})
    return tuple((n, id(f_locals.get(n))) for n in names)
