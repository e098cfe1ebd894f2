"""Every aten op in the zoo's forward and backward has a decomposition (or is a prim), and
running the zoo under DecomposeMode(strict) reproduces eager's loss and gradients."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import ember_zoo
from ember_primops import decomposition_table, is_prim
from ember_primops.decompose_mode import PASSTHROUGH, DecomposeMode, _functional_variant


class _RecordOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: set[torch._ops.OpOverload] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(func)
        return func(*args, **(kwargs or {}))


def _covered(op, table) -> bool:
    if op in table or is_prim(op) or op in PASSTHROUGH:
        return True
    functional = _functional_variant(op)  # in-place/out=: DecomposeMode functionalizes them
    return functional is not None and functional in table


@pytest.mark.parametrize("name", ember_zoo.names())
def test_zoo_forward_and_backward_ops_all_decompose(name):
    case = ember_zoo.build(name, "tiny")
    recorder = _RecordOps()
    with recorder:
        ember_zoo.training_loss(case).backward()
    table = decomposition_table()
    missing = sorted(str(op) for op in recorder.ops if not _covered(op, table))
    assert not missing, f"{name}: aten ops without a decomposition: {missing}"


@pytest.mark.parametrize("name", ember_zoo.names())
def test_zoo_under_decompose_mode_matches_eager(name):
    eager = ember_zoo.build(name, "tiny")
    decomposed = ember_zoo.build(name, "tiny")
    expected_loss = ember_zoo.training_loss(eager)
    expected_loss.backward()
    mode = DecomposeMode(strict=True)
    with mode:
        loss = ember_zoo.training_loss(decomposed)
        loss.backward()
    assert mode.prim_counts, "nothing ran as prims"
    assert not mode.fallback_counts
    torch.testing.assert_close(loss, expected_loss, rtol=1e-4, atol=1e-5)
    for (pname, p), q in zip(
        eager.model.named_parameters(), decomposed.model.parameters(), strict=True
    ):
        if p.grad is None:
            assert q.grad is None, pname
            continue
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-3, atol=1e-5, msg=pname)
