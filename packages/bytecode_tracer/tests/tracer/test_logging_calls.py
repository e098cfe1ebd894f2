"""Logging from inside a traced function: one graph, and the records eager would write."""

from __future__ import annotations

import functools
import logging

import pytest
import torch

from conftest import Compiled, same

x = torch.randn(4, 3)


@pytest.fixture
def logger(caplog):
    caplog.set_level(logging.INFO, logger="ember-test-model")
    return logging.getLogger("ember-test-model")


def messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "ember-test-model"]


def test_a_warning_in_the_middle_of_a_forward_keeps_one_graph_and_logs_each_call(logger, caplog):
    def fn(a):
        b = a.sin()
        logger.warning("using the default %s (%d)", "attention", 3)
        return b * 2

    compiled = Compiled(fn)
    for _ in range(3):
        assert same(compiled(x), fn(x))
    # eager ran 3 times, the compiled function 3 times: 6 records, the same text
    assert messages(caplog) == ["using the default attention (3)"] * 6
    assert compiled.backend.graph_count == 1 and not compiled.breaks
    assert compiled.backend.ops(0) == ["sin", "mul"]


def test_the_logger_level_is_read_on_each_call_not_at_trace_time(logger, caplog):
    def fn(a):
        logger.info("step")
        return a + 1

    compiled = Compiled(fn)
    compiled(x)
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        compiled(x)
    finally:
        logger.setLevel(level)
    compiled(x)
    assert messages(caplog) == ["step", "step"]
    assert compiled.backend.graph_count == 1


def test_a_memoized_warning_once_logs_once_like_eager(logger, caplog):
    # transformers adds `warning_once = functools.lru_cache(None)(...)` to logging.Logger
    class OnceLogger(logging.Logger):
        @functools.lru_cache(None)  # noqa: B019  (the library's idiom)
        def warning_once(self, *args):
            self.warning(*args)

    once = OnceLogger("ember-test-model")
    once.parent = logger

    def fn(a):
        once.warning_once("loss_type=None: using the default loss")
        return a.cos()

    compiled = Compiled(fn)
    for _ in range(3):
        assert same(compiled(x), x.cos())
    assert messages(caplog) == ["loss_type=None: using the default loss"]
    assert compiled.backend.graph_count == 1 and not compiled.breaks


def test_a_tensor_argument_is_not_deferred(logger, caplog):
    def fn(a):
        b = a + 1
        logger.warning("value %s", b.sum())  # formatted from a tensor: traced the usual way
        return b

    compiled = Compiled(fn)
    assert same(compiled(x), fn(x))
    assert len(messages(caplog)) == 2  # one record each, whatever the tracer did
