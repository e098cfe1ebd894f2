"""Structured compile events for a trace sink (the umbrella's `EMBER_TRACE_DIR` writer).

`emit(event, **payload)` hands one event to the handlers of the `ember.events` logger: a
`logging` record whose `ember_event` attribute is the event's name and `ember_payload` the payload
(values may be live objects, graphs or code objects: the sink serializes them).
`stage(name)` brackets a compile stage (`stage_begin`/`stage_end` events) so that the sink
can time it. A sink turns events on by setting that logger's level to DEBUG; at its default
(NOTSET) both cost one attribute test. Every stage that reports events depends on this one
small, torch-free distribution (lower stages import nothing above them); the contract with a
sink is the logger name, its level and the two record attributes.
`subscribe(event, fn)` calls `fn(**payload)` for each event of that name whether a sink
listens or not (the umbrella's counters; a test harness): an event nobody subscribed to costs
one more dict test.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

__all__ = ["emit", "on", "stage", "subscribe", "unsubscribe"]

_sink = logging.getLogger("ember.events")
_OFF = contextlib.nullcontext()
#: event name -> the functions subscribed to it, called in the order they subscribed
_subscribers: dict[str, list[Callable[..., None]]] = {}


def on() -> bool:
    return 0 < _sink.level <= logging.DEBUG


def emit(event: str, /, **payload: Any) -> None:
    if _subscribers and event in _subscribers:
        for fn in tuple(_subscribers[event]):
            fn(**payload)
    if 0 < _sink.level <= logging.DEBUG:
        _sink.debug(event, extra={"ember_event": event, "ember_payload": payload})


def subscribe(event: str, fn: Callable[..., None]) -> None:
    """`fn(**payload)` is called for each `event` emitted from now on (once per
    subscription; what it raises reaches the code that emitted)."""
    _subscribers.setdefault(event, []).append(fn)


def unsubscribe(event: str, fn: Callable[..., None]) -> None:
    """Undoes one `subscribe(event, fn)`; a function not subscribed is ignored."""
    fns = _subscribers.get(event, [])
    if fn in fns:
        fns.remove(fn)
    if not fns:
        _subscribers.pop(event, None)


class _Stage:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> None:
        emit("stage_begin", name=self.name)

    def __exit__(self, *exc: object) -> None:
        emit("stage_end", name=self.name)


def stage(name: str) -> contextlib.AbstractContextManager:
    """`with stage("decompose"): ...`: its time is reported as that stage's."""
    return _Stage(name) if 0 < _sink.level <= logging.DEBUG else _OFF
