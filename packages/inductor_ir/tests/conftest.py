"""Test helpers: FX graphs of prims with fake-tensor metadata, and the eager oracle."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._pytree import tree_map

from ember_inductor_ir import (
    OP_NAMES,
    OUT_VARIANT_PRIMS,
    ChannelsLastPolicy,
    Target,
    lower,
    run_scheduled,
    schedule,
)

#: The code generators' capability records are declared by ember_codegen, which these tests
#: do not import: two records of the same shape stand in for them. A CPU code generator that
#: hands to libraries what its loops do poorly (ember_codegen's "cpp": addmm folds, batched
#: step matmuls, a library cat of many inputs, out= results, channels-last but for training)
LIBRARY_CPU = Target(
    name="test-library-cpu",
    device_type="cpu",
    ops=frozenset(OP_NAMES),
    out_variant_prims=OUT_VARIANT_PRIMS,
    fold_matmul_epilogues=True,
    batch_step_matmuls=True,
    cat_extern_inputs=8,
    channels_last=ChannelsLastPolicy(inference=True, training=False, weight_gradients=True),
)
#: and a GPU one that keeps all of that as loop IR and trains channels-last ("triton")
FUSING_GPU = Target(
    name="test-fusing-gpu",
    device_type="cuda",
    ops=frozenset(OP_NAMES),
    channels_last=ChannelsLastPolicy(inference=True, training=True, weight_gradients=True),
)


class _MetaPass(torch.fx.Interpreter):
    """Run the graph on fake tensors and record each node's value in meta['val']."""

    def run_node(self, n: torch.fx.Node) -> Any:
        result = super().run_node(n)
        n.meta["val"] = result
        return result


def prim_graph(fn: Callable, *inputs: Any) -> torch.fx.GraphModule:
    gm = torch.fx.symbolic_trace(fn)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        fakes = tree_map(
            lambda x: mode.from_tensor(x) if isinstance(x, torch.Tensor) else x, list(inputs)
        )
        _MetaPass(gm).run(*fakes)
    return gm


def compile_and_run(
    fn: Callable, *inputs: Any, target: Target = LIBRARY_CPU
) -> tuple[Any, Any, list[Any]]:
    gm = prim_graph(fn, *inputs)
    lowering = lower(gm, list(inputs), target=target)
    sched = schedule(lowering)
    return lowering, sched, run_scheduled(sched, list(inputs))


def check_against_eager(
    fn: Callable, *inputs: Any, atol: float = 1e-5, rtol: float = 1e-5, target: Target = LIBRARY_CPU
):
    """Lower for ``target``, schedule and interpret ``fn``; compare every output with eager
    (values, dtype, shape and strides). Returns (lowering, schedule)."""
    expected = fn(*inputs)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    lowering, sched, got = compile_and_run(fn, *inputs, target=target)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=False):
        torch.testing.assert_close(g, e, atol=atol, rtol=rtol, equal_nan=True)
        if e.numel() > 1:
            assert [s for s, n in zip(g.stride(), g.shape, strict=False) if n > 1] == [
                s for s, n in zip(e.stride(), e.shape, strict=False) if n > 1
            ], (g.stride(), e.stride())
    return lowering, sched


@pytest.fixture
def check():
    return check_against_eager


#: a batch norm's input, [N, C, H, W], for the per-channel statistic tests
BN_SHAPE = [4, 8, 6, 6]


def per_channel(value: float):
    """A [C] tensor of ``value`` (a statistic's divisor or eps), as a decomposition writes it."""
    from ember_primops import prims

    scalar = prims.scalar_tensor(value, dtype=torch.float32, device=torch.device("cpu"))
    return prims.broadcast_in_dim(scalar, [BN_SHAPE[1]], [])


def over_channels(values):
    """A [C] statistic broadcast through a [1, C, 1, 1] unsqueeze to the whole input."""
    from ember_primops import prims

    unsqueezed = prims.broadcast_in_dim(values, [1, BN_SHAPE[1], 1, 1], [1])
    return prims.broadcast_in_dim(unsqueezed, BN_SHAPE, [0, 1, 2, 3])
