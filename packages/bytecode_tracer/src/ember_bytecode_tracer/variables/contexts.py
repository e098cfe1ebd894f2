"""Context managers a trace can enter: grad mode switches and nullcontext.

Entering `torch.no_grad()` (or `enable_grad()`, `set_grad_enabled(m)`) puts a
`torch._C._set_grad_enabled` call into the graph and switches grad mode for the rest of
the trace, so example values get the right `requires_grad`; leaving it does the reverse.
A graph break inside a `with` block makes the frame run as it is (see convert_frame).
"""

from __future__ import annotations

import contextlib

import torch

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.constant import ConstantVariable

GRAD_MODE_CLASSES = {torch.no_grad: False, torch.enable_grad: True}


def set_grad_mode(tx, enabled: bool) -> None:
    tx.output.graph.call_function(torch._C._set_grad_enabled, (enabled,))
    torch._C._set_grad_enabled(enabled)


class GradModeVariable(VariableTracker):
    """A grad-mode context manager made in the trace (not entered yet)."""

    def __init__(self, enabled: bool, *, applies_on_creation: bool = False) -> None:
        super().__init__()
        self.enabled = enabled
        self.previous: bool | None = None
        self.applies_on_creation = applies_on_creation

    def enter(self, tx) -> VariableTracker:
        if self.previous is None:
            self.previous = torch.is_grad_enabled()
        set_grad_mode(tx, self.enabled)
        return ConstantVariable(None)

    def exit_handler(self) -> VariableTracker:
        return ContextExitVariable(self)

    def exit(self, tx) -> None:
        set_grad_mode(tx, self.previous)


class NullContextVariable(VariableTracker):
    def __init__(self, enter_result: VariableTracker) -> None:
        super().__init__()
        self.enter_result = enter_result

    def enter(self, tx) -> VariableTracker:
        return self.enter_result

    def exit_handler(self) -> VariableTracker:
        return ContextExitVariable(self)

    def exit(self, tx) -> None:
        pass


class ContextExitVariable(VariableTracker):
    """The bound __exit__ that BEFORE_WITH leaves on the stack."""

    def __init__(self, context: VariableTracker) -> None:
        super().__init__()
        self.context = context

    def call_function(self, tx, args, kwargs):
        if any(not (a.is_python_constant() and a.as_python_constant() is None) for a in args):
            raise Unsupported("leaving a with block with an exception")
        self.context.exit(tx)
        return ConstantVariable(None)


def make_context(tx, cls, args, kwargs) -> VariableTracker | None:
    """The tracker for constructing a known context manager, or None if `cls` is not one."""
    if cls in GRAD_MODE_CLASSES:
        return GradModeVariable(GRAD_MODE_CLASSES[cls])
    if cls is torch.set_grad_enabled:
        mode = bool(args[0].as_python_constant())
        # set_grad_enabled(m) switches at construction (it also works as a plain call).
        context = GradModeVariable(mode, applies_on_creation=True)
        context.previous = torch.is_grad_enabled()
        set_grad_mode(tx, mode)
        return context
    if cls is contextlib.nullcontext:
        return NullContextVariable(args[0] if args else ConstantVariable(None))
    return None
