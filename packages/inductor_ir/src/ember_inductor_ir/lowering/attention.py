"""Attention prims: one extern kernel each, fed the layouts eager feeds them.

The fused kernels take any strides, and their outputs follow the query's layout (HF's
transposed heads give a ``(B, L, H, E)``-ordered output whose head merge is a free view). An
argument that is a buffer or a strided view of one is passed as it is; one that must be
computed first (a bias add under a select of a fused qkv projection, an attention mask) is
stored in the order of the strides the trace saw, with eager's 16-byte row alignment and
broadcast dims outermost, not contiguous, so the kernel sees what eager's sees.
The outputs' layouts are then what the kernel returns for the arguments as laid out here
(its meta function on those strides), so the wrapper never copies a result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
import torch
import torch.fx
from torch.utils._pytree import tree_flatten

from ..layout import FixedLayout, Layout, size_expr
from ..nodes import IRNode, TensorBox
from ..views import storage_view
from .registry import register_lowering

ATTENTION_PRIMS = (
    "sdpa_flash_cpu",
    "sdpa_flash_cpu_backward",
    "sdpa_flash_cuda",
    "sdpa_flash_cuda_backward",
    "sdpa_efficient",
    "sdpa_efficient_backward",
)


#: bytes at which eager's fused attention kernels want rows aligned (aten pads a bias to it)
ROW_ALIGNMENT = 16


def strides_as_fed(size: Sequence[Any], stride: Sequence[int], itemsize: int) -> list[Any]:
    """Strides for storing a computed argument the way eager laid it out (traced ``stride``
    values): dims ordered as those strides order them, each row aligned as eager's was (an
    attention bias whose rows aten padded to 16 bytes: the fused kernels read rows at that
    alignment), dense otherwise; dims eager broadcast (stride 0) or of size 1 go outermost
    (a broadcast dim innermost would give the rows a stride other than 1). Symbolic sizes
    get dense strides in that order (products of size expressions)."""
    exprs = [sympy.sympify(n) for n in size]
    align = max(1, ROW_ALIGNMENT // itemsize)
    broadcast = [d for d in range(len(size)) if stride[d] == 0 or exprs[d] == 1]
    order = sorted(
        (d for d in range(len(size)) if d not in broadcast), key=lambda d: (stride[d], -d)
    )  # innermost first
    result: list[Any] = [0] * len(size)
    step: Any = sympy.Integer(1)
    for d in [*order, *reversed(broadcast)]:
        padded = step.is_Integer and int(step) % align and d not in broadcast
        if padded and stride[d] % align == 0 and stride[d] >= int(step):
            step = sympy.Integer(-(-int(step) // align) * align)  # eager's row padding
        result[d] = step
        n = exprs[d]
        step = step * (max(int(n), 1) if n.is_Integer else n)
    return result


def _static(values: Sequence[Any]) -> list[int] | None:
    exprs = [sympy.sympify(v) for v in values]
    return [int(e) for e in exprs] if all(e.is_Integer for e in exprs) else None


def _stride_hints(ctx: Any, traced: torch.Tensor) -> list[int] | None:
    """The traced strides' values on the example inputs: they only order the dims of a
    dense layout (dense for every size whatever the order), never a correctness decision."""
    strides = [size_expr(s) for s in traced.stride()]
    if all(isinstance(s, int) for s in strides):
        return strides  # type: ignore[return-value]
    env = ctx.shape_env
    if env is None:
        return None
    return [s if isinstance(s, int) else int(env.size_hint(s)) for s in strides]


def _as_fed(ctx: Any, value: IRNode, traced: torch.Tensor) -> IRNode:
    ctx._realize_view_base(value)  # a transposed computed value: computed once, read as a view
    if storage_view(value) is not None:
        return value
    size = list(value.get_size())
    hints = _stride_hints(ctx, traced)
    if hints is None:
        return value  # no order known: the extern argument's default copy
    layout = FixedLayout(
        value.get_device(),
        value.get_dtype(),
        size,
        strides_as_fed(size, hints, value.get_dtype().itemsize),
    )
    return TensorBox(ctx.realize_copy(value, layout))


def _meta_of(value: IRNode) -> torch.Tensor | None:
    found = storage_view(value)
    if found is None:
        return None
    size, stride = _static(found[1].size), _static(found[1].stride)
    if size is None or stride is None:
        return None
    return torch.empty_strided(size, stride, dtype=value.get_dtype(), device="meta")


@register_lowering(*ATTENTION_PRIMS)
def lower_attention(ctx: Any, *args: Any) -> Any:
    node = ctx.current_node
    fed = list(args)
    for i, (value, fx_arg) in enumerate(zip(args, node.args, strict=False)):
        traced = fx_arg.meta.get("val") if isinstance(fx_arg, torch.fx.Node) else None
        if isinstance(value, IRNode) and isinstance(traced, torch.Tensor):
            fed[i] = _as_fed(ctx, value, traced)
    metas = [_meta_of(v) if isinstance(v, IRNode) else v for v in fed]
    if any(m is None and isinstance(v, IRNode) for m, v in zip(metas, fed, strict=True)):
        return ctx.extern(node.target, fed)  # eager's strides; the wrapper adopts others
    returned = [o for o in tree_flatten(node.target(*metas))[0]]

    def output_layouts(k: int, layout: Layout) -> Layout:
        out = returned[k]
        if not isinstance(out, torch.Tensor) or list(out.shape) != _static(layout.size):
            return layout
        return FixedLayout(layout.device, layout.dtype, layout.size, list(out.stride()))

    return ctx.extern(node.target, fed, output_layouts=output_layouts)
