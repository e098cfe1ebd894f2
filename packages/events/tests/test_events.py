"""The events contract: records on `ember.events` only while a sink sets DEBUG."""

from __future__ import annotations

import logging

import pytest

from ember_events import emit, on, stage, subscribe, unsubscribe


class Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.events: list[tuple[str, dict]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.events.append((record.ember_event, record.ember_payload))


@pytest.fixture
def recorder():
    sink = logging.getLogger("ember.events")
    handler = Recorder()
    sink.addHandler(handler)
    yield sink, handler
    sink.removeHandler(handler)
    sink.setLevel(logging.NOTSET)


def test_nothing_is_recorded_while_no_sink_listens(recorder):
    _, handler = recorder
    assert not on()
    emit("graph", nodes=3)
    with stage("lower"):
        pass
    assert handler.events == []


def test_events_and_stages_reach_a_listening_sink(recorder):
    sink, handler = recorder
    sink.setLevel(logging.DEBUG)
    assert on()
    with stage("lower"):
        emit("graph", nodes=3)
    assert handler.events == [
        ("stage_begin", {"name": "lower"}),
        ("graph", {"nodes": 3}),
        ("stage_end", {"name": "lower"}),
    ]


def test_a_stage_ends_when_its_block_raises(recorder):
    sink, handler = recorder
    sink.setLevel(logging.DEBUG)
    with pytest.raises(ValueError), stage("codegen"):
        raise ValueError("boom")
    assert [name for name, _ in handler.events] == ["stage_begin", "stage_end"]


def test_a_subscriber_is_called_with_or_without_a_sink(recorder):
    sink, handler = recorder
    calls: list[dict] = []

    def note(**payload):
        calls.append(payload)

    subscribe("graph_break", note)
    try:
        emit("graph_break", reason="r1")  # no sink: the subscriber still hears it
        emit("graph", nodes=2)  # another event: not the subscriber's
        sink.setLevel(logging.DEBUG)
        emit("graph_break", reason="r2")
    finally:
        unsubscribe("graph_break", note)
    emit("graph_break", reason="r3")  # unsubscribed
    unsubscribe("graph_break", note)  # twice: ignored
    assert calls == [{"reason": "r1"}, {"reason": "r2"}]
    assert [name for name, _ in handler.events] == ["graph_break", "graph_break"]
