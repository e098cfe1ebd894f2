"""Graph-break directives user code calls: Ember's own `graph_break()` and any function
registered with `register_graph_break`, recognised by identity (never by name). Another
compiler's directive is registered by whoever names it (the conformance harness registers
Dynamo's); product code never imports that stack. The trace honours them in
`variables/compiler_directives.py`. Public: `ember.graph_break`, `ember.register_graph_break`.
"""

from __future__ import annotations

from typing import Any


def graph_break() -> None:
    """Ends the graph where it is called under Ember; does nothing when run eagerly."""


# id(function) -> (function, why the trace stops at its call); the function is kept alive
_BREAKS: dict[int, tuple[Any, str]] = {}


def register_graph_break(fn: Any, reason: str | None = None) -> None:
    """Make calls of `fn` (by identity) a graph break under Ember."""
    if not callable(fn):
        raise TypeError(f"register_graph_break takes a function, got {type(fn).__name__}")
    name = getattr(fn, "__qualname__", repr(fn))
    _BREAKS[id(fn)] = (fn, reason or f"{name}() was called: a graph break asked for")


register_graph_break(graph_break, "graph_break() was called")


def directive_reason(value: Any) -> str | None:
    entry = _BREAKS.get(id(value))
    if entry is not None and entry[0] is value:
        return entry[1]
    if getattr(value, "_torchdynamo_disable", False) is True:
        name = getattr(value, "__qualname__", value)
        return f"{name} is wrapped by torch.compiler.disable: it runs as it is"
    return None
