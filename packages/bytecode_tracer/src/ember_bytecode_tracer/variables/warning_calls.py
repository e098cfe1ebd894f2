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
"""

from __future__ import annotations

import functools
import inspect
import warnings
from typing import Any

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.variables.builtins import rule
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.logging_calls import DeferredCall

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
