"""`with torch.autograd.graph.disable_saved_tensors_hooks(message):` across a graph break.

The trace inlines the context's generator (generator_context.py), whose switches are graph
ops and also run at trace time. At a break inside the block, its __exit__ on the stack is
rebuilt as a `SavedHooksExit` that restores what the block entered from (the message hooks
were disabled with before, or None: enabled), as the generator's `finally` would; the runner
leaves the block's state set after the graph (convert_frame), and the resume function's
trace sees the same context again, whose exit puts the restoring switch in its graph.
"""

from __future__ import annotations

import torch

from ember_bytecode_tracer.guards import AttrSource, GuardKind
from ember_bytecode_tracer.saved_hooks import disabled_message, restore_disabled
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import guard, wrap_rule
from ember_bytecode_tracer.variables.contexts import ContextExitVariable

_autograd = torch._C._autograd
# the generator function under torch.autograd.graph.disable_saved_tensors_hooks
DISABLE_HOOKS_FUNCTION = getattr(
    torch.autograd.graph.disable_saved_tensors_hooks, "__wrapped__", None
)


class SavedHooksExit:
    """A disable_saved_tensors_hooks block's __exit__ after a graph break: puts back the
    saved-tensor hooks state the block entered from; never suppresses an exception."""

    __slots__ = ("message", "previous")

    def __init__(self, message: str, previous: str | None) -> None:
        self.message = message
        self.previous = previous

    def __call__(self, *exc_info) -> bool:
        restore_disabled(self.previous)
        return False


class SavedHooksBlock(VariableTracker):
    """The open block a resume function's trace is in: leaving it restores `previous`."""

    def __init__(self, previous: str | None) -> None:
        super().__init__()
        self.previous = previous

    def exit(self, tx) -> None:
        _switch_node(tx.output, self.previous)
        restore_disabled(self.previous)  # as the trace's own switches do at trace time


def close_at_break(output, stack_values) -> None:
    """A break inside disable_saved_tensors_hooks blocks: the graph ends leaving them (the
    innermost first), as the resume function's graph starts entering them again; the runner
    sets the state the trace stopped in after the graph (convert_frame)."""
    for value in reversed(stack_values):
        context = getattr(value, "context", None)
        if isinstance(value, ContextExitVariable) and hasattr(context, "rebuilt_exit"):
            exit_fn = context.rebuilt_exit()  # built already for the stack's recipe
            if isinstance(exit_fn, SavedHooksExit):
                _switch_node(output, exit_fn.previous)


def _switch_node(output, message: str | None) -> None:
    if message is None:
        output.graph.call_function(_autograd._saved_tensors_hooks_enable, ())
    else:
        output.graph.call_function(_autograd._saved_tensors_hooks_disable, (message,))


def rebuilt_exit(func, args, previous: str | None) -> SavedHooksExit | None:
    """The __exit__ of a @contextmanager block at a break, if it is disable_saved_tensors_hooks
    with a constant message entered from `previous` (None: it cannot be rebuilt here)."""
    if DISABLE_HOOKS_FUNCTION is None or getattr(func, "fn", None) is not DISABLE_HOOKS_FUNCTION:
        return None
    if len(args) != 1 or not args[0].is_python_constant():
        return None
    message = args[0].as_python_constant()
    if not isinstance(message, str) or disabled_message() != message:
        return None
    return SavedHooksExit(message, previous)


def _is_sourced(tx, value, source) -> bool:
    return source is not None


@wrap_rule("saved_hooks_exit", types=SavedHooksExit, when=_is_sourced)
def _wrap_saved_hooks_exit(tx, value: SavedHooksExit, source) -> VariableTracker:
    # The resume function runs inside the block again: the message and the state it
    # restores are guarded constants.
    guard(tx, source, GuardKind.TYPE_MATCH, SavedHooksExit)
    tx.wrap(value.message, AttrSource(source, "message"))
    tx.wrap(value.previous, AttrSource(source, "previous"))
    _switch_node(tx.output, value.message)  # the graph enters the block again
    return ContextExitVariable(SavedHooksBlock(value.previous))
