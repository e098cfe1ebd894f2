"""Max pooling's backward: each input element gathers the gradients of the few windows that
can hold it and keeps those whose saved index is its own position, a pointwise kernel that
fuses with its neighbours. Windows overlapping so much that an element lies in many
(MAX_GATHERED_WINDOWS), and adaptive pools, scatter-add instead (aten's kernel: the
gradient's zeros, then an atomic add for each window)."""

from __future__ import annotations

import itertools
import math

import torch

from ember_primops._namespace import prims
from ember_primops.decompositions._helpers import scalar
from ember_primops.decompositions._registry import register_decomposition
from ember_primops.decompositions.nn_pooling import expand_pool_param, in_layout_of
from ember_primops.decompositions.type_promotion import computation_dtype, convert

aten = torch.ops.aten

#: the most windows along all dims together an input element may lie in for the gather form
#: (a 3x3 window: 4 at stride 2, 9 at stride 1); beyond it, one scatter costs less
MAX_GATHERED_WINDOWS = 16


def _pool_backward_scatter(grad_output, a, indices, spatial_dims):
    lead = a.dim() - spatial_dims
    plane = math.prod(a.shape[lead:])
    g = prims.reshape(grad_output, [*a.shape[:lead], math.prod(grad_output.shape[lead:])])
    idx = prims.reshape(indices, list(g.shape))
    zeros = prims.full([*a.shape[:lead], plane], 0, dtype=g.dtype, device=g.device)
    return prims.reshape(prims.scatter_add(zeros, lead, idx, g), list(a.shape))


def _flat(parts, shape, grid):
    """Sum of 1-d integer tensors ``parts[i]`` (over dim i of ``shape``) times the row-major
    strides of ``grid``: flat positions in ``grid`` at each point of ``shape``."""
    total = None
    for i, part in enumerate(parts):
        step = math.prod(grid[i + 1 :])
        term = prims.broadcast_in_dim(prims.mul(part, scalar(step, part)), list(shape), [i])
        total = term if total is None else prims.add(total, term)
    return total


def _all(masks, shape):
    out = None
    for i, mask in enumerate(masks):
        term = prims.broadcast_in_dim(mask, list(shape), [i])
        out = term if out is None else prims.logical_and(out, term)
    return out


def _max_pool_backward(grad_output, a, kernel_size, stride, padding, dilation, indices, n):
    kernel = expand_pool_param(kernel_size, n)
    stride = expand_pool_param(stride, n, kernel)
    padding = expand_pool_param(padding, n, 0)
    dilation = expand_pool_param(dilation, n, 1)
    spans = [d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True)]
    counts = [-(-span // s) for span, s in zip(spans, stride, strict=True)]
    if math.prod(counts) > MAX_GATHERED_WINDOWS:
        return _pool_backward_scatter(grad_output, a, indices, n)
    lead = a.dim() - n
    ins, outs = list(a.shape[lead:]), list(grad_output.shape[lead:])
    device = a.device
    # int32 positions where the plane allows: int64 arithmetic costs a GPU several
    # instructions an op, and this kernel does a few dozen an element
    positions_type = torch.int32 if math.prod(ins) < 2**31 else torch.int64
    # per dim: the input positions, and for each candidate j the window (last start at or
    # before the position, minus j) clamped into range, with whether it exists
    positions, candidates = [], []
    for i in range(n):
        pos = prims.iota(ins[i], start=0, step=1, dtype=positions_type, device=device)
        last = prims.div(prims.add(pos, scalar(padding[i], pos)), scalar(stride[i], pos))
        options = []
        for j in range(counts[i]):
            window = prims.sub(last, scalar(j, pos))
            exists = prims.logical_and(
                prims.ge(window, scalar(0, pos)), prims.lt(window, scalar(outs[i], pos))
            )
            clamped = prims.minimum(prims.maximum(window, scalar(0, pos)), scalar(outs[i] - 1, pos))
            options.append((clamped, exists))
        positions.append(pos)
        candidates.append(options)
    shape = list(a.shape)

    def spread(t):  # over the spatial grid -> over the input
        return prims.broadcast_in_dim(t, shape, list(range(lead, a.dim())))

    def axis(t, i):  # 1-d over dim i -> [1.., ins[i], ..1]: an advanced index broadcasting
        return prims.reshape(t, [ins[i] if d == i else 1 for d in range(n)])

    own = spread(_flat(positions, ins, ins))
    # narrowed before the gathers: where the forward's index is recomputed here (min-cut),
    # the buffer the gathers read is stored int32, half the bytes of the int64 index
    narrow_indices = convert(indices, positions_type)
    compute = computation_dtype(grad_output.dtype)
    total = None
    for choice in itertools.product(*candidates):
        where = [None] * lead + [
            axis(convert(c, torch.int64), i) for i, (c, _) in enumerate(choice)
        ]
        exists = spread(_all([e for _, e in choice], ins))
        saved = prims.index(narrow_indices, where)
        hit = prims.logical_and(exists, prims.eq(saved, own))
        value = convert(prims.index(grad_output, where), compute)
        term = prims.where(hit, value, scalar(0, value))
        total = term if total is None else prims.add(total, term)
    return in_layout_of(convert(total, grad_output.dtype), a)


@register_decomposition(aten.adaptive_max_pool2d_backward.default)
def adaptive_max_pool2d_backward(grad_output, a, indices):
    return _pool_backward_scatter(grad_output, a, indices, 2)


@register_decomposition(aten.adaptive_max_pool3d_backward.default)
def adaptive_max_pool3d_backward(grad_output, a, indices):
    return _pool_backward_scatter(grad_output, a, indices, 3)


@register_decomposition(aten.max_pool2d_with_indices_backward.default)
def max_pool2d_with_indices_backward(
    grad_output, a, kernel_size, stride, padding, dilation, ceil_mode, indices
):
    return _max_pool_backward(grad_output, a, kernel_size, stride, padding, dilation, indices, 2)


@register_decomposition(aten.max_pool3d_with_indices_backward.default)
def max_pool3d_with_indices_backward(
    grad_output, a, kernel_size, stride, padding, dilation, ceil_mode, indices
):
    return _max_pool_backward(grad_output, a, kernel_size, stride, padding, dilation, indices, 3)
