"""`warnings.warn(...)` inside a traced function: made after the graph, each call.

Library code warns from the middle of traced code (a deprecation wrapper around a helper,
a check on an argument). A warning changes no tensor, so, as a logging call
(logging_calls.py), the call is recorded as a side effect of the frame and made after the
graph ran, each call: the filters, the "once per location" registry and `showwarning` are
consulted then, as in eager. The location eager gives the warning (the frame `stacklevel`
names, its module's `__warningregistry__`) is the traced frame's: the replay passes it to
`warnings.warn_explicit`, as `warnings.warn` itself does.

What differs from eager: the warning comes after the graph's work, so an "error" filter
raises once the graph ran. Only calls whose arguments are all constants are deferred; a
`stacklevel` that reaches past the compiled frame is a break.

`with warnings.catch_warnings(...)` is traced as a no-op block, as a profiler block is:
the graph's ops warn through the filters of the caller, which the block only copied
(changing them inside, `simplefilter()`, is a break: it calls into C). A deferred warning
inside the block would escape it, so `warn()` there is a break; the list `record=True`
binds cannot be filled by the trace, so any use of it is a break, and so is a graph break
inside the block (its __exit__ cannot be rebuilt): the frame then runs as Python. What
differs from eager (as under torch.compile): a warning an op of the block gives while the
graph runs is shown through the caller's `showwarning`, not recorded in that unread list.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from typing import Any

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builtins import rule
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.contexts import ContextExitVariable
from ember_bytecode_tracer.variables.logging_calls import DeferredCall
from ember_bytecode_tracer.variables.objects import constructor

# warnings.warn(message, category=None, stacklevel=1, source=None[, *, skip_file_prefixes])
_WARN = inspect.Signature(
    [
        inspect.Parameter("message", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        inspect.Parameter("category", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None),
        inspect.Parameter("stacklevel", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=1),
        inspect.Parameter("source", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None),
    ]
)


def _warn_at(
    module_globals: dict, filename: str, lineno: int, message: Any, category: Any, source: Any
) -> None:
    """What warnings.warn does once it found its frame: that frame's module and registry."""
    module = module_globals.get("__name__", "<string>")
    registry = module_globals.setdefault("__warningregistry__", {})
    warnings.warn_explicit(
        message, category, filename, lineno, module, registry, module_globals, source
    )


def _category(message: Any, category: Any) -> type:
    if isinstance(message, Warning):
        return type(message)
    category = UserWarning if category is None else category
    if not (isinstance(category, type) and issubclass(category, Warning)):
        raise TracedException(
            TypeError, f"category must be a Warning subclass, not '{type(category).__name__}'"
        )
    return category


@rule(warnings.warn)
def _warn(tx, args, kwargs):
    try:
        bound = _WARN.bind(*args, **kwargs)
    except TypeError as exc:
        raise Unsupported(f"warnings.warn() with these arguments: {exc}") from None
    if not all(v.is_python_constant() for v in bound.arguments.values()):
        raise Unsupported("warnings.warn() with arguments that are not constants")
    if tx.output.warnings_blocks:
        raise Unsupported("warnings.warn() inside `with warnings.catch_warnings()`")
    values = {n: v.as_python_constant() for n, v in bound.arguments.items()}
    message = values["message"]
    category = _category(message, values.get("category"))
    frame = tx
    for _ in range(max(int(values.get("stacklevel", 1)), 1) - 1):
        frame = frame.parent
        if frame is None:
            raise Unsupported("warnings.warn() whose stacklevel names a frame outside the trace")
    replay = functools.partial(_warn_at, frame.f_globals, frame.code.co_filename, frame.lineno())
    call = [ConstantVariable(message), ConstantVariable(category)]
    call.append(ConstantVariable(values.get("source")))
    tx.output.side_effects.calls.append(
        DeferredCall(ConstantVariable(replay), "__call__", call, {})
    )
    return ConstantVariable(None)


class RecordedWarningsVariable(VariableTracker):
    """The list `with warnings.catch_warnings(record=True) as caught` binds: eager fills it
    with what the block's ops warn, which runs in the graph, after the trace."""

    def __repr__(self) -> str:
        return "the warnings list of a catch_warnings(record=True) block"


class CatchWarningsVariable(VariableTracker):
    """`warnings.catch_warnings(record=..., action=None)`, entered and left in the trace."""

    def __init__(self, record: bool) -> None:
        super().__init__()
        self.record = record
        self.entered = False  # an entered one is not made again after the graph

    def enter(self, tx) -> VariableTracker:
        self.entered = True
        tx.output.warnings_blocks.append(self)
        return RecordedWarningsVariable() if self.record else ConstantVariable(None)

    def exit_handler(self) -> VariableTracker:
        return ContextExitVariable(self)  # not rebuildable: a break inside stops the trace

    def exit(self, tx) -> None:
        if self in tx.output.warnings_blocks:
            tx.output.warnings_blocks.remove(self)


@constructor("catch_warnings")
def _catch_warnings(tx, kind, args, kwargs) -> VariableTracker | None:
    if kind.cls is not warnings.catch_warnings:
        return None
    if args or set(kwargs) - {"record"} or not all(v.is_python_constant() for v in kwargs.values()):
        raise Unsupported("warnings.catch_warnings() with an action or module")
    return CatchWarningsVariable(bool(kwargs["record"].as_python_constant()) if kwargs else False)
