"""Outputs written into the inputs their values go back to (lower's ``input_writes``): the
memory plan takes the input's storage only where every element is read before it is
overwritten and nothing reads the old value after; results checked through the
interpreter, which writes the inputs as the compiled code does."""

from __future__ import annotations

import torch

from conftest import LIBRARY_CPU, prim_graph
from ember_inductor_ir import lower, run_scheduled, schedule
from ember_primops import prims


def _scheduled(fn, inputs, writes):
    lowering = lower(prim_graph(fn, *inputs), list(inputs), target=LIBRARY_CPU, input_writes=writes)
    return schedule(lowering)


def _in_place(sched) -> dict[str, str]:
    return {a.buffer: a.reuses for a in sched.allocations.values() if a.in_place}


def _momentum_step(p, m, g):
    """m' = m * g + g; p' = p - m' (p' reads m' inline: m's old value, before m' is stored)."""
    m2 = prims.add(prims.mul(m, g), g)
    return (prims.sub(p, m2), m2)


def test_an_update_and_its_moment_are_written_into_their_inputs():
    torch.manual_seed(0)
    p, m, g = torch.randn(6, 5), torch.randn(6, 5), torch.randn(6, 5)
    expected = _momentum_step(p, m, g)
    sched = _scheduled(_momentum_step, [p, m, g], [(0, 0), (1, 1)])
    assert sorted(_in_place(sched).values()) == sorted(sched.graph_inputs[:2]), sched.describe()
    p_in, m_in = p.clone(), m.clone()
    got = run_scheduled(sched, [p_in, m_in, g])
    for value, want in zip(got, expected, strict=True):
        torch.testing.assert_close(value, want)
    torch.testing.assert_close(p_in, expected[0])  # the inputs hold the new values
    torch.testing.assert_close(m_in, expected[1])


def test_without_input_writes_nothing_is_in_place():
    sched = _scheduled(_momentum_step, [torch.randn(4)] * 3, [])
    assert not _in_place(sched)


def test_an_input_read_at_other_elements_is_not_overwritten():
    def transposed_sum(x):
        return (prims.add(x, prims.permute(x, [1, 0])),)

    x = torch.randn(4, 4)
    sched = _scheduled(transposed_sum, [x], [(0, 0)])
    assert not _in_place(sched), sched.describe()
    torch.testing.assert_close(run_scheduled(sched, [x.clone()])[0], x + x.t())


def test_an_input_also_returned_is_not_overwritten():
    def bumped_and_old(x):
        return (prims.exp(x), x)

    x = torch.randn(5)
    sched = _scheduled(bumped_and_old, [x], [(0, 0)])
    assert not _in_place(sched)


def test_an_input_read_by_a_later_kernel_is_not_overwritten():
    def update_then_product(x):
        new = prims.exp(x)
        return (new, prims.mm(new, x))  # the product reads the old x after the update

    x = torch.randn(4, 4)
    sched = _scheduled(update_then_product, [x], [(0, 0)])
    assert not _in_place(sched), sched.describe()
    got = run_scheduled(sched, [x.clone()])
    torch.testing.assert_close(got[1], x.exp() @ x)


def test_an_input_read_by_an_earlier_kernel_is_overwritten_after_it():
    def product_then_update(x, w):
        return (prims.exp(x), prims.mm(x, w))

    x, w = torch.randn(3, 4), torch.randn(4, 2)
    sched = _scheduled(product_then_update, [x, w], [(0, 0)])
    assert _in_place(sched), sched.describe()
    x_in = x.clone()
    got = run_scheduled(sched, [x_in, w])
    torch.testing.assert_close(got[1], x @ w)
    torch.testing.assert_close(x_in, x.exp())


def test_a_graph_whose_kernels_may_raise_writes_nothing_in_place():
    """An indirect index is checked and may raise mid-call: the inputs stay untouched."""

    def gather_update(x, idx):  # the gather runs first; the update alone would go in place
        total = prims.sum(prims.index(x, [idx]), [0])
        return (prims.add(x, prims.broadcast_in_dim(total, [5], [])),)

    x, idx = torch.randn(5), torch.tensor([0, 3])
    sched = _scheduled(gather_update, [x, idx], [(0, 0)])
    assert not _in_place(sched), sched.describe()
