"""A loops group's nodes in as few passes over the row as their dependences allow
(scheduler/pass_order.py): two batch-norm backward statistics over one gradient, each
divided in its reduction's kernel (graph.STATISTIC_BROADCAST_MIN), reduce in one pass."""

import importlib

import torch

from conftest import BN_SHAPE as SHAPE
from conftest import FUSING_GPU, check_against_eager, over_channels, per_channel
from ember_inductor_ir import schedule
from ember_primops import prims


def _two_statistics(grad, x1, x2):
    n = SHAPE[0] * SHAPE[2] * SHAPE[3]
    first = prims.div(prims.sum(prims.mul(grad, x1), [0, 2, 3]), per_channel(n))
    second = prims.div(prims.sum(prims.mul(grad, x2), [0, 2, 3]), per_channel(n))
    scaled = prims.add(prims.mul(x1, over_channels(first)), prims.mul(x2, over_channels(second)))
    return (prims.sub(grad, scaled),)


def _row_passes(group) -> int:
    """Maximal runs of row nodes (reduction or full): one pass over the row each."""
    kinds = ["outer" if n.placement == "outer" else "row" for n in group.nodes]
    return sum(1 for k, kind in enumerate(kinds) if kind == "row" and kinds[k - 1 : k] != ["row"])


def _reduction_group(inputs):
    lowering = check_against_eager(_two_statistics, *inputs, target=FUSING_GPU)[0]
    groups = [g for g in schedule(lowering) if g.reduction_sizes]
    assert len(groups) == 1, [g.describe() for g in groups]
    return groups[0]


def _inputs():
    torch.manual_seed(0)
    return [torch.randn(SHAPE) for _ in range(3)]


def test_both_statistics_reduce_in_one_pass():
    group = _reduction_group(_inputs())
    placements = [n.placement for n in group.nodes]
    assert placements.count("reduction") == 2 and "outer" in placements, placements
    assert _row_passes(group) == 1, placements


def test_in_program_order_the_first_division_cuts_the_pass(monkeypatch):
    schedule_module = importlib.import_module("ember_inductor_ir.scheduler.schedule")
    monkeypatch.setattr(schedule_module, "in_pass_order", lambda nodes, accesses: nodes)
    assert _row_passes(_reduction_group(_inputs())) == 2
