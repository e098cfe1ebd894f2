"""The backward of resampling views: nearest upsampling and ``Tensor.unfold``.

Nearest upsampling by a whole factor k sends each input element to a k-long run of outputs
along each dim, so its gradient is a sum over k-blocks: a reshape and a reduction, which
fuse (HRNet's fusion layers upsample by 2, 4 and 8). Other ratios add each output's
gradient into the input element the forward read (a scatter-add along one dim at a time,
through the forward's own index arithmetic). Unfold's backward gathers, for each input
position, the few windows that hold it.
"""

from __future__ import annotations

import torch

from ember_primops._namespace import prims
from ember_primops.decompositions._helpers import scalar
from ember_primops.decompositions._registry import register_decomposition
from ember_primops.decompositions.nn_pooling import in_layout_of, nearest_source
from ember_primops.decompositions.pool_backward import MAX_GATHERED_WINDOWS
from ember_primops.decompositions.type_promotion import computation_dtype, convert

aten = torch.ops.aten


def _whole_factor(length: int, out: int, scale: float | None) -> int:
    """k where the forward reads input ``o // k`` for output o (a whole upscale), else 0."""
    if length == 0 or out % length:
        return 0
    factor = out // length
    # a given scale that is not the size ratio moves the sources (1 / scale is what it reads)
    return factor if scale is None or scale == factor else 0


def _nearest_backward(grad, output_size, input_size, scales, exact):
    n = len(output_size)
    lead = grad.dim() - n
    compute = computation_dtype(grad.dtype)
    g = convert(grad, compute)
    for i in range(n):
        d = lead + i
        length, out = input_size[d], output_size[i]
        scale = scales[i] if scales else None
        factor = _whole_factor(length, out, scale)
        if factor:  # o // k, also for nearest-exact: floor((o + 0.5) / k) is o // k
            blocks = [*g.shape[:d], length, factor, *g.shape[d + 1 :]]
            g = prims.sum(prims.reshape(g, blocks), [d + 1])
            continue
        source = nearest_source(length, out, scale, exact, grad.device)
        index = prims.broadcast_in_dim(source, list(g.shape), [d])
        zeros = prims.full(
            [length if j == d else size for j, size in enumerate(g.shape)], 0,
            dtype=compute, device=grad.device,
        )  # fmt: skip
        g = prims.scatter_add(zeros, d, index, g)
    return in_layout_of(convert(g, grad.dtype), grad)


def _register_nearest_backward(n, exact):
    name = f"_upsample_nearest_exact{n}d_backward" if exact else f"upsample_nearest{n}d_backward"

    def decomposition(grad_output, output_size, input_size, *scales):
        scales = list(scales) if scales and any(s is not None for s in scales) else None
        return _nearest_backward(grad_output, list(output_size), list(input_size), scales, exact)

    decomposition.__qualname__ = f"decompose_{name}"
    register_decomposition(getattr(aten, name).default)(decomposition)


for _n in (1, 2, 3):
    _register_nearest_backward(_n, False)
    _register_nearest_backward(_n, True)


def _unfold_scatter(moved, length, dim, size, step):
    """Each window element added into the position it views (windows overlapping so much
    that a gather per window would unroll too far: ``x.unfold(d, 512, 1)``)."""
    windows = moved.shape[dim]
    device = moved.device
    start = prims.mul(
        prims.iota(windows, start=0, step=1, dtype=torch.int64, device=device),
        prims.scalar_tensor(step, dtype=torch.int64, device=device),
    )
    offset = prims.iota(size, start=0, step=1, dtype=torch.int64, device=device)
    flat_shape = [*moved.shape[:dim], windows * size, *moved.shape[dim + 2 :]]
    position = prims.add(
        prims.broadcast_in_dim(start, [windows, size], [0]),
        prims.broadcast_in_dim(offset, [windows, size], [1]),
    )
    index = prims.broadcast_in_dim(prims.reshape(position, [windows * size]), flat_shape, [dim])
    zeros = prims.full(
        [length if j == dim else n for j, n in enumerate(flat_shape)], 0,
        dtype=moved.dtype, device=device,
    )  # fmt: skip
    return prims.scatter_add(zeros, dim, index, prims.reshape(moved, flat_shape))


@register_decomposition(aten.unfold_backward.default)
def unfold_backward(grad, input_sizes, dim, size, step):
    input_sizes = list(input_sizes)
    dim = dim % len(input_sizes) if input_sizes else 0
    if not input_sizes:  # a 0-d tensor's unfold is a 1-element view
        return prims.reshape(grad, [])
    length, windows = input_sizes[dim], grad.shape[dim]
    compute = computation_dtype(grad.dtype)
    # the window offset (grad's last dim) beside its window dim: two adjacent gathers
    order = [*range(dim + 1), grad.dim() - 1, *range(dim + 1, grad.dim() - 1)]
    moved = prims.permute(grad, order)
    count = -(-size // step)  # the windows that can hold a position
    if count > MAX_GATHERED_WINDOWS:
        spread = _unfold_scatter(convert(moved, compute), length, dim, size, step)
        return convert(spread, grad.dtype)
    pos = prims.iota(length, start=0, step=1, dtype=torch.int64, device=grad.device)
    last = prims.div(pos, scalar(step, pos))
    total = None
    for j in range(count):
        window = prims.sub(last, scalar(j, pos))
        offset = prims.sub(pos, prims.mul(window, scalar(step, pos)))
        in_range = prims.logical_and(
            prims.ge(window, scalar(0, pos)), prims.lt(window, scalar(windows, pos))
        )
        exists = prims.logical_and(in_range, prims.lt(offset, scalar(size, pos)))
        where = [None] * dim + [
            prims.minimum(prims.maximum(window, scalar(0, pos)), scalar(windows - 1, pos)),
            prims.minimum(offset, scalar(size - 1, pos)),
        ]
        value = convert(prims.index(moved, where), compute)
        mask = prims.broadcast_in_dim(exists, list(value.shape), [dim])
        term = prims.where(mask, value, scalar(0, value))
        total = term if total is None else prims.add(total, term)
    return convert(total, grad.dtype)
