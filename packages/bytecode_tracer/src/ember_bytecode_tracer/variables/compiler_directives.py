"""What user code tells torch.compile about compiling, honoured by the trace (without
importing the compiler stack: a function is recognized as the object its module holds under
its name, or by the marker torch.compiler.disable leaves on its wrapper).

- `torch._dynamo.graph_break()`: a graph break where it is called.
- a function wrapped by `torch.compiler.disable` / `torch._dynamo.disable`: a graph break
  at the call, and the function's own frame is never compiled (it runs as it is).
"""

from __future__ import annotations

import sys
from typing import Any

import ember_frame_hook as fh
from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import guard_identity, wrap_rule

# (module, qualname) of a directive -> why the trace stops at its call
DIRECTIVES = {
    ("torch._dynamo.decorators", "graph_break"): "torch._dynamo.graph_break() was called",
}


def directive_reason(value: Any) -> str | None:
    key = (getattr(value, "__module__", None), getattr(value, "__qualname__", None))
    try:
        reason = DIRECTIVES.get(key)
    except TypeError:  # an unhashable module or name
        return None
    # by identity: the object its module holds under that name (the module is loaded, since
    # the value came from it), so a look-alike function of the same names is not taken
    if reason is not None and getattr(sys.modules.get(key[0]), key[1], None) is value:
        return reason
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
