"""Context managers a trace can enter: grad mode switches, nullcontext, dispatch-disabling
guards (no graph ops inside) and @contextlib.contextmanager ones (generator_context.py).

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


class GraphFreeContextVariable(VariableTracker):
    """A guard that changes how ops dispatch (torch._C._DisableTorchDispatch...): it acts from
    construction to exit. Python work inside is traced as usual (freeze_rng_state reads
    the RNG state under it), but a graph op would miss the guard when the graph runs: the
    output graph refuses to add one while it is open."""

    def __init__(self, tx, name: str) -> None:
        super().__init__()
        self.name = name
        self.open = True
        tx.output.graph_free_contexts.append(name)

    def enter(self, tx) -> VariableTracker:
        return ConstantVariable(None)

    def exit_handler(self) -> VariableTracker:
        return ContextExitVariable(self)

    def exit(self, tx) -> None:
        if self.open:
            self.open = False
            tx.output.graph_free_contexts.remove(self.name)


GRAPH_FREE_CLASSES = {
    torch._C._DisableTorchDispatch: "torch._C._DisableTorchDispatch()",
    torch._C._DisableFuncTorch: "torch._C._DisableFuncTorch()",
}


def make_context(tx, cls, args, kwargs) -> VariableTracker | None:
    """The tracker for constructing a known context manager, or None if `cls` is not one."""
    if cls is contextlib._GeneratorContextManager:
        from ember_bytecode_tracer.variables.generator_context import GeneratorContextVariable

        return GeneratorContextVariable.from_constructor_args(tx, args, kwargs)
    if cls in GRAPH_FREE_CLASSES and not args and not kwargs:
        return GraphFreeContextVariable(tx, GRAPH_FREE_CLASSES[cls])
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
    from ember_bytecode_tracer.variables.autocast_context import AUTOCAST_CLASSES, make_autocast

    if cls in AUTOCAST_CLASSES:
        return make_autocast(cls, args, kwargs)
    return None
