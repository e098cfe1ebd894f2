"""`with obj:` over an object whose class defines `__enter__` and `__exit__` in Python: both
are inlined like any user method, the exception-free path only (leaving the block with an
exception raised at trace time is a graph break, as for every context). What they do to
global state is traced as it would be anywhere else (a `torch._C._set_grad_enabled` call
switches grad mode for the rest of the trace and goes into the graph)."""

from __future__ import annotations

import inspect
import types

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.contexts import ContextExitVariable


def python_context_methods(cls: type) -> bool:
    """Whether `cls` defines `__enter__` and `__exit__` as Python functions."""
    for name in ("__enter__", "__exit__"):
        try:
            method = inspect.getattr_static(cls, name)
        except AttributeError:
            return False
        if not isinstance(method, types.FunctionType):
            return False
    return True


class UserContextVariable(VariableTracker):
    """The context manager of a with-block whose methods are the user's Python code."""

    def __init__(self, obj: VariableTracker) -> None:
        super().__init__()
        self.obj = obj

    def enter(self, tx) -> VariableTracker:
        try:
            return self.obj.var_getattr(tx, "__enter__").call_function(tx, [], {})
        except Unsupported as exc:
            # the break's reason names the context manager (a subclass's reason is left as
            # it is: its words carry its meaning)
            if type(exc) is Unsupported:
                exc.reason = (
                    f"{self.obj.python_type()} not supported as a traced context manager: "
                    f"its __enter__ breaks the graph ({exc.reason})"
                )
            raise

    def exit_handler(self) -> VariableTracker:
        return ContextExitVariable(self)

    def exit(self, tx) -> None:
        none = [ConstantVariable(None)] * 3
        self.obj.var_getattr(tx, "__exit__").call_function(tx, none, {})

    def __repr__(self) -> str:
        return f"UserContextVariable({self.obj})"


def user_context(context: VariableTracker) -> VariableTracker:
    """`context` as a with-block can enter it, or a graph break."""
    try:
        cls = context.python_type()
    except (NotImplementedError, Unsupported):
        cls = None
    if cls is None or not python_context_methods(cls):
        raise Unsupported(f"with-block over {context}")
    return UserContextVariable(context)
