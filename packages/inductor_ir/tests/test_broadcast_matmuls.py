"""A matmul over a broadcast's repeated rows multiplies the distinct rows once
(broadcast_matmuls.py): ConViT's positional projection of a table shared by the batch."""

import torch

from conftest import prim_graph
from ember_inductor_ir.broadcast_matmuls import matmuls_over_broadcast_rows
from ember_inductor_ir.extern import ExternKernel
from ember_primops import prims


def _matmul_rows(lowering) -> list[int]:
    ops = [op for op in lowering.operations if isinstance(op, ExternKernel)]
    return [int(lowering.buffers[op.outputs[0].name].layout.size[0]) for op in ops]


def _projected_table(table, weight, bias, x):
    # pos_proj(table.expand(B, ...)) under autocast, then read per batch element
    wide = prims.broadcast_in_dim(table, [4, 6, 6, 3], [0, 1, 2, 3])
    rows = prims.collapse_view(prims.convert_element_type(wide, torch.bfloat16), 0, 3)
    w = prims.permute(prims.convert_element_type(weight, torch.bfloat16), [1, 0])
    product = prims.addmm(prims.convert_element_type(bias, torch.bfloat16), rows, w)
    return (prims.mul(prims.reshape(product, [4, 6, 6, 5]), x),)


def test_a_linear_layer_over_an_expanded_table_runs_once(check):
    table, weight, bias = torch.randn(1, 6, 6, 3), torch.randn(5, 3), torch.randn(5)
    x = torch.randn(4, 6, 6, 5).bfloat16()
    lowering, _ = check(_projected_table, table, weight, bias, x, atol=1e-2, rtol=1e-2)
    assert _matmul_rows(lowering) == [36]  # the table's 36 rows, not the batch's 144


def test_mm_over_a_batch_broadcast_of_a_middle_dim(check):
    def fn(table, w):
        wide = prims.broadcast_in_dim(table, [3, 4, 8], [1, 2])  # a new leading dim
        return (prims.mm(prims.reshape(wide, [12, 8]), w),)

    lowering, _ = check(fn, torch.randn(4, 8), torch.randn(8, 2))
    assert _matmul_rows(lowering) == [4]


def test_a_broadcast_of_the_reduced_dim_is_left_alone():
    def fn(col, w):
        wide = prims.broadcast_in_dim(col, [6, 8], [0, 1])  # [6, 1] stretched along K
        return (prims.mm(wide, w),)

    gm = prim_graph(fn, torch.randn(6, 1), torch.randn(8, 2))
    assert matmuls_over_broadcast_rows(gm) is gm
