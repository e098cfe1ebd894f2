"""Matmuls over the steps of one tensor with one weight run as one matmul."""

import torch

from ember_inductor_ir.extern import ExternKernel
from ember_primops import prims

B, T, K, N = 3, 4, 5, 6


def _step(x, t, dim):
    start, limit = [0, 0, 0], [B, T, K]
    start[dim], limit[dim] = t, t + 1
    return prims.squeeze(prims.slice(x, start, limit, [1, 1, 1]), [dim])


def _matmuls(lowering) -> list[ExternKernel]:
    return [op for op in lowering.operations if isinstance(op, ExternKernel)]


def test_a_projection_of_every_step_is_one_matmul(check):
    # x[:, t] @ w.T for each step of an unrolled loop, each product read by that step
    def fn(x, w):
        outs = [prims.exp(prims.mm(_step(x, t, 1), prims.permute(w, [1, 0]))) for t in range(T)]
        return tuple(outs)

    lowering, _ = check(fn, torch.randn(B, T, K), torch.randn(N, K))
    (mm,) = _matmuls(lowering)
    assert [int(s) for s in lowering.buffers[mm.outputs[0].name].layout.size] == [B * T, N]


def test_steps_along_the_leading_dim(check):
    def fn(x, w):
        return tuple(prims.mm(_step(x, t, 0), w) for t in range(B))

    lowering, _ = check(fn, torch.randn(B, T, K), torch.randn(K, N))
    assert len(_matmuls(lowering)) == 1


def test_a_recurrence_keeps_its_matmuls(check):
    # h_t = tanh(x_t @ w + h_{t-1} @ u): the u products feed one another
    def fn(x, w, u, h):
        for t in range(T):
            h = prims.tanh(prims.add(prims.mm(_step(x, t, 1), w), prims.mm(h, u)))
        return (h,)

    lowering, _ = check(
        fn, torch.randn(B, T, K), torch.randn(K, N), torch.randn(N, N), torch.randn(B, N)
    )
    assert len(_matmuls(lowering)) == 1 + T  # the x projections batched, the recurrence not


def test_some_steps_only_are_left_alone(check):
    def fn(x, w):
        return tuple(prims.mm(_step(x, t, 1), w) for t in (0, 2))

    lowering, _ = check(fn, torch.randn(B, T, K), torch.randn(K, N))
    assert len(_matmuls(lowering)) == 2
