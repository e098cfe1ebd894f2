"""The compile pool's jobs report each finished build on the `ember.events` logger (the
umbrella's progress line listens there) and keep their order and errors."""

from __future__ import annotations

import logging

import pytest

from ember_codegen.workers import progress_counter, run_jobs


class Events(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.seen = []

    def emit(self, record):  # logging.Handler.handle holds the handler's lock around this
        self.seen.append((record.ember_event, record.ember_payload))


@pytest.fixture
def events():
    logger = logging.getLogger("ember.events")
    handler, level, propagate = Events(), logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)
    logger.propagate = propagate


@pytest.mark.parametrize("count", [1, 5])
def test_run_jobs_keeps_order_and_reports_k_of_n(events, count):
    results = run_jobs([lambda i=i: i * i for i in range(count)])
    assert results == [i * i for i in range(count)]
    done = [p["done"] for kind, p in events.seen if kind == "kernels_built"]
    assert done == list(range(count + 1))  # 0 at the start, then one per finished job
    assert {p["total"] for kind, p in events.seen if kind == "kernels_built"} == {count}
    spans = [p for kind, p in events.seen if kind == "build_span"]  # the compile's timeline
    assert sorted(p["name"] for p in spans) == [f"build kernels {i}/{count}"
                                                for i in range(1, count + 1)]  # fmt: skip
    assert all(p["start"] <= p["end"] and p["thread"] for p in spans)


def test_first_failing_job_raises(events):
    def bad():
        raise ValueError("broken kernel")

    with pytest.raises(ValueError, match="broken kernel"):
        run_jobs([lambda: 1, bad, lambda: 3])
    assert [p["done"] for k, p in events.seen if k == "kernels_built"][
        -1
    ] == 3  # every job finished and was counted


def test_silent_unless_a_listener_turned_events_on():
    logger = logging.getLogger("ember.events")
    assert logger.level == logging.NOTSET
    handler = Events()
    logger.addHandler(handler)
    try:
        tick = progress_counter(2)
        tick()
        assert run_jobs([lambda: 7]) == [7]
    finally:
        logger.removeHandler(handler)
    assert handler.seen == []
