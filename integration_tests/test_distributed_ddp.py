"""DDP under ember.compile on 2 CPU processes over gloo, against eager DDP.

The scenarios run in two subprocess ranks (distributed_ranks/ddp_scenarios.py, launched by
distributed_ranks/launch.py, bounded by a timeout); each test reads one scenario's result.
The model is 5 Linear layers with a bucket cap of one Linear(32, 32): the graph is split
into 4 pieces (the last two layers share the first bucket, whose cap is reached only once
the 4th layer joins it), each compiled on its own.
"""

from __future__ import annotations

import pytest
import torch.distributed as dist
from distributed_ranks.launch import run_ranks

pytestmark = pytest.mark.skipif(
    not dist.is_available() or not dist.is_gloo_available(),
    reason="needs torch.distributed with gloo",
)
PIECES = 4


@pytest.fixture(scope="module")
def results() -> dict:
    return run_ranks("ddp_scenarios", timeout=120)


def scenario(results: dict, name: str) -> dict:
    result = results[name]
    assert result["ok"], result["error"]
    return result["value"]


def test_compiled_ddp_is_split_at_bucket_boundaries(results):
    value = scenario(results, "ddp_buckets_inductor")
    assert value["max_difference"] < 1e-5
    eager_losses, losses = value["losses"]
    assert losses == pytest.approx(eager_losses, rel=1e-5)
    # one traced graph, split into one compiled forward and backward per bucket
    assert value["ddp"] == {"graphs_seen": 1, "split_graphs": 1, "pieces": PIECES}
    assert value["forward_graphs"] == PIECES
    assert value["backward_graphs"] == PIECES
    # the first bucket's all-reduce starts after only part of the backward has run
    hooks = value["pieces_done_at_each_bucket_hook"]
    assert hooks[0] < PIECES, hooks
    assert hooks == sorted(hooks)


def test_ddp_of_compiled_module_is_split_too(results):
    value = scenario(results, "ddp_inner_compiled")
    assert value["max_difference"] < 1e-5
    assert value["ddp"]["pieces"] == PIECES
    assert value["forward_graphs"] == PIECES


def test_no_sync_and_gradient_accumulation(results):
    value = scenario(results, "no_sync_accumulation")
    assert value["max_difference"] < 1e-5
    assert value["no_sync_grad_difference"] < 1e-5
    assert value["ranks_differ_after_no_sync"]
    assert value["ddp"]["split_graphs"] >= 1


def test_find_unused_parameters(results):
    value = scenario(results, "find_unused_parameters")
    assert value["max_difference"] < 1e-5
    # two graphs (with and without the extra layer), each split
    assert value["ddp"]["split_graphs"] == 2


def test_changing_batch_size_splits_the_symbolic_graph(results):
    value = scenario(results, "dynamic_batch")
    assert value["max_grad_difference"] < 1e-5
    # a static trace, then one symbolic trace for every later size, both split
    assert value["ddp"] == {"graphs_seen": 2, "split_graphs": 2, "pieces": 2 * PIECES}
    assert value["graph_fallbacks"] == 0
