"""Which cache entries of a code object count against the cache limit for a frame.

One code object can be many functions: a decorator's `wrapper` (transformers'
`can_return_tuple`, `deprecate_kwarg`...) is one code object with a different closure per
decorated function. A trace pins such a frame's identity through ID_MATCH guards on its
locals (closure variables included: `L['func'] is <the decorated function>`). Entries that
pin other objects are other functions, not recompiles of this one: the limit counts only
the entries whose pinned locals are the frame's (its *group*), so calling many decorated
functions never exhausts it, while a frame whose guards keep failing for the same function
still gives up after `limit` tries. A closure handed to a frame is guarded by its code and
cell contents (variables/functions.py), so what pins it is the object in its cell:
`L['f'].__closure__[0].cell_contents is <the decorated function>` counts as a pinned local.
"""

from __future__ import annotations

import builtins
from typing import Any

from ember_bytecode_tracer.guards import AttrSource, Guard, GuardKind, ItemSource, LocalSource

_NO_GLOBALS: dict[str, Any] = {"__builtins__": builtins}


def _through_cells(source: Any) -> bool:
    """A frame local, or what a closure held by one holds: `L['f']`,
    `L['f'].__closure__[0].cell_contents`, ... (a closure is guarded by its code and cell
    contents, so the object a decorator wrapped is pinned in its cell)."""
    while not isinstance(source, LocalSource):
        if not (
            isinstance(source, AttrSource)
            and source.attr == "cell_contents"
            and isinstance(source.base, ItemSource)
            and isinstance(source.base.base, AttrSource)
            and source.base.base.attr == "__closure__"
        ):
            return False
        source = source.base.base.base
    return True


def pinned_locals(guards: list[Guard]) -> tuple[tuple[Any, Guard], ...]:
    """(source, its ID_MATCH guard) for each frame local, or object in a closure cell a
    local holds, that a trace guarded by identity (the guard, which holds an object that
    may die weakly, not the object: a record must not keep it alive)."""
    return tuple(
        (g.source, g) for g in guards if g.kind is GuardKind.ID_MATCH and _through_cells(g.source)
    )


def _holds(f_locals: dict[str, Any], source: Any, guard: Guard) -> bool:
    try:
        return source.get(f_locals, _NO_GLOBALS) is guard.expected
    except Exception:  # a local missing, a closure of another shape: another function
        return False


def in_group(entry: Any, f_locals: dict[str, Any]) -> bool:
    """Whether `entry` was compiled for the objects this frame's locals hold (entries made
    elsewhere, without a record, count for every frame)."""
    record = getattr(entry, "record", None)
    pinned = getattr(record, "pinned_locals", ())
    return all(_holds(f_locals, source, guard) for source, guard in pinned)


def is_dead(entry: Any) -> bool:
    """Whether an object `entry`'s guards pin weakly died (guards/weak_pins.py): its guard
    can never pass again, so it holds a cache slot for nothing."""
    compiled = getattr(getattr(entry, "record", None), "guards", None)
    for guard in getattr(compiled, "guards", ()):
        ref = guard.weak_ref() if guard.kind in _PINNING else None
        if ref is not None and ref() is None:
            return True
    return False


_PINNING = (GuardKind.ID_MATCH, GuardKind.TYPE_MATCH)


def group_entries(entries: tuple, f_locals: dict[str, Any]) -> list:
    return [entry for entry in entries if in_group(entry, f_locals)]


def group_key(f_locals: dict[str, Any], entries: tuple) -> tuple:
    """A hashable name of the frame's group, for warning once per group."""
    sources = {s for e in entries for s, _ in getattr(e.record, "pinned_locals", ())}
    key = []
    for source in sorted(sources, key=str):
        try:
            key.append((str(source), id(source.get(f_locals, _NO_GLOBALS))))
        except Exception:
            key.append((str(source), None))
    return tuple(key)
