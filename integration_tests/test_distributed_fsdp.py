"""FSDP2 (`torch.distributed.fsdp.fully_shard` per block and on the root) under ember.compile
on 2 CPU processes over gloo, against eager FSDP2 (torch 2.13 runs fully_shard on CPU
with gloo). Scenarios: distributed_ranks/fsdp_scenarios.py.

FSDP's hooks (all-gather before a block, reshard after, reduce-scatter in backward) run
eagerly: the root's trace breaks at each sharded block's call, and each block's forward
is one graph of its own.
"""

from __future__ import annotations

import pytest
import torch.distributed as dist
from distributed_ranks.launch import run_ranks

pytestmark = pytest.mark.skipif(
    not dist.is_available() or not dist.is_gloo_available(),
    reason="needs torch.distributed with gloo",
)
BLOCK_OPS = ["layer_norm", "linear", "tanh", "add"]
STEPS, BLOCKS = 3, 3


@pytest.fixture(scope="module")
def results() -> dict:
    return run_ranks("fsdp_scenarios", timeout=120)


def scenario(results: dict, name: str) -> dict:
    result = results[name]
    assert result["ok"], result["error"]
    return result["value"]


def test_compiled_root_trains_like_eager_fsdp(results):
    value = scenario(results, "fsdp_root_compiled")
    eager_losses, losses = value["losses"]
    assert losses == pytest.approx(eager_losses, rel=1e-5)
    assert value["max_difference"] < 1e-5
    # each block's forward is one graph (shared by the blocks), the head another
    assert BLOCK_OPS in value["graph_ops"] and ["linear"] in value["graph_ops"]
    assert value["forward_runs"] == STEPS * (BLOCKS + 1)
    assert value["backward_runs"] == STEPS * (BLOCKS + 1)


def test_compiled_blocks_train_like_eager_fsdp(results):
    value = scenario(results, "fsdp_blocks_compiled")
    eager_losses, losses = value["losses"]
    assert losses == pytest.approx(eager_losses, rel=1e-5)
    assert value["max_difference"] < 1e-5
    assert value["forward_runs"] == STEPS * BLOCKS
