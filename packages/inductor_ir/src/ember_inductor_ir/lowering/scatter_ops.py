"""``index_put``, ``index_add`` and ``scatter_add``: scatters through data-dependent indices,
run by aten's in-place kernels (``index_put_``, ``index_add_``, ``scatter_add_``).

The prim is functional (its result is a copy of ``a`` with the values written in), but a
copy of ``a`` is only needed when something else still reads ``a``. When the value is a
buffer this graph computed and the scatter is its only reader (an embedding gradient's
zero-filled accumulator, or the matmul it is added to, see :mod:`..add_folds`), the
scatter writes into that buffer and its result aliases it; otherwise it writes into a fresh
copy. Either way no clone is made inside the kernel call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.fx
from torch.utils._pytree import tree_leaves

from ..extern import ExternKernel, ExternOutput
from ..nodes import ComputedBuffer, TensorBox
from ..views import storage_view
from .registry import prim_name, register_lowering
from .view_ops import INJECTIVE_VIEWS


@register_lowering("index_put")
def lower_index_put(
    ctx: Any,
    a: TensorBox,
    indices: Sequence[TensorBox | None],
    values: TensorBox,
    accumulate: bool,
) -> TensorBox:
    node = ctx.current_node
    a_node, index_nodes, values_node = node.args[0], node.args[1], node.args[2]
    return scatter_in_place(ctx, a, a_node, indices, values, accumulate, (index_nodes, values_node))


@register_lowering("scatter_add")
def lower_scatter_add(
    ctx: Any, a: TensorBox, dim: int, index: TensorBox, src: TensorBox
) -> TensorBox:
    """A max-pool's gradient (src added into zeros at the argmax positions): the zeros are
    this graph's own buffer, so aten adds into it instead of cloning it first (the clone
    was a pass over the whole input-sized map, 1.5 ms a step for the cnn's first pool)."""
    node = ctx.current_node
    return _into_own_buffer(
        ctx, a, node.args[0], (node.args[2], node.args[3]),
        torch.ops.aten.scatter_add_.default, [dim, index, src],
    )  # fmt: skip


@register_lowering("index_add")
def lower_index_add(
    ctx: Any, a: TensorBox, dim: int, index: TensorBox, source: TensorBox
) -> TensorBox:
    """An embedding's gradient: rows added at row numbers. aten's ``index_add_`` adds them
    atomically on CUDA (``index_put_``'s accumulation sorts and gives each distinct row to
    one warp; deterministic mode makes ``index_add_`` take that path itself)."""
    node = ctx.current_node
    return add_rows_in_place(ctx, a, node.args[0], dim, index, source, node.args[2:])


def add_rows_in_place(
    ctx: Any,
    a: TensorBox,
    a_node: Any,
    dim: int,
    index: TensorBox,
    source: TensorBox,
    read_nodes: Any,
) -> TensorBox:
    """``index_add(a, dim, index, source)`` as aten's ``index_add_`` on ``a``'s own buffer
    when nothing else reads it, else on a fresh copy of ``a``."""
    return _into_own_buffer(
        ctx, a, a_node, read_nodes, torch.ops.aten.index_add_.default, [dim, index, source]
    )


def _into_own_buffer(
    ctx: Any, a: TensorBox, a_node: Any, read_nodes: Any, op: Any, rest: list
) -> TensorBox:
    """``op(a, *rest)``, an aten op writing ``a`` in place, on ``a``'s own buffer when
    nothing else reads it (``read_nodes``: the FX values ``op`` reads besides ``a``), else on
    a fresh copy of ``a``."""
    owned = may_overwrite(ctx, a, a_node, read_nodes, realize=True)
    target = a if owned else TensorBox(ctx.realize_copy(a))
    arg = ctx.tensor_arg(target)
    layout = arg.view if arg.view is not None else ctx.buffers[arg.name].layout
    (result,) = tree_leaves(
        ctx.extern(op, [target, *rest], output_layouts=lambda k, _: layout, mutates=arg.name)
    )
    return result


def lower_scatter_fold(ctx: Any, add: torch.fx.Node, fold: Any, env: dict) -> TensorBox:
    """``addend + index_put(zeros, I, V, True)`` as ``index_put(addend, I, V, True)``, and
    ``addend + index_add(zeros, d, I, V)`` as ``index_add(addend, d, I, V)``."""
    (scatter,) = fold.absorbed
    if prim_name(scatter.target) == "index_add":
        dim, index, source = scatter.args[1:4]
        return add_rows_in_place(
            ctx, env[fold.addend], fold.addend, dim, env[index], env[source], (index, source)
        )
    index_nodes, values_node = scatter.args[1], scatter.args[2]
    indices = [env[i] if isinstance(i, torch.fx.Node) else i for i in index_nodes]
    return scatter_in_place(
        ctx, env[fold.addend], fold.addend, indices, env[values_node], True,
        (index_nodes, values_node),
    )  # fmt: skip


def scatter_in_place(
    ctx: Any,
    a: TensorBox,
    a_node: Any,
    indices: Sequence[TensorBox | None],
    values: TensorBox,
    accumulate: bool,
    read_nodes: Any,
) -> TensorBox:
    """``index_put(a, indices, values, accumulate)`` as aten's ``index_put_`` on ``a``'s own
    buffer when nothing else reads it (``read_nodes``: the FX values the scatter reads
    besides ``a``), else on a fresh copy of ``a``."""
    return _into_own_buffer(
        ctx, a, a_node, read_nodes,
        torch.ops.aten.index_put_.default, [list(indices), values, accumulate],
    )  # fmt: skip


def may_overwrite(ctx: Any, a: TensorBox, a_node: Any, read_nodes: Any, *, realize: bool) -> bool:
    """``a`` is (a one-to-one view of) a buffer this graph computes into fresh storage, and
    an in-place kernel reading ``read_nodes`` besides it is the only reader of that value.
    ``realize``: a value not stored yet gets its buffer (else it does not qualify)."""
    if not isinstance(a_node, torch.fx.Node):
        return False
    others = {n for n in tree_leaves(read_nodes) if isinstance(n, torch.fx.Node)}
    node = a_node
    while True:
        if len(node.users) != 1 or node in others or node.op != "call_function":
            return False
        name = prim_name(node.target) if isinstance(node.target, torch._ops.OpOverload) else ""
        if name not in INJECTIVE_VIEWS:
            break
        node = node.args[0]
        if not isinstance(node, torch.fx.Node):
            return False
    if realize:
        ctx.realize(a)
    found = storage_view(a)
    if found is None:
        return False
    buffer = found[0]
    if isinstance(buffer, ComputedBuffer):
        return True
    if isinstance(buffer, ExternOutput):
        return _fresh_extern_result(ctx, buffer.name)
    return False  # graph inputs and constants belong to the caller


def _fresh_extern_result(ctx: Any, name: str) -> bool:
    """Library kernels (matmul, convolution) return fresh tensors, and an in-place scatter
    returns the buffer it wrote; a fallback prim may return a view of its inputs."""
    for op in reversed(ctx.operations):
        if isinstance(op, ExternKernel) and any(o.name == name for o in op.outputs):
            return not op.fallback
    return False
