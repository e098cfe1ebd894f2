"""Lowerings of the adds in :mod:`..add_folds`: the kernel that computes one term
accumulates into the other's buffer."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx
from torch.utils._pytree import tree_leaves

from ember_primops import prims

from ..nodes import TensorBox
from .scatter_ops import lower_scatter_fold, may_overwrite
from .view_ops import lower_permute


def lower_matmul_fold(ctx: Any, add: torch.fx.Node, fold: Any, env: dict) -> TensorBox | None:
    """``addend + a @ b`` as ``addmm_(addend, a, b)`` when the addend's buffer is this add's
    alone and stored already; else None (the add is lowered as written: a copy for addmm
    would cost the pass the fold saves, and the add may still fuse with its reader)."""
    mm = fold.absorbed[0]
    addend = env[fold.addend]
    if not may_overwrite(ctx, addend, fold.addend, mm.args, realize=False):
        return None
    a, b = env[mm.args[0]], env[mm.args[1]]
    if fold.transposed:  # addend + (a @ b).T = addend + b.T @ a.T
        a, b = lower_permute(ctx, b, [1, 0]), lower_permute(ctx, a, [1, 0])
    arg = ctx.tensor_arg(addend)
    layout = arg.view if arg.view is not None else ctx.buffers[arg.name].layout
    (result,) = tree_leaves(
        ctx.extern(
            torch.ops.aten.addmm_.default,
            [addend, a, b],
            output_layouts=lambda k, _: layout,
            mutates=arg.name,
        )
    )
    return result


def lower_bias_fold(ctx: Any, add: torch.fx.Node, fold: Any, env: dict) -> TensorBox:
    """``bias + a @ b`` as ``addmm(bias, a, b)`` written into planned storage (``out=``);
    the bias is passed unbroadcast (addmm broadcasts it over the rows)."""
    (mm,) = fold.absorbed
    bias = env[fold.addend.args[0]]
    a, b = env[mm.args[0]], env[mm.args[1]]
    (result,) = tree_leaves(ctx.extern(prims.addmm, [bias, a, b], writes_out=True))
    return result


#: Fold kind (add_folds.Fold.kind) -> its lowering; None from a lowering: lower as written.
FOLD_LOWERINGS = {
    "scatter": lower_scatter_fold,
    "matmul": lower_matmul_fold,
    "bias": lower_bias_fold,
}
