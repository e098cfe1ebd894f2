"""Convolutions: library kernels that run far faster on channels-last (NHWC) data (oneDNN on
the CPU: cnn's first convolution ran 4-8x faster; cuDNN on the GPU), so where the target's
policy says so (channels_last.py) the lowering stores their inputs channels-last and declares
their results channels-last. Pointwise kernels and pools that read those results store
channels-last too (GraphLowering.realize), so the layout flows from one convolution to the
next without copies; graph outputs get the strides their ``meta['val']`` has (eager's, or
channels-last for a training forward's saved activations, see saved_layouts.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch
import torch.fx
from torch.utils._pytree import tree_flatten

from ..channels_last import channels_last_policy
from ..layout import FixedLayout, FlexibleLayout, Layout, channels_last_strides
from ..nodes import ComputedBuffer, IRNode, Pointwise, TensorBox
from ..target import Target
from ..views import broadcast_in_dim, unwrap
from ._helpers import pointwise
from .registry import prim_name, register_lowering


def emits_feature_maps(gm: torch.fx.GraphModule) -> bool:
    """Whether the graph returns 4-d values it computes with eager's contiguous strides (a
    backward's gradients, a training forward's activations when not declared channels-last).
    Each would cost a transposing copy at the end; and a training graph reduces batch
    statistics per channel, which read channels-last data across the grain."""
    return any(not _is_channels_last_val(val) for val in _returned_maps(gm))


def _returned_maps(gm: torch.fx.GraphModule) -> list[torch.Tensor]:
    """The 4-d values of several channels the graph computes and returns, in any layout (a
    training forward's saved activations, a backward's gradients)."""
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    maps = []
    for item in tree_flatten(output.args)[0]:
        if not isinstance(item, torch.fx.Node) or item.op == "placeholder":
            continue
        val = item.meta.get("val")
        if isinstance(val, torch.Tensor) and val.ndim == 4 and val.shape[1] > 1:
            maps.append(val)
    return maps


def _is_channels_last_val(val: torch.Tensor) -> bool:
    return val.is_contiguous(memory_format=torch.channels_last) and not val.is_contiguous()


def conv_wants_channels_last(
    target: Target, gm: torch.fx.GraphModule, rank: int, transposed: bool, floating: bool
) -> bool:
    """2-d, not transposed, floating point, where the target's policy allows it for this
    graph (channels_last.py)."""
    if rank != 4 or transposed or not floating:
        return False
    return channels_last_policy(target).allows(emits_feature_maps(gm))


def wants_channels_last(ctx: Any, x: IRNode, weight: IRNode, transposed: bool) -> bool:
    rank = len(x.get_size()) if len(weight.get_size()) == 4 else 0
    return conv_wants_channels_last(
        ctx.target, ctx.gm, rank, transposed, x.get_dtype().is_floating_point
    )


def weight_gradient_wants_channels_last(
    ctx: Any, x: IRNode, weight: IRNode, transposed: bool
) -> bool:
    """A weight-only convolution backward where the policy runs those NHWC."""
    rank = len(x.get_size()) if len(weight.get_size()) == 4 else 0
    floating = x.get_dtype().is_floating_point
    return (
        rank == 4
        and not transposed
        and floating
        and channels_last_policy(ctx.target).weight_gradients
    )


@dataclass(frozen=True)
class ConvShape:
    out_channels: int
    in_per_group: int
    groups: int


def _channel_multiplier(node: torch.fx.Node | None, shape: ConvShape) -> bool:
    """A grouped convolution with one input channel and several output channels per group
    (a depthwise convolution with a channel multiplier: PiT's pooling, 23-47x slower NHWC)."""
    return shape.groups > 1 and shape.in_per_group == 1 and shape.out_channels > shape.groups


def _image_input(node: torch.fx.Node | None, shape: ConvShape) -> bool:
    """A convolution of an image's few channels into a few others (at most 32) that no
    convolution reads (TNT's pixel embedding, 2.5x slower NHWC), or any such stem in a graph
    that returns no feature maps (inference: LeViT, GhostNet, MobileNet, Inception, RexNet).
    The images arrive NCHW; stored NHWC first, cuDNN still copies them again for three
    channels: on the H200 LeViT's fp32 stem peaks at 1960 MB against 784 NCHW, and NCHW is
    8-45% faster for these in fp32 and bf16 (`tools/gpu/stem_layouts.py`); the next kernel
    stores the result channels-last. A graph returning maps (a training forward's saved
    activations: its stem's weight gradient is not measured NCHW) keeps a stem read by a
    convolution channels-last, and a wider stem (ResNet's 64, PoolFormer's 96 channels:
    30-40% faster NHWC) stays so everywhere."""
    if node is None or shape.in_per_group * shape.groups > 3 or shape.out_channels > 32:
        return False
    if not _read_by_a_convolution(node):
        return True
    module = node.graph.owning_module
    return module is not None and not _returned_maps(module)


def _read_by_a_convolution(node: torch.fx.Node) -> bool:
    seen, todo = {node}, list(node.users)
    while todo:
        user = todo.pop()
        if user in seen:
            continue
        seen.add(user)
        if user.op == "call_function" and _is_convolution(user.target):
            return True
        todo.extend(user.users)
    return False


def _is_convolution(target: object) -> bool:
    return isinstance(target, torch._ops.OpOverload) and prim_name(target) == "convolution"


#: rule name (ChannelsLastPolicy.slow_nhwc) -> whether a convolution of this shape, at this
#: graph node, keeps eager's layout
SLOW_NHWC: dict[str, Callable[[torch.fx.Node | None, ConvShape], bool]] = {
    "channel_multiplier": _channel_multiplier,
    "image_input": _image_input,
}
#: the rules that need only the weight's shape (a backward convolution's too)
SHAPE_ONLY = frozenset({"channel_multiplier"})


def runs_slow_nhwc(
    rules: frozenset[str], node: torch.fx.Node | None, weight_size: Sequence[Any], groups: int
) -> bool:
    """Whether one of ``rules`` (a policy's ``slow_nhwc``) keeps the convolution at ``node``,
    of a weight of ``weight_size``, in eager's layout."""
    if len(weight_size) != 4 or not all(
        isinstance(n, (int, sympy.Integer)) for n in weight_size[:2]
    ):
        return False
    shape = ConvShape(int(weight_size[0]), int(weight_size[1]), int(groups))
    return any(SLOW_NHWC[name](node, shape) for name in sorted(rules))


def keeps_eager_layout(
    ctx: Any, weight: IRNode, groups: int, rules: frozenset[str] | None = None
) -> bool:
    """Whether the target's library runs this convolution far slower NHWC (its policy's
    ``slow_nhwc`` rules, or those of them in ``rules``)."""
    names = channels_last_policy(ctx.target).slow_nhwc
    if rules is not None:
        names = names & rules
    return runs_slow_nhwc(names, ctx.current_node, weight.get_size(), groups)


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
    add_bias = bias is not None and ctx.target.conv_bias_in_kernels
    library_bias = None if add_bias else bias
    args = [x, weight, library_bias, stride, padding, dilation, transposed, output_padding, groups]
    if not wants_channels_last(ctx, x, weight, transposed) or keeps_eager_layout(
        ctx, weight, groups
    ):
        out = ctx.extern(ctx.current_node.target, args)
    else:
        args[0] = ctx.require_strides(x, channels_last_strides(x.get_size()))
        args[1] = _weight_beside_channels_last(ctx, weight)
        out = ctx.extern(ctx.current_node.target, args, output_layouts=_channels_last)
    return _plus_bias(out, bias) if add_bias else out


def _weight_beside_channels_last(ctx: Any, weight: IRNode) -> IRNode:
    """A computed weight (autocast's cast of a parameter) stored channels-last where the
    convolution runs channels-last: the library takes its weight in the input's memory format
    and aten copies any other into it on every call (54 copies a step in Inception v3, 272 in
    HRNet on the GPU). The cast's kernel writes either layout at the same cost. A weight read
    as it is (a parameter), or one another reader needs as traced (a graph output), is left
    as it is."""
    size = weight.get_size()
    if len(size) != 4 or all(n == 1 for n in size[2:]):
        return weight  # a 1x1 kernel's weight is both layouts at once
    node = unwrap(weight)
    undecided = isinstance(node, Pointwise) or (
        isinstance(node, ComputedBuffer)
        and isinstance(node.layout, FlexibleLayout)
        and not node.layout.frozen
    )
    fx_weight = ctx.current_node.args[1]
    only_convolutions = isinstance(fx_weight, torch.fx.Node) and all(
        u.op == "call_function" and u.target == ctx.current_node.target for u in fx_weight.users
    )
    if not (undecided and only_convolutions):
        return weight
    return ctx.require_strides(weight, channels_last_strides(size))


def _plus_bias(out: TensorBox, bias: IRNode) -> TensorBox:
    """``out + bias`` per output channel as a loop body, which the scheduler fuses into the
    kernel that reads the convolution's result. The library would add it in a pass of its
    own over the whole output (aten on CUDA: cuDNN's result, then ``add_``), in the output's
    dtype, as this does."""
    size = out.get_size()
    per_channel = TensorBox(broadcast_in_dim(bias, size, [1]))
    return pointwise([out, per_channel], lambda ops, y, b: ops.add(y, b), out.get_dtype())


@register_lowering("convolution_backward")
def lower_convolution_backward(
    ctx: Any, grad_output: IRNode, x: IRNode, weight: IRNode, *rest: Any
) -> Any:
    args = [grad_output, x, weight, *rest]
    transposed = bool(rest[4])
    weight_only = not rest[-1][0] and rest[-1][1]  # output_mask: no input gradient
    slow = keeps_eager_layout(ctx, weight, rest[6], SHAPE_ONLY)
    if slow or (
        not wants_channels_last(ctx, x, weight, transposed)
        and not (weight_only and weight_gradient_wants_channels_last(ctx, x, weight, transposed))
    ):
        return ctx.extern(ctx.current_node.target, args)
    args[0] = ctx.require_strides(grad_output, channels_last_strides(grad_output.get_size()))
    args[1] = ctx.require_strides(x, channels_last_strides(x.get_size()))
    return ctx.extern(ctx.current_node.target, args, output_layouts=_channels_last)
