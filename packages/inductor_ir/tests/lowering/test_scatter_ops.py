"""scatter_add runs as aten's in-place scatter_add_ (scatter_ops.py): into the zeros a pool's
gradient fills when only the scatter reads them, else into a fresh copy; graph inputs and
values read elsewhere are never written."""

import torch
from test_add_folds import F32, check_traced

from ember_inductor_ir.extern import ExternKernel
from ember_inductor_ir.nodes import ComputedBuffer
from ember_primops import prims

# a 2x2 max-pool's argmax positions in each 4x4 plane (flattened), one per window
INDEX = torch.tensor([[0, 3, 9, 14], [5, 6, 8, 15]]).expand(2, 2, 4).contiguous()


def _scatter_adds(lowering) -> list[ExternKernel]:
    return [
        op
        for op in lowering.operations
        if isinstance(op, ExternKernel) and op.kernel is torch.ops.aten.scatter_add_.default
    ]


def _pool_gradient(index, grad):
    return (prims.scatter_add(prims.full([2, 2, 16], 0, **F32), 2, index, grad),)


def test_a_pool_gradient_scatters_into_its_zeros(check):
    lowering, _ = check_traced(check, _pool_gradient, INDEX, torch.randn(2, 2, 4))
    (scatter,) = _scatter_adds(lowering)
    (fill,) = [op for op in lowering.operations if isinstance(op, ComputedBuffer)]
    assert scatter.mutates == fill.name and not lowering.fallback_counts


def test_repeated_positions_accumulate(check):
    index = torch.tensor([[[1, 1, 1, 7]]])
    lowering, _ = check_traced(
        check,
        lambda i, g: (prims.scatter_add(prims.full([1, 1, 8], 0, **F32), 2, i, g),),
        index,
        torch.randn(1, 1, 4),
    )
    assert len(_scatter_adds(lowering)) == 1


def test_a_value_read_elsewhere_is_copied_not_overwritten(check):
    def fn(x, index, grad):
        y = prims.exp(x)
        return prims.scatter_add(y, 2, index, grad), prims.mul(y, y)

    lowering, _ = check(fn, torch.randn(2, 2, 16), INDEX, torch.randn(2, 2, 4))
    (scatter,) = _scatter_adds(lowering)
    (exp,) = [op for op in lowering.operations if op.origins == ["exp_default"]]
    assert scatter.mutates != exp.name


def test_graph_inputs_are_never_written(check):
    x = torch.randn(2, 2, 16)
    before = x.clone()
    lowering, _ = check(
        lambda a, i, g: (prims.scatter_add(a, 2, i, g),), x, INDEX, torch.randn(2, 2, 4)
    )
    assert torch.equal(x, before)
    (scatter,) = _scatter_adds(lowering)
    assert scatter.mutates not in lowering.graph_inputs


def _kernels(lowering) -> list:
    return [op.kernel for op in lowering.operations if isinstance(op, ExternKernel)]


def _rows_added_into_zeros(index, values):
    return (prims.index_add(prims.full([4, 3], 0, **F32), 0, index, values),)


def test_rows_added_at_repeated_row_numbers_run_as_index_add_into_the_zeros(check):
    # an embedding's gradient into few rows (t5's relative-position buckets): index_put_'s
    # CUDA accumulation serializes each distinct row, index_add_ adds atomically
    idx = torch.tensor([1, 3, 1, 1, 0, 3, 1, 1])
    lowering, _ = check_traced(check, _rows_added_into_zeros, idx, torch.randn(8, 3))
    assert _kernels(lowering) == [torch.ops.aten.index_add_.default]
    (scatter,) = [op for op in lowering.operations if isinstance(op, ExternKernel)]
    (fill,) = [op for op in lowering.operations if isinstance(op, ComputedBuffer)]
    assert scatter.mutates == fill.name and not lowering.fallback_counts


def test_columns_added_into_an_input_go_into_a_copy(check):
    x = torch.randn(3, 5)
    before = x.clone()
    lowering, _ = check(
        lambda a, i, v: (prims.index_add(a, 1, i, v),), x, torch.tensor([4, 0, 4]),
        torch.randn(3, 3),
    )  # fmt: skip
    assert torch.equal(x, before)
    assert _kernels(lowering) == [torch.ops.aten.index_add_.default]
