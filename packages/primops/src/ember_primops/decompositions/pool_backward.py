"""Pooling's backward: each input element gathers the gradients of the few windows that can
hold it, a pointwise kernel that fuses with its neighbours (as aten's average-pool kernel
loops, but without a launch of its own). Max pooling keeps the windows whose saved index is
the element's own position; windows overlapping so much that an element lies in many
(MAX_GATHERED_WINDOWS), and adaptive pools, scatter-add instead (aten's kernel: the
gradient's zeros, then an atomic add for each window). Average pooling divides each window's
gradient by its divisor; past that many windows it gathers one dim at a time (the divisor
is a product over dims, so the sum factors).

"""

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


def _window_counts(kernel, stride, dilation):
    """Per dim, how many windows at most hold one input element."""
    spans = [d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True)]
    return [-(-span // s) for span, s in zip(spans, stride, strict=True)]


def _positions_type(ins):
    # int32 positions where the plane allows: int64 arithmetic costs a GPU several
    # instructions an op, and these kernels do a few dozen an element
    return torch.int32 if math.prod(ins) < 2**31 else torch.int64


def _candidates(length, out, count, stride, padding, positions_type, device, reach=None):
    """For the input positions along one dim, and each candidate window j (the last one
    starting at or before the position, minus j): the window clamped into range, and
    whether it exists (and, given ``reach``, spans that far, so covers the position)."""
    pos = prims.iota(length, start=0, step=1, dtype=positions_type, device=device)
    shifted = prims.add(pos, scalar(padding, pos))
    last = prims.div(shifted, scalar(stride, pos))
    options = []
    for j in range(count):
        window = prims.sub(last, scalar(j, pos))
        exists = prims.logical_and(
            prims.ge(window, scalar(0, pos)), prims.lt(window, scalar(out, pos))
        )
        if reach is not None:
            offset = prims.sub(shifted, prims.mul(window, scalar(stride, pos)))
            exists = prims.logical_and(exists, prims.lt(offset, scalar(reach, pos)))
        clamped = prims.minimum(prims.maximum(window, scalar(0, pos)), scalar(out - 1, pos))
        options.append((clamped, exists))
    return pos, options


def _max_pool_backward(grad_output, a, kernel_size, stride, padding, dilation, indices, n):
    kernel = expand_pool_param(kernel_size, n)
    stride = expand_pool_param(stride, n, kernel)
    padding = expand_pool_param(padding, n, 0)
    dilation = expand_pool_param(dilation, n, 1)
    counts = _window_counts(kernel, stride, dilation)
    if math.prod(counts) > MAX_GATHERED_WINDOWS:
        return _pool_backward_scatter(grad_output, a, indices, n)
    lead = a.dim() - n
    ins, outs = list(a.shape[lead:]), list(grad_output.shape[lead:])
    positions_type = _positions_type(ins)
    positions, candidates = [], []
    for i in range(n):
        pos, options = _candidates(
            ins[i], outs[i], counts[i], stride[i], padding[i], positions_type, a.device
        )
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


def _window_size(window, length, kernel, stride, padding, count_include_pad):
    """Per clamped window (1-d integers), the element count eager's average divides by."""
    start = prims.sub(prims.mul(window, scalar(stride, window)), scalar(padding, window))
    end = prims.minimum(prims.add(start, scalar(kernel, window)), scalar(length + padding, window))
    if not count_include_pad:
        start = prims.maximum(start, scalar(0, window))
        end = prims.minimum(end, scalar(length, window))
    return prims.sub(end, start)


def _avg_pool_backward(
    grad_output, a, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor, n
):
    kernel = expand_pool_param(kernel_size, n)
    stride = expand_pool_param(stride, n, kernel)
    padding = expand_pool_param(padding, n, 0)
    counts = _window_counts(kernel, stride, [1] * n)
    lead = a.dim() - n
    ins, outs = list(a.shape[lead:]), list(grad_output.shape[lead:])
    positions_type = _positions_type(ins)
    compute = computation_dtype(grad_output.dtype)
    # all dims in one gather kernel, or (too many windows an element) one dim a pass
    passes = (
        [list(range(n))] if math.prod(counts) <= MAX_GATHERED_WINDOWS else [[i] for i in range(n)]
    )
    # one divisor for every window: an override, or padding counted and no window cut short
    # by ceil mode (Inception's pools): divided once, no per-window sizes in the kernel
    full = all(
        (out - 1) * s - p + k <= length + p
        for out, s, p, k, length in zip(outs, stride, padding, kernel, ins, strict=True)
    )
    constant = divisor or (math.prod(kernel) if count_include_pad and full else None)
    g = grad_output
    for number, dims in enumerate(passes):
        shape = [ins[i - lead] if i - lead in dims else size for i, size in enumerate(g.shape)]

        def over(t, i, shape=shape):  # 1-d over spatial dim i -> over this pass's result
            return prims.broadcast_in_dim(t, shape, [lead + i])

        def size_of(c, i):
            if constant is not None:
                return None
            return over(
                _window_size(c, ins[i], kernel[i], stride[i], padding[i], count_include_pad), i
            )

        options = {}
        for i in dims:
            _, per_dim = _candidates(
                ins[i], outs[i], counts[i], stride[i], padding[i], positions_type, a.device,
                reach=kernel[i],
            )  # fmt: skip
            options[i] = [(c, over(e, i), size_of(c, i)) for c, e in per_dim]
        total = None
        for choice in itertools.product(*(options[i] for i in dims)):
            where = [None] * (lead + dims[0]) + [
                prims.reshape(convert(c, torch.int64), [ins[i] if d == i else 1 for d in dims])
                for i, (c, _, _) in zip(dims, choice, strict=True)
            ]
            value = convert(prims.index(g, where), compute)
            if constant is None:  # each window's own count
                sizes = None
                for _, _, part in choice:
                    sizes = part if sizes is None else prims.mul(sizes, part)
                value = prims.div(value, convert(sizes, compute))
            exists = None
            for _, e, _ in choice:
                exists = e if exists is None else prims.logical_and(exists, e)
            term = prims.where(exists, value, scalar(0, value))
            total = term if total is None else prims.add(total, term)
        if constant is not None and number == 0:
            total = prims.div(total, scalar(constant, total))
        g = total
    out = convert(g, grad_output.dtype)
    return in_layout_of(out, a) if n == 2 else out  # as the forward: 3-d stays contiguous


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


def _register_avg_pool_backward(n: int) -> None:
    def decomposition(
        grad_output, a, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor
    ):
        return _avg_pool_backward(
            grad_output, a, kernel_size, stride, padding, ceil_mode, count_include_pad,
            divisor, n,
        )  # fmt: skip

    decomposition.__qualname__ = f"decompose_avg_pool{n}d_backward"
    register_decomposition(getattr(aten, f"avg_pool{n}d_backward").default)(decomposition)


for _n in (2, 3):
    _register_avg_pool_backward(_n)
