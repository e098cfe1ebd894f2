"""Convolutions: library kernels that run far faster on channels-last (NHWC) data on CPU
(cnn's first convolution ran 4-8x faster), so the lowering stores their inputs channels-last
and declares their results channels-last. Pointwise kernels and pools that read those
results store channels-last too (GraphLowering.realize), so the layout flows from one
convolution to the next without copies; graph outputs still get eager's strides."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.fx
from torch.utils._pytree import tree_flatten

from ..layout import FixedLayout, Layout, channels_last_strides
from ..nodes import IRNode
from .registry import register_lowering

#: Switch for measuring (and for graphs where the copies would cost more than they save).
CHANNELS_LAST = True


def emits_feature_maps(gm: torch.fx.GraphModule) -> bool:
    """Whether the graph returns 4-d values it computes (a training forward saving its
    activations for the backward, a backward returning input gradients). Graph outputs keep
    eager's (contiguous) strides, so each would cost a transposing copy; and such graphs
    reduce batch statistics per channel, which read channels-last data across the grain."""
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    for item in tree_flatten(output.args)[0]:
        if not isinstance(item, torch.fx.Node) or item.op == "placeholder":
            continue
        val = item.meta.get("val")
        if isinstance(val, torch.Tensor) and val.ndim == 4 and val.shape[1] > 1:
            return True
    return False


def wants_channels_last(ctx: Any, x: IRNode, weight: IRNode, transposed: bool) -> bool:
    """2-d, not transposed, on CPU, in a graph that keeps its feature maps to itself: the
    cases measured faster channels-last."""
    return (
        CHANNELS_LAST
        and not emits_feature_maps(ctx.gm)
        and len(x.get_size()) == 4
        and len(weight.get_size()) == 4
        and not transposed
        and x.get_device().type == "cpu"
        and x.get_dtype().is_floating_point
    )


def _channels_last(index: int, layout: Layout) -> Layout:
    """aten returns channels-last results for channels-last inputs (4-d ones)."""
    if len(layout.size) != 4:
        return layout
    return FixedLayout(layout.device, layout.dtype, layout.size, channels_last_strides(layout.size))


@register_lowering("convolution")
def lower_convolution(
    ctx: Any,
    x: IRNode,
    weight: IRNode,
    bias: IRNode | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    transposed: bool,
    output_padding: Sequence[int],
    groups: int,
) -> Any:
    args = [x, weight, bias, stride, padding, dilation, transposed, output_padding, groups]
    if not wants_channels_last(ctx, x, weight, transposed):
        return ctx.extern(ctx.current_node.target, args)
    args[0] = ctx.require_strides(x, channels_last_strides(x.get_size()))
    return ctx.extern(ctx.current_node.target, args, output_layouts=_channels_last)


@register_lowering("convolution_backward")
def lower_convolution_backward(
    ctx: Any, grad_output: IRNode, x: IRNode, weight: IRNode, *rest: Any
) -> Any:
    args = [grad_output, x, weight, *rest]
    transposed = bool(rest[4])
    if not wants_channels_last(ctx, x, weight, transposed):
        return ctx.extern(ctx.current_node.target, args)
    args[0] = ctx.require_strides(grad_output, channels_last_strides(grad_output.get_size()))
    args[1] = ctx.require_strides(x, channels_last_strides(x.get_size()))
    return ctx.extern(ctx.current_node.target, args, output_layouts=_channels_last)
