"""One identity per Python object a trace reads, however many ways it is reached.

Attribute writes are replayed by source (`SideEffects.attributes`) and reads look for a
pending write by source: an object reached two ways (an argument and a global) must use one
source for both, or a read through the second misses the write. The first source an object
is reached through is its canonical one; a second records an aliasing guard. Objects that
were distinct when traced must stay distinct when a write could be missed the other way, so
objects of a written object's type get a no-aliasing guard at the end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ember_bytecode_tracer.guards import Guard, GuardKind, is_frame_cell

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.output_graph import OutputGraph
    from ember_bytecode_tracer.variables.base import Translator, VariableTracker


def note_object(tx: Translator, value: Any, source: Source) -> None:
    """`value` (a module or plain object) was reached at `source`."""
    seen = tx.output.objects_by_id.get(id(value))
    if seen is None:
        tx.output.objects_by_id[id(value)] = (value, source)
    elif seen[0] is value and seen[1] != source:
        tx.output.add_guard(
            Guard(source, GuardKind.TENSOR_ALIASING, seen[1], user_location=tx.location())
        )


def canonical_source(tx: Translator, obj: VariableTracker) -> Source | None:
    """The source attribute writes and reads of `obj` are keyed by."""
    value = getattr(obj, "value", None)
    if value is None:
        value = getattr(obj, "module", None)
    if value is None:  # a tracker holding no object (a namedtuple's): the one it wrapped
        entry = tx.output.real_values.get(id(obj))
        value = entry[1] if entry is not None and entry[0] is obj else None
    seen = tx.output.objects_by_id.get(id(value)) if value is not None else None
    if seen is not None and seen[0] is value:
        return seen[1]
    return obj.source


def record_write(
    tx: Translator, obj: VariableTracker, name: str, value: VariableTracker, *, generic=False
) -> None:
    """`obj.name = value` on a real object: seen by later reads, replayed after the graph
    (with object.__setattr__ where `generic`: the class's Python __setattr__, which the
    trace ran or that the write went past, is not run again)."""
    effects = tx.output.side_effects
    key = (canonical_source(tx, obj), name)
    effects.attributes[key] = value
    if generic:
        effects.generic_attributes.add(key)
    else:
        effects.generic_attributes.discard(key)


def distinct_object_guards(output: OutputGraph) -> list[Guard]:
    """Objects of a type that had attributes written, distinct when traced, stay distinct."""
    # (the compiled frame's own cells are distinct by construction, and no guard reads them)
    by_source = {
        source: value
        for value, source in output.objects_by_id.values()
        if not is_frame_cell(source)
    }
    written = {type(by_source[s]) for s, _ in output.side_effects.attributes if s in by_source}
    guards = []
    for kind in written:
        sources = [s for s, v in by_source.items() if type(v) is kind]
        if len(sources) > 1:
            guards.append(Guard(sources[0], GuardKind.NO_TENSOR_ALIASING, tuple(sources[1:])))
    return guards
