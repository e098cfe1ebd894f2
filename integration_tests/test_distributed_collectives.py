"""Collectives inside compiled functions on 2 CPU processes over gloo, against eager.

Scenarios: distributed_ranks/collective_scenarios.py (launched by distributed_ranks/launch.py).
"""

from __future__ import annotations

import pytest
import torch.distributed as dist
from distributed_ranks.launch import run_ranks

pytestmark = pytest.mark.skipif(
    not dist.is_available() or not dist.is_gloo_available(),
    reason="needs torch.distributed with gloo",
)


@pytest.fixture(scope="module")
def results() -> dict:
    return run_ranks("collective_scenarios", timeout=120)


def scenario(results: dict, name: str) -> dict:
    result = results[name]
    assert result["ok"], result["error"]
    return result["value"]


def test_tensor_parallel_mlp_is_one_graph(results):
    value = scenario(results, "tensor_parallel_mlp")
    assert value["difference"] == 0.0 and value["again_difference"] == 0.0
    assert value["unsharded_difference"] < 1e-4
    assert value["graph_count"] == 1 and value["breaks"] == []
    assert value["forward_graphs"] == 1
    # the collective and its wait are extern kernels of the compiled graph, not fallbacks
    assert value["collectives"] == {
        "_c10d_functional.all_reduce.default": 1,
        "_c10d_functional.wait_tensor.default": 1,
    }
    assert value["aten_fallbacks"] == {} and value["inductor_fallbacks"] == {}
    (ops,) = value["ops"]
    assert ops.count("matmul") == 2
    assert ops.index("matmul") < ops.index("all_reduce.default") < ops.index("wait_tensor.default")


def test_inplace_c10d_calls_become_functional_collectives(results):
    value = scenario(results, "inplace_c10d_calls")
    assert value["difference"] == 0.0
    assert value["graph_count"] == 1 and value["breaks"] == [] and value["forward_graphs"] == 1
    (ops,) = value["ops"]
    for collective in ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor"):
        assert f"{collective}.default" in ops
    assert ops.count("wait_tensor.default") == 3 and ops.count("copy_") == 3


def test_functional_gather_and_scatter_along_dim_1(results):
    value = scenario(results, "gather_and_scatter_functional")
    assert value["difference"] == 0.0 and value["closed_form_difference"] < 1e-5
    assert value["graph_count"] == 1 and value["breaks"] == []
