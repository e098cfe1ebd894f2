"""What user code tells the compiler about compiling, honoured by the trace.

- `graph_break()` (this module's, re-exported as `ember_bytecode_tracer.graph_break`), and any
  function registered with `register_graph_break` (recognised by identity): a graph break
  where it is called. Another compiler's directive is registered by whoever names it (the
  conformance harness registers Dynamo's); product code never imports that stack.
- a function wrapped by `torch.compiler.disable`: a graph break at the call, and the
  function's own frame is never compiled (it runs as it is), recognised by the marker the
  wrapper carries.
"""

from __future__ import annotations

from typing import Any

import ember_frame_hook as fh
from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import guard_identity, wrap_rule


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


class CompilerDirectiveVariable(VariableTracker):
    """A call the trace must not go through: calling it is a graph break."""

    def __init__(self, fn: Any, reason: str) -> None:
        super().__init__()
        self.fn = fn
        self.reason = reason

    def python_type(self) -> type:
        return type(self.fn)

    def as_python_constant(self) -> Any:
        return self.fn

    def call_function(self, tx, args, kwargs):
        inner = getattr(self.fn, "_torchdynamo_orig_callable", None)
        code = getattr(inner, "__code__", None)
        if code is not None:  # run eagerly after the break: its frame is not compiled either
            fh.skip_code(code)
        raise Unsupported(self.reason)

    def __repr__(self) -> str:
        return f"CompilerDirectiveVariable({getattr(self.fn, '__qualname__', self.fn)})"


def _is_directive(tx, value: Any, source) -> bool:
    return callable(value) and directive_reason(value) is not None


@wrap_rule("compiler_directive", when=_is_directive)
def _wrap_directive(tx, value: Any, source) -> VariableTracker:
    guard_identity(tx, value, source)
    return CompilerDirectiveVariable(value, directive_reason(value))
