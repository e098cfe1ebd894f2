"""What user code tells the compiler about compiling, honoured by the trace.

- `graph_break()` and any function registered with `register_graph_break` (both in
  `ember_bytecode_tracer.directives`, recognised by identity): a graph break where it is
  called.
- a function wrapped by `torch.compiler.disable`: a graph break at the call, and the
  function's own frame is never compiled (it runs as it is), recognised by the marker the
  wrapper carries.
"""

from __future__ import annotations

import types
from typing import Any

import ember_frame_hook as fh
from ember_bytecode_tracer.directives import compiled_original, directive_reason
from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import AttrSource, GuardKind
from ember_bytecode_tracer.variables.base import CallableVariable, VariableTracker
from ember_bytecode_tracer.variables.builder import guard, guard_identity, wrap_rule


class CompilerDirectiveVariable(CallableVariable):
    """A call the trace must not go through: calling it is a graph break."""

    def __init__(self, fn: Any, reason: str, source=None) -> None:
        # with a source, the call after the break loads the function the frame holds (a
        # disable wrapper is guarded by its code, not its identity: see below)
        super().__init__(fn, source=source)
        self.reason = reason

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


def _guard_disabled_wrapper(tx, value: Any, source) -> bool:
    """Guards a torch.compiler.disable wrapper by what the trace relies on (a break at the
    call; the wrapped code left uncompiled), not by identity: a function wrapped per call
    (`@disable` on a nested def) reuses the trace. The wrapper's code, its marker and the
    wrapped function's code are pinned; anything else it holds only matters when it runs,
    eagerly. False (nothing guarded) for other directives."""
    inner = getattr(value, "_torchdynamo_orig_callable", None)
    if not (
        source is not None
        and isinstance(value, types.FunctionType)
        and value.__dict__.get("_torchdynamo_disable") is True
        and isinstance(inner, types.FunctionType)
    ):
        return False
    guard(tx, AttrSource(source, "__code__"), GuardKind.ID_MATCH, value.__code__)
    guard(tx, AttrSource(source, "_torchdynamo_disable"), GuardKind.EQUALS_MATCH, True)
    inner_source = AttrSource(source, "_torchdynamo_orig_callable")
    guard(tx, AttrSource(inner_source, "__code__"), GuardKind.ID_MATCH, inner.__code__)
    return True


@wrap_rule("compiler_directive", when=_is_directive)
def _wrap_directive(tx, value: Any, source) -> VariableTracker:
    if not _guard_disabled_wrapper(tx, value, source):
        guard_identity(tx, value, source)
    original = compiled_original(value)
    if original is not None:  # a compiled function: what it compiles, traced here
        inner_source = AttrSource(source, "_ember_original") if source is not None else None
        return tx.wrap(original, inner_source)
    return CompilerDirectiveVariable(value, directive_reason(value), source)
