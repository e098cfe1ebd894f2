"""`logger.warning(...)` inside a traced function: replayed after the graph, not traced.

Model code logs from the middle of its forward (transformers' `logger.warning_once` on a
config default, for one). Tracing into `logging` meets locks, frame inspection and
handlers, and breaking the graph there left the whole frame eager when the bound method
was live on the stack. A logging call changes no tensor, so the call is recorded as a side
effect of the frame and made after the graph ran, each call, with the same arguments:
the logger's level, handlers and filters are consulted then, as in eager, and an
lru-cached `*_once` method still logs once. What differs from eager: the record's caller
(file, line) is the replay's, and the message comes after the graph's work, not before.

Only calls whose arguments are all Python constants are deferred (a tensor or a mutable
object could change before the replay reads it); others go the usual way.
"""

from __future__ import annotations

import functools
import inspect
import logging
from typing import Any

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.constant import ConstantVariable

# Logger methods that only emit a record (`exception` reads the exception being handled,
# which the replay does not have).
LOGGING_METHODS = frozenset(
    {"debug", "info", "warning", "warn", "error", "critical", "fatal", "log"}
)
_LOGGER_TYPES = (logging.Logger, logging.LoggerAdapter)


def is_logging_call(obj: Any, name: str) -> bool:
    """Whether `obj.name(...)` is a logging call this module defers: a stock logging
    method of a logger, or a memoized method added to the logger class (transformers'
    `warning_once`, an lru_cache around `self.warning`)."""
    if not isinstance(obj, _LOGGER_TYPES):
        return False
    try:
        attribute = inspect.getattr_static(obj, name)
    except AttributeError:
        return False
    if name in LOGGING_METHODS:
        return any(attribute is base.__dict__.get(name) for base in _LOGGER_TYPES)
    return isinstance(attribute, functools._lru_cache_wrapper)


class LoggingCallVariable(VariableTracker):
    """`logger.<name>` before its call; calling it records the call as a side effect."""

    def __init__(self, owner: VariableTracker, name: str) -> None:
        super().__init__()
        self.owner = owner
        self.name = name

    def python_type(self) -> type:
        return type(getattr(self.owner.value, self.name))  # type: ignore[attr-defined]

    def call_function(self, tx, args, kwargs):

        values = [*args, *kwargs.values()]
        if self.owner.source is None or not all(v.is_python_constant() for v in values):
            raise Unsupported(
                f"logger.{self.name}() with arguments that are not constants (deferred "
                "logging calls take constants only)"
            )
        tx.output.side_effects.calls.append(
            DeferredCall(self.owner, self.name, list(args), dict(kwargs))
        )
        return ConstantVariable(None)

    def __repr__(self) -> str:
        return f"LoggingCallVariable({self.name})"


class DeferredCall:
    """`owner.name(*args, **kwargs)`, made after the graph (convert_frame replays it)."""

    def __init__(
        self,
        owner: VariableTracker,
        name: str,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> None:
        self.owner = owner
        self.name = name
        self.args = [a.as_python_constant() for a in args]
        self.kwargs = {k: v.as_python_constant() for k, v in kwargs.items()}
