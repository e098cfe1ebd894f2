"""Prim graphs run op by op with each prim's implementation called directly (direct_prims.py):
the same values and strides as the checked calls, views untouched."""

from __future__ import annotations

import torch

from ember.backends.direct_prims import with_direct_prims
from ember_aot_autograd import trace_to_aten
from ember_primops import decomposition_table, is_prim


def _adam_like(param, grad, exp_avg, exp_avg_sq, step):
    """The arithmetic of an Adam update, written as users' optimizers do."""
    step = step + 1
    exp_avg = exp_avg.lerp(grad, 0.1)
    exp_avg_sq = exp_avg_sq * 0.999 + grad * grad * 0.001
    bias1, bias2 = 1 - 0.9**step, 1 - 0.999**step
    update = (exp_avg / bias1) / ((exp_avg_sq / bias2).sqrt() + 1e-8)
    return param - 1e-3 * update, exp_avg, exp_avg_sq, step, update.t()[1:].sum(0)


def _inputs():
    torch.manual_seed(0)
    return [torch.randn(8, 16), torch.randn(8, 16), torch.zeros(8, 16), torch.zeros(8, 16),
            torch.tensor(3.0)]  # fmt: skip


def _prim_graph():
    gm = trace_to_aten(_adam_like, _inputs(), decomposition_table())
    assert any(n.op == "call_function" and is_prim(n.target) for n in gm.graph.nodes)
    return gm


def test_direct_prims_give_the_checked_graphs_values_and_strides():
    gm = _prim_graph()
    direct = with_direct_prims(gm)
    assert not any(n.op == "call_function" and is_prim(n.target) and not _is_view(n)
                   for n in direct.graph.nodes)  # fmt: skip
    want, got = gm(*_inputs()), direct(*_inputs())
    for w, g in zip(want, got, strict=True):
        torch.testing.assert_close(g, w)
        assert g.stride() == w.stride()
    for w, g in zip(want, _adam_like(*_inputs()), strict=True):
        torch.testing.assert_close(g, w)  # and eager's values


def _is_view(node) -> bool:
    from ember_primops import get_prim

    return get_prim(node.target).is_view
