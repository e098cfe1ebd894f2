"""Schedule.peak_bytes: the memory plan replayed group by group, checked on a small MLP where
the live buffers at each step can be counted by hand."""

from __future__ import annotations

import torch

from conftest import LIBRARY_CPU, prim_graph
from ember_inductor_ir import lower, run_scheduled, schedule
from ember_primops import prims


def _mlp(x, w1, b1, w2):
    """x @ w1 (8 KiB) -> + b1, tanh (8 KiB) -> @ w2 (2 KiB) -> exp (2 KiB, the output)."""
    h = prims.mm(x, w1)
    a = prims.tanh(prims.add(h, prims.broadcast_in_dim(b1, [32, 64], [1])))
    return (prims.exp(prims.mm(a, w2)),)


def test_the_peak_is_the_largest_set_of_buffers_alive_together():
    torch.manual_seed(0)
    inputs = [torch.randn(32, 16), torch.randn(16, 64), torch.randn(64), torch.randn(64, 16)]
    sched = schedule(lower(prim_graph(_mlp, *inputs), list(inputs), target=LIBRARY_CPU))
    torch.testing.assert_close(run_scheduled(sched, list(inputs))[0], _mlp(*inputs)[0])
    hidden, out = 32 * 64 * 4, 32 * 16 * 4
    # bound: the product and its activation alive together while the activation is computed
    assert sched.live_bytes_bound() == 2 * hidden, sched.describe()
    # the plan writes the activation over the product (in place): one hidden buffer, then
    # it and the second product together
    assert "buf1 takes the storage of buf0" in sched.describe()
    assert sched.peak_bytes() == hidden + out, sched.describe()
