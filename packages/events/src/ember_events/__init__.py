"""Structured compile events for a trace sink (the umbrella's `EMBER_TRACE_DIR` writer).

`emit(event, **payload)` hands one event to the handlers of the `ember.events` logger: a
`logging` record whose `ember_event` attribute is the event's name and `ember_payload` the payload
(values may be live objects, graphs or code objects: the sink serializes them).
`stage(name)` brackets a compile stage (`stage_begin`/`stage_end` events) so that the sink
can time it. A sink turns events on by setting that logger's level to DEBUG; at its default
(NOTSET) both cost one attribute test. Every stage that reports events depends on this one
small, torch-free distribution (lower stages import nothing above them); the contract with a
sink is the logger name, its level and the two record attributes.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

__all__ = ["emit", "on", "stage"]

_sink = logging.getLogger("ember.events")
_OFF = contextlib.nullcontext()


def on() -> bool:
    return 0 < _sink.level <= logging.DEBUG


def emit(event: str, /, **payload: Any) -> None:
    if 0 < _sink.level <= logging.DEBUG:
        _sink.debug(event, extra={"ember_event": event, "ember_payload": payload})


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
