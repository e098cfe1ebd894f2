"""A division or root of a reduction's results that a reader broadcasts widely is stored
(graph.py: STATISTIC_BROADCAST_MIN): a batch norm's per-channel rstd, unsqueezed to
[1, C, 1, 1] and multiplied into every element, is computed once per channel in the
statistics' kernel rather than for every element of the normalize."""

import torch

from conftest import BN_SHAPE as SHAPE
from conftest import FUSING_GPU, check_against_eager, over_channels, per_channel
from ember_inductor_ir import schedule
from ember_inductor_ir.nodes import ComputedBuffer, Reduction
from ember_primops import prims


def _normalize(x):
    # batch-norm statistics over N, H, W; rstd = 1 / sqrt(var + eps), broadcast through a
    # [1, C, 1, 1] unsqueeze, as the decomposition writes it
    n = SHAPE[0] * SHAPE[2] * SHAPE[3]
    mean = prims.div(prims.sum(x, [0, 2, 3]), per_channel(n))
    centered = prims.sub(x, prims.broadcast_in_dim(mean, SHAPE, [1]))
    var = prims.div(prims.sum(prims.mul(centered, centered), [0, 2, 3]), per_channel(n))
    rstd = prims.rsqrt(prims.add(var, per_channel(1e-5)))
    return (prims.mul(centered, over_channels(rstd)),)


def _scale_by_parameter(x, var):
    # the same root of a parameter (eval-mode batch norm): no reduction's kernel to join
    rstd = prims.rsqrt(prims.add(var, per_channel(1e-5)))
    return (prims.mul(x, over_channels(rstd)),)


def _lower_and_check(fn, *inputs):
    return check_against_eager(fn, *inputs, target=FUSING_GPU)[0]


def _stored_statistics(lowering) -> list[ComputedBuffer]:
    """Buffers of C elements computed pointwise (not reductions themselves)."""
    return [
        b
        for b in lowering.buffers.values()
        if isinstance(b, ComputedBuffer)
        and not isinstance(b.data, Reduction)
        and [int(s) for s in b.layout.size] in ([SHAPE[1]], [1, SHAPE[1], 1, 1])
    ]


def test_a_reductions_mean_and_rstd_are_stored_onceper_channel():
    lowering = _lower_and_check(_normalize, torch.randn(SHAPE))
    origins = sorted(b.origins[0].split("_")[0] for b in _stored_statistics(lowering))
    assert origins == ["div", "rsqrt"], origins


def test_the_stored_statistics_join_their_reductions_kernels(monkeypatch):
    from ember_inductor_ir import graph

    x = torch.randn(SHAPE)
    with_rule = schedule(_lower_and_check(_normalize, x))
    monkeypatch.setattr(graph, "STATISTIC_BROADCAST_MIN", 0)
    lowering = _lower_and_check(_normalize, x)
    assert _stored_statistics(lowering) == []  # recomputed for every element instead
    assert len(with_rule) == len(schedule(lowering)) == 2  # no kernel of their own


def test_a_parameters_root_stays_inline():
    lowering = _lower_and_check(_scale_by_parameter, torch.randn(SHAPE), torch.rand(SHAPE[1]))
    assert _stored_statistics(lowering) == []
