"""What user code tells the compiler about compiling, honoured by the trace.

- `graph_break()` and any function registered with `register_graph_break` (both in
  `ember_bytecode_tracer.directives`, recognised by identity): a graph break where it is
  called.
- a function wrapped by `torch.compiler.disable`: a graph break at the call, and the
  function's own frame is never compiled (it runs as it is), recognised by the marker the
  wrapper carries.
"""

from __future__ import annotations

from typing import Any

import ember_frame_hook as fh
from ember_bytecode_tracer.directives import compiled_original, directive_reason
from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import AttrSource
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import guard_identity, wrap_rule


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
    return callable(value) and (
        directive_reason(value) is not None or compiled_original(value) is not None
    )


@wrap_rule("compiler_directive", when=_is_directive)
def _wrap_directive(tx, value: Any, source) -> VariableTracker:
    guard_identity(tx, value, source)
    original = compiled_original(value)
    if original is not None:  # a compiled function: what it compiles, traced here
        inner_source = AttrSource(source, "_ember_original") if source is not None else None
        return tx.wrap(original, inner_source)
    return CompilerDirectiveVariable(value, directive_reason(value))
