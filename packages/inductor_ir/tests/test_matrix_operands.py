"""A library matmul's operands get rows padded to the target's alignment where the IR still
decides their strides (matrix_operands.py); results stay eager's."""

import dataclasses

import pytest
import torch

from conftest import FUSING_GPU, prim_graph
from ember_inductor_ir import lower, run_scheduled, schedule
from ember_inductor_ir.extern import ExternKernel, TensorArg
from ember_primops import prims

#: rows padded to 16 bytes: four float32 values
ALIGNED = dataclasses.replace(FUSING_GPU, name="test-aligned-gpu", matmul_row_alignment=16)


def _run(fn, *inputs, target=ALIGNED):
    gm = prim_graph(fn, *inputs)
    lowering = lower(gm, list(inputs), target=target)
    got = run_scheduled(schedule(lowering), list(inputs))
    for g, e in zip(got, fn(*inputs), strict=True):
        torch.testing.assert_close(g, e)
        assert g.stride() == e.stride()
    return [
        [_strides(lowering, arg) for arg in op.args if isinstance(arg, TensorArg)]
        for op in lowering.operations
        if isinstance(op, ExternKernel)
    ]


def _strides(lowering, arg: TensorArg) -> list[int]:
    """The strides the library reads: the view's, else its buffer's own."""
    layout = arg.view if arg.view is not None else lowering.buffers[arg.name].layout
    return [int(s) for s in layout.stride]


def _scores(x, v):
    # a softmax-like row of 34 tokens read by bmm as its left operand
    return (prims.bmm(prims.exp(x), v),)


def test_an_unaligned_row_read_by_bmm_is_padded():
    ((a, v),) = _run(_scores, torch.randn(2, 10, 34), torch.randn(2, 34, 8))
    assert a == [360, 36, 1]  # 34 -> 36 float32: 144 bytes a row
    assert v == [272, 8, 1]


def test_a_transposed_copy_for_bmm_is_padded():
    # k^T of heads split from one projection: the view needs a copy, stored padded
    def fn(q, proj):
        k = prims.permute(prims.reshape(prims.sin(proj), [2, 34, 2, 8]), [0, 2, 3, 1])
        return (prims.bmm(q, prims.reshape(k, [4, 8, 34])),)

    ((_, kt),) = _run(fn, torch.randn(4, 5, 8), torch.randn(2, 34, 16))
    assert kt == [288, 36, 1]


@pytest.mark.parametrize("tokens", [6, 36])
def test_short_or_aligned_rows_keep_their_strides(tokens):
    ((a, _),) = _run(_scores, torch.randn(2, 10, tokens), torch.randn(2, tokens, 8))
    assert a == [10 * tokens, tokens, 1]


def test_a_target_without_alignment_keeps_eager_strides():
    ((a, _),) = _run(_scores, torch.randn(2, 10, 34), torch.randn(2, 34, 8), target=FUSING_GPU)
    assert a == [340, 34, 1]


def test_a_padded_operand_that_is_also_an_output_is_returned_with_eager_strides():
    def fn(x, v):
        a = prims.exp(x)
        return prims.bmm(a, v), a

    ((a, _),) = _run(fn, torch.randn(2, 10, 34), torch.randn(2, 34, 8))
    assert a == [360, 36, 1]
