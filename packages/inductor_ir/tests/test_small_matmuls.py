"""A bmm over a handful of products per element is loop IR on targets that ask for it
(small_matmuls.py): a multiply and a float32 sum, rounded once, as a GEMM accumulates."""

import dataclasses

import pytest
import torch

from conftest import FUSING_GPU, prim_graph
from ember_inductor_ir import lower, run_scheduled, schedule
from ember_inductor_ir.extern import ExternKernel
from ember_primops import prims

LOOP_MATMULS = dataclasses.replace(FUSING_GPU, name="test-loop-matmuls", loop_matmul_max_k=8)


def _scores(q, k):
    return (prims.bmm(q, prims.permute(k, [0, 2, 1])),)


@pytest.mark.parametrize(("heads", "externs"), [(6, 0), (12, 1)])
def test_a_bmm_of_few_products_is_a_reduction(heads, externs):
    q, k = torch.randn(4, 16, heads).bfloat16(), torch.randn(4, 16, heads).bfloat16()
    lowering = lower(prim_graph(_scores, q, k), [q, k], target=LOOP_MATMULS)
    assert sum(isinstance(op, ExternKernel) for op in lowering.operations) == externs
    (got,) = run_scheduled(schedule(lowering), [q, k])
    (want,) = _scores(q, k)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)


def test_targets_that_do_not_ask_keep_the_library_call():
    q, k = torch.randn(4, 16, 6), torch.randn(4, 16, 6)
    lowering = lower(prim_graph(_scores, q, k), [q, k], target=FUSING_GPU)
    assert sum(isinstance(op, ExternKernel) for op in lowering.operations) == 1
