"""Context managers a trace can enter: grad mode switches, nullcontext, dispatch-disabling
guards (no graph ops inside) and @contextlib.contextmanager ones (generator_context.py).

Entering `torch.no_grad()` (or `enable_grad()`, `set_grad_enabled(m)`) puts a
`torch._C._set_grad_enabled` call into the graph and switches grad mode for the rest of
the trace, so example values get the right `requires_grad`; leaving it does the reverse.
At a graph break inside a grad-mode or nullcontext block, the block's __exit__ on the stack
is rebuilt as a `RealContextExit` (restoring the mode the block entered from); the resume
function's trace sees it as the same kind of context again. Other `with` blocks make the
frame run as it is (see convert_frame).
"""

from __future__ import annotations

import contextlib
import functools
import types
from collections.abc import Callable
from typing import Any

import torch

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import AttrSource, GuardKind
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import guard, wrap_rule
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.objects import TypeVariable, constructor

GRAD_MODE_CLASSES = {torch.no_grad: False, torch.enable_grad: True}


def set_grad_mode(tx, enabled: bool) -> None:
    if torch.is_grad_enabled() == enabled:
        return  # already so at this point of the trace (no_grad under no_grad): no op
    graph = tx.output.graph
    last = next(iter(reversed(graph.nodes)), None)
    if last is not None and last.op == "call_function" and last.target is _SET_GRAD:
        # the switch just made, with nothing traced under it, is undone: neither is kept
        graph.erase_node(last)
    else:
        graph.call_function(_SET_GRAD, (enabled,))
    torch._C._set_grad_enabled(enabled)


_SET_GRAD = torch._C._set_grad_enabled


class GradModeVariable(VariableTracker):
    """A grad-mode context manager made in the trace (not entered yet)."""

    def __init__(self, enabled: bool, *, applies_on_creation: bool = False) -> None:
        super().__init__()
        self.enabled = enabled
        self.previous: bool | None = None
        self.applies_on_creation = applies_on_creation

    @property
    def cls(self) -> type:
        if self.applies_on_creation:
            return torch.set_grad_enabled
        return torch.enable_grad if self.enabled else torch.no_grad

    def python_type(self) -> type:
        return self.cls

    def var_getattr(self, tx, name: str) -> VariableTracker:
        # what torch's decorator wrapper reads to make a fresh context per call
        # (`_DecoratorContextManager.clone`: `self.__class__()` / `self.__class__(self.mode)`)
        if name == "__class__":
            return TypeVariable(self.cls)
        if name == "mode" and self.applies_on_creation:
            return ConstantVariable(self.enabled)
        return super().var_getattr(tx, name)

    def enter(self, tx) -> VariableTracker:
        if self.previous is None:
            self.previous = torch.is_grad_enabled()
        set_grad_mode(tx, self.enabled)
        return ConstantVariable(None)

    def exit_handler(self) -> VariableTracker:
        return ContextExitVariable(self)

    def exit(self, tx) -> None:
        set_grad_mode(tx, self.previous)

    def call_function(self, tx, args, kwargs):
        # `@torch.no_grad()` / `@torch.set_grad_enabled(m)` on a function: it runs in that
        # mode. set_grad_enabled switched at construction: decorating switches back.
        fn = decorated_function(args, kwargs, f"call of {self!r}")
        if self.applies_on_creation and self.previous is not None:
            set_grad_mode(tx, self.previous)
        enabled = self.enabled
        return ContextDecoratedFunction(lambda: GradModeVariable(enabled), fn)

    def __repr__(self) -> str:
        return f"GradModeVariable({self.enabled})"


def decorated_function(args, kwargs, what: str) -> VariableTracker:
    """The one Python function a context manager object is called on (as a decorator)."""
    if len(args) != 1 or kwargs or not _is_python_function(args[0]):
        raise Unsupported(what)
    return args[0]


def _is_python_function(value: VariableTracker) -> bool:
    try:
        kind = value.python_type()
    except Unsupported:
        return False
    return kind in (types.FunctionType, types.MethodType, functools.partial)


class ContextDecoratedFunction(VariableTracker):
    """A function wrapped by a context manager used as a decorator (ContextDecorator):
    each call enters a fresh context made by `make_context`, calls `fn`, and leaves it."""

    def __init__(self, make_context: Callable[[], VariableTracker], fn: VariableTracker) -> None:
        super().__init__()
        self.make_context = make_context
        self.fn = fn

    def python_type(self) -> type:
        return types.FunctionType

    def call_function(self, tx, args, kwargs):
        context = self.make_context()
        context.enter(tx)
        result = self.fn.call_function(tx, args, kwargs)
        context.exit(tx)
        return result

    def __repr__(self) -> str:
        return f"ContextDecoratedFunction({self.fn})"


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


class ProfilerObjectVariable(VariableTracker):
    """What `with torch.profiler.profile() as prof` binds in a trace, where the profiler is
    a no-op (as under torch.compile): any use of it (or keeping it past a graph break, which
    would need a real one) stops the trace, so the frame runs as Python and profiles."""

    def __repr__(self) -> str:
        return "the profiler of a with block traced as a no-op"


# Profiling contexts: a no-op inside a trace (their events are Python-side bookkeeping).
PROFILER_CLASSES = frozenset({torch.profiler.profile, torch.profiler.record_function,
                              torch.autograd.profiler.profile,
                              torch.autograd.profiler.record_function})  # fmt: skip


class ContextExitVariable(VariableTracker):
    """The bound __exit__ that BEFORE_WITH leaves on the stack."""

    def __init__(self, context: VariableTracker, *, break_on_exit: str | None = None) -> None:
        super().__init__()
        self.context = context
        self.break_on_exit = break_on_exit

    def as_python_constant(self) -> RealContextExit:
        # Rebuilt at a graph break inside the block (the state it restores is a constant).
        if isinstance(self.context, GradModeVariable) and self.context.previous is not None:
            return RealContextExit(self.context.previous)
        if isinstance(self.context, NullContextVariable):
            return RealContextExit(None)
        if hasattr(self.context, "rebuilt_exit"):  # e.g. disable_saved_tensors_hooks'
            return self.context.rebuilt_exit()
        raise Unsupported(f"the __exit__ of {type(self.context).__name__} after a graph break")

    def call_function(self, tx, args, kwargs):
        if any(not (a.is_python_constant() and a.as_python_constant() is None) for a in args):
            raise Unsupported("leaving a with block with an exception")
        if self.break_on_exit:
            raise Unsupported(self.break_on_exit)
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


class RealContextExit:
    """A with-block's __exit__ after a graph break: restores grad mode to `previous`
    (None: a nullcontext, nothing to restore); never suppresses an exception."""

    __slots__ = ("previous",)

    def __init__(self, previous: bool | None) -> None:
        self.previous = previous

    def __call__(self, *exc_info) -> bool:
        if self.previous is not None:
            torch._C._set_grad_enabled(self.previous)
        return False

    def tracker(self) -> ContextExitVariable:
        """What a trace of the resume function sees: the same context's exit."""
        if self.previous is None:
            return ContextExitVariable(NullContextVariable(ConstantVariable(None)))
        context = GradModeVariable(torch.is_grad_enabled())
        context.previous = self.previous
        if self.previous and not torch.is_grad_enabled():
            # A graph that starts without grad and turns it on would be compiled for
            # inference: leaving the block ends the graph, and the rest starts with grad.
            reason = "leaving a no_grad block entered before a graph break"
            return ContextExitVariable(context, break_on_exit=reason)
        return ContextExitVariable(context)


def rebuilt_grad_mode(enabled: bool, previous: bool | None, applies_on_creation: bool) -> Any:
    """A grad-mode context object live at a graph break, made again after the graph: the
    same kind, not entered. `set_grad_enabled(m)` switched when made (the trace did too): it
    is made under the mode it was made under, so it restores that one, and the mode now is
    kept."""
    if not applies_on_creation:
        return torch.enable_grad() if enabled else torch.no_grad()
    now = torch.is_grad_enabled()
    torch._C._set_grad_enabled(now if previous is None else previous)
    try:
        return torch.set_grad_enabled(enabled)
    finally:
        torch._C._set_grad_enabled(now)


GRAPH_FREE_CLASSES = {
    torch._C._DisableTorchDispatch: "torch._C._DisableTorchDispatch()",
    torch._C._DisableFuncTorch: "torch._C._DisableFuncTorch()",
}


@constructor("context_manager")
def make_context(tx, kind: TypeVariable, args, kwargs) -> VariableTracker | None:
    """The tracker for constructing a known context manager, or None if `cls` is not one
    (@contextmanager's and autocast's are generator_context.py's and autocast_context.py's)."""
    cls = kind.cls
    if cls in GRAPH_FREE_CLASSES and not args and not kwargs:
        return GraphFreeContextVariable(tx, GRAPH_FREE_CLASSES[cls])
    if cls in GRAD_MODE_CLASSES:
        mode = GRAD_MODE_CLASSES[cls]
        if args:  # `@torch.no_grad` without parentheses: the class called on the function
            fn = decorated_function(args, kwargs, f"{cls.__name__}() with arguments")
            return ContextDecoratedFunction(lambda: GradModeVariable(mode), fn)
        return GradModeVariable(mode)
    if cls is torch.set_grad_enabled:
        mode = bool(args[0].as_python_constant())
        # set_grad_enabled(m) switches at construction (it also works as a plain call).
        context = GradModeVariable(mode, applies_on_creation=True)
        context.previous = torch.is_grad_enabled()
        set_grad_mode(tx, mode)
        return context
    if cls in PROFILER_CLASSES:
        return NullContextVariable(ProfilerObjectVariable())
    if cls is contextlib.nullcontext:
        return NullContextVariable(args[0] if args else ConstantVariable(None))
    return None


# ---- wrapping real values (variables/builder.py) ----------------------------------------
def _is_sourced(tx, value: Any, source) -> bool:
    return source is not None


@wrap_rule("context_exit", types=RealContextExit, when=_is_sourced)
def _wrap_context_exit(tx, value: RealContextExit, source) -> VariableTracker:
    # A with-block's __exit__ rebuilt at a graph break: the resume function's trace
    # exits the same context (the grad mode it restores is guarded as a constant).
    guard(tx, source, GuardKind.TYPE_MATCH, RealContextExit)
    tx.wrap(value.previous, AttrSource(source, "previous"))
    return value.tracker()


@wrap_rule(
    "grad_mode_context",
    types=(torch.no_grad, torch.enable_grad, torch.set_grad_enabled),
    exact=True,
    when=_is_sourced,
)
def _wrap_grad_mode_object(tx, value: Any, source) -> VariableTracker:
    # A grad-mode context object made outside the trace (or before a break): the same
    # switch; set_grad_enabled's mode and the mode it restores are guarded constants.
    guard(tx, source, GuardKind.TYPE_MATCH, type(value))
    if type(value) is not torch.set_grad_enabled:
        return GradModeVariable(type(value) is torch.enable_grad)
    mode = tx.wrap(value.mode, AttrSource(source, "mode")).as_python_constant()
    context = GradModeVariable(bool(mode), applies_on_creation=True)
    context.previous = bool(tx.wrap(value.prev, AttrSource(source, "prev")).as_python_constant())
    return context
