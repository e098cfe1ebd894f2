"""Recompile limits as torch.compile's users set them, and higher-order operators
(torch.cond and friends) met in a trace: always eager's answer, never an error.

- `ember.config.cache_size_limit = sys.maxsize` is how a torch.compile user says "no limit"
  (torch's `disable_cache_limit` does exactly that): it is clamped to the most the frame hook
  keeps, never a ValueError at compile time.
- A higher-order operator is not captured (no subgraph capture in Ember): its call is a graph
  break, the code around it still compiles, and the operator runs as it does eagerly.
"""

from __future__ import annotations

import sys

import pytest
import torch
from torch._higher_order_ops.cond import cond

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


def _halves(t):
    return t * 0.5


def _negated(t):
    return -t


def around_cond(flag, t):
    before = t.sin()
    picked = cond(flag, _halves, _negated, [before])
    return picked.cos() + 1


@pytest.mark.parametrize("flag", [True, False])
def test_cond_is_a_break_with_graphs_either_side(flag):
    backend = RecordingBackend()
    compiled = ember.compile(around_cond, backend=backend)
    t = torch.randn(5)
    pred = torch.tensor(flag)
    assert torch.equal(compiled(pred, t), around_cond(pred, t))
    assert len(backend.graphs) == 2  # before the cond, after it


def test_cond_is_a_break_under_inductor():
    compiled = ember.compile(around_cond)  # the default backend: inductor
    t = torch.randn(5)
    for flag in (True, False):
        pred = torch.tensor(flag)
        torch.testing.assert_close(compiled(pred, t), around_cond(pred, t))
    assert ember.counters["inductor"]["forward_graphs"] == 2


def test_cond_refused_under_fullgraph_with_its_name():
    compiled = ember.compile(around_cond, backend=RecordingBackend(), fullgraph=True)
    with pytest.raises(ember.exc.Unsupported, match="higher-order operator cond"):
        compiled(torch.tensor(True), torch.randn(5))
