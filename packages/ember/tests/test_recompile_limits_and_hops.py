"""Recompile limits as torch.compile's users set them, and higher-order operators
(torch.cond and friends) met in a trace: always eager's answer, never an error.

- `ember.config.cache_size_limit = sys.maxsize` is how a torch.compile user says "no limit"
  (torch's `disable_cache_limit` does exactly that): it is clamped to the most the frame hook
  keeps, never a ValueError at compile time.
- A higher-order operator Ember does not capture (while_loop: torch.cond and map are captured,
  see test_control_flow_capture.py) is a graph break: the code around it still compiles, and
  the operator runs as it does eagerly.
"""

from __future__ import annotations

import sys

import pytest
import torch
from torch._higher_order_ops.while_loop import while_loop

import ember
import ember_frame_hook as fh
from conftest import RecordingBackend
from ember.config import CACHE_LIMIT_MAX, frame_cache_limit


@pytest.fixture
def limit_kept():
    before = ember.config.cache_size_limit
    yield
    ember.config.cache_size_limit = before


def test_a_huge_limit_means_no_limit(limit_kept):
    ember.config.cache_size_limit = sys.maxsize
    backend = RecordingBackend()

    def scale(t, k):
        return t * k

    compiled = ember.compile(scale, backend=backend, dynamic=False)
    t = torch.randn(3)
    for k in range(12):  # more variants than the default limit of 8: all compiled
        assert torch.equal(compiled(t, k), scale(t, k))
    assert len(backend.graphs) == 12
    assert fh.get_cache_limit() == CACHE_LIMIT_MAX


@pytest.mark.parametrize("bad", [0, -1, True, 2.5])
def test_a_limit_below_one_or_not_an_int_is_refused(bad):
    with pytest.raises(ValueError, match="cache_size_limit"):
        frame_cache_limit(bad)


def around_loop(t):
    before = t.sin()
    _, looped = while_loop(
        lambda i, u: i < 3, lambda i, u: (i + 1, u * 2), (torch.tensor(0), before)
    )
    return looped.cos() + 1


def test_while_loop_is_a_break_with_graphs_either_side():
    backend = RecordingBackend()
    compiled = ember.compile(around_loop, backend=backend)
    t = torch.randn(5)
    assert torch.equal(compiled(t), around_loop(t))
    assert len(backend.graphs) == 2  # before the loop, after it


def test_while_loop_is_a_break_under_inductor():
    compiled = ember.compile(around_loop)  # the default backend: inductor
    t = torch.randn(5)
    torch.testing.assert_close(compiled(t), around_loop(t))
    assert ember.counters["inductor"]["forward_graphs"] == 2


def test_while_loop_refused_under_fullgraph_with_its_name():
    compiled = ember.compile(around_loop, backend=RecordingBackend(), fullgraph=True)
    with pytest.raises(ember.exc.Unsupported, match="higher-order operator while_loop"):
        compiled(torch.randn(5))
