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


def test_the_storages_held_at_the_peak_are_named_and_sum_to_it():
    torch.manual_seed(0)
    inputs = [torch.randn(32, 16), torch.randn(16, 64), torch.randn(64), torch.randn(64, 16)]
    sched = schedule(lower(prim_graph(_mlp, *inputs), list(inputs), target=LIBRARY_CPU))
    held: dict[str, int] = {}
    peak = sched.peak_bytes(held)
    at = held.pop("")
    assert sum(held.values()) == peak and sorted(held.values()) == [32 * 16 * 4, 32 * 64 * 4]
    assert sched[at].extern is not None  # the second product, beside the activation
    # a buffer its generator keeps in registers is no storage (triton_plan.py passes them)
    assert sched.peak_bytes(unstored={"buf1"}) == 32 * 64 * 4, sched.describe()


def _embedding_gradient(idx, v):
    """An embedding's gradient: rows of `v` added into a zero-filled accumulator (4 KiB),
    which the scatter writes in place and returns."""
    zeros = prims.full([256, 4], 0, dtype=torch.float32, device=torch.device("cpu"))
    return (prims.index_put(zeros, [idx], v, True),)


def test_an_in_place_library_result_is_the_storage_it_wrote():
    idx, v = torch.tensor([1, 3, 1, 9, 0, 3]), torch.randn(6, 4)
    sched = schedule(lower(prim_graph(_embedding_gradient, idx, v), [idx, v], target=LIBRARY_CPU))
    want = torch.zeros(256, 4).index_put_((idx,), v, accumulate=True)
    torch.testing.assert_close(run_scheduled(sched, [idx, v])[0], want)
    (scatter,) = [g for g in sched if g.extern is not None and g.extern.mutates]
    assert scatter.buffer_names() != [scatter.extern.mutates]  # a result of its own name
    # the accumulator once, not again for the result the scatter hands back
    assert sched.peak_bytes() == 256 * 4 * 4, sched.describe()
