"""Graph-break directives user code calls: Ember's own `graph_break()` and any function
registered with `register_graph_break`, recognised by identity (never by name). Another
compiler's directive is registered by whoever names it (the conformance harness registers
Dynamo's); product code never imports that stack. The trace honours them in
`variables/compiler_directives.py`. Public: `ember.graph_break`, `ember.register_graph_break`.
"""

from __future__ import annotations

import inspect
import weakref
from typing import Any

import torch


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


# functions and classes the user put in the graph as they are (`allow_in_graph`): what
# runs inside them is not looked into, so a break directive called there is not honoured
_IN_GRAPH: weakref.WeakSet = weakref.WeakSet()


def allow_in_graph(fn: Any) -> Any:
    """Mark `fn` (an autograd.Function class) to stay one node of the graph even where
    what it runs asks for a graph break (torch.compiler.allow_in_graph's promise)."""
    _IN_GRAPH.add(fn)
    return fn


def is_allowed_in_graph(value: Any) -> bool:
    try:
        return value in _IN_GRAPH
    except TypeError:
        return False


def registered_reason(value: Any) -> str | None:
    """Why a call of `value` breaks the graph, when it is a registered directive."""
    entry = _BREAKS.get(id(value))
    return entry[1] if entry is not None and entry[0] is value else None


def registered_code_reason(code: Any) -> str | None:
    """The same, for the code object a call of a registered Python function runs."""
    for fn, reason in _BREAKS.values():
        if getattr(fn, "__code__", None) is code:
            return reason
    return None


def directive_reason(value: Any) -> str | None:
    reason = registered_reason(value)
    if reason is not None:
        return reason
    if isinstance(value, torch._ops.HigherOrderOperator):
        # torch.cond, torch.ops.higher_order.map_impl, ...: Ember has no subgraph capture
        # for them; the call runs as it is after the break (torch's own eager path)
        return f"higher-order operator {value.name()} is not captured by Ember: it runs as it is"
    if getattr(value, "_torchdynamo_disable", False) is True:
        name = getattr(value, "__qualname__", value)
        return f"{name} is wrapped by torch.compiler.disable: it runs as it is"
    return None


# A compiled function (what ember.compile returns) -> the function it compiles. Called
# inside another compile's trace it is that function, traced into the outer graph: the
# outermost compile decides, as nested torch.compile calls do.
_COMPILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def register_compiled(wrapper: Any, fn: Any) -> None:
    _COMPILED[wrapper] = fn


def compiled_original(value: Any) -> Any:
    """The function a compiled function wraps, or None for anything else."""
    if inspect.isfunction(inspect.getattr_static(type(value), "__hash__", None)):
        return None  # a user's hash is not run (it is no compiled function's wrapper)
    try:
        return _COMPILED.get(value)
    except TypeError:  # unhashable or not weak-referenceable
        return None
