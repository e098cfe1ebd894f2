"""The events contract: records on `ember.events` only while a sink sets DEBUG."""

from __future__ import annotations

import logging

import pytest

from ember_events import emit, on, stage


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
