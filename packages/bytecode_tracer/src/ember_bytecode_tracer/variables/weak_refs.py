"""`weakref.ref(obj)` to an object made in the trace.

The object lives as long as the trace holds its tracker, so calling the reference in the
trace returns the object itself. A reference that leaves the compiled region is rebuilt as
`weakref.ref(obj)` of the object rebuilt after the graph (the same object every place that
holds it gets): it stays alive exactly while the program keeps the object, as in eager.
References with a callback, and references to other objects, are a graph break.
"""

from __future__ import annotations

import weakref

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.objects import TypeVariable, constructor
from ember_bytecode_tracer.variables.traced_objects import TracedObjectVariable


class WeakRefVariable(VariableTracker):
    def __init__(self, referent: TracedObjectVariable) -> None:
        super().__init__()
        self.referent = referent

    def python_type(self) -> type:
        return weakref.ref

    def call_function(self, tx, args, kwargs):
        if args or kwargs:
            raise Unsupported("calling a weak reference with arguments")
        return self.referent

    def __repr__(self) -> str:
        return f"WeakRefVariable({self.referent})"


@constructor("weak_reference")
def _construct_weak_reference(tx, kind: TypeVariable, args, kwargs) -> VariableTracker | None:
    if kind.cls is not weakref.ref:
        return None
    if len(args) != 1 or kwargs or not isinstance(args[0], TracedObjectVariable):
        raise Unsupported("weakref.ref other than to an object made in the trace, no callback")
    referent = args[0]
    if not referent.cls.__weakrefoffset__:
        raise Unsupported(f"weakref.ref of a {referent.cls.__qualname__} (no __weakref__ slot)")
    # CPython hands out one callback-free reference per object: so does the trace.
    made = referent.__dict__.get("weak_ref")
    if made is None:
        made = referent.weak_ref = WeakRefVariable(referent)
    return made
