"""Convolution, pooling, padding modes and upsampling over windows (unfold) and index prims."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ember_primops._namespace import prims
from ember_primops.decompositions._helpers import scalar
from ember_primops.decompositions._registry import register_decomposition
from ember_primops.decompositions.type_promotion import computation_dtype, convert

aten = torch.ops.aten


@register_decomposition(aten.convolution.default)
def convolution(a, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    return prims.convolution(
        a,
        weight,
        bias,
        list(stride),
        list(padding),
        list(dilation),
        transposed,
        list(output_padding),
        groups,
    )


def expand_pool_param(value, n: int, default=None) -> list[int]:
    if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
        value = default
    if isinstance(value, int):
        return [value] * n
    value = list(value)
    return value * n if len(value) == 1 else value


def _pool_out_size(length, k, s, p, d, ceil_mode) -> int:
    span = length + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= length + p:
        out -= 1
    return out


def _windows(x, spatial_start, kernel, stride, padding, dilation, ceil_mode, fill):
    """x padded with ``fill`` and unfolded: [..., o_1..o_n, k_1..k_n] (kernel dims last)."""
    n = len(kernel)
    outs = [
        _pool_out_size(
            x.shape[spatial_start + i], kernel[i], stride[i], padding[i], dilation[i], ceil_mode
        )
        for i in range(n)
    ]
    low = [0] * x.dim()
    high = [0] * x.dim()
    for i in range(n):
        d = spatial_start + i
        low[d] = padding[i]
        needed = (outs[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1
        high[d] = max(needed - x.shape[d] - padding[i], 0)
        # crop what no window reaches so unfold yields exactly outs[i] windows
        high[d] = needed - x.shape[d] - padding[i]
    x = prims.pad(x, fill, low, high, [0] * x.dim())
    for i in range(n):
        d = spatial_start + i
        span = dilation[i] * (kernel[i] - 1) + 1
        x = prims.unfold(x, d, span, stride[i])
        if dilation[i] > 1:
            last = x.dim() - 1
            x = prims.slice(x, [0] * x.dim(), list(x.shape), [1] * last + [dilation[i]])
    return x, outs


def _flatten_last(x, n):
    return prims.reshape(x, [*x.shape[: x.dim() - n], math.prod(x.shape[x.dim() - n :])])


def _max_pool(a, kernel_size, stride, padding, dilation, ceil_mode, n):
    kernel = expand_pool_param(kernel_size, n)
    stride = expand_pool_param(stride, n, kernel)
    padding = expand_pool_param(padding, n, 0)
    dilation = expand_pool_param(dilation, n, 1)
    spatial = a.dim() - n
    lowest = -math.inf if a.dtype.is_floating_point else torch.iinfo(a.dtype).min
    values, _ = _windows(a, spatial, kernel, stride, padding, dilation, ceil_mode, lowest)
    flat = _flatten_last(values, n)
    best = prims.argmax(flat, flat.dim() - 1)
    if flat.shape[-1] <= torch.iinfo(torch.int8).max:
        # the window offset through int8: a training graph saves that byte an output
        # element for the backward, not the int64 index (8x the bytes) or the backward's
        # per-input masks (ResNet-50's stem pool: 26 MB against 205 MB or 411 MB)
        best = convert(convert(best, torch.int8), torch.int64)
    out = prims.amax(flat, [flat.dim() - 1])
    # Flat input index of each window element, laid out like the values.
    sizes = list(a.shape[spatial:])
    plane = math.prod(sizes)
    narrow = torch.int32 if plane < 2**31 else torch.int64  # cheaper arithmetic on a GPU
    position = prims.reshape(
        prims.iota(plane, start=0, step=1, dtype=narrow, device=a.device), sizes
    )
    pos_windows, _ = _windows(position, 0, kernel, stride, padding, dilation, ceil_mode, -1)
    pos_flat = _flatten_last(pos_windows, n)
    pos_full = prims.broadcast_in_dim(pos_flat, list(flat.shape), list(range(spatial, flat.dim())))
    index = prims.squeeze(
        prims.gather(pos_full, flat.dim() - 1, prims.expand_dims(best, [flat.dim() - 1])),
        [flat.dim() - 1],
    )
    return in_layout_of(out, a), in_layout_of(convert(index, torch.int64), a)


def _strides_channels_last(a) -> bool:
    """Whether ``a``'s strides order its dims channels-last (C, then the spatial dims from the
    last, then N, innermost first; a size-1 dim's stride counts as its place): the rule
    eager's suggested memory format follows, dense or not (a slice of a channels-last map),
    so its pooling and resampling answer channels-last for these inputs."""
    floor = 0
    for d in [1, *range(a.dim() - 1, 1, -1), 0]:
        stride = a.stride(d)
        if a.shape[d] == 0 or stride < floor or (d == 0 and floor == a.stride(1)):
            return False
        floor = stride * (a.shape[d] if a.shape[d] > 1 else 1)
    return a.stride(1) != 0


def in_layout_of(out, a):
    """``out`` channels_last(_3d) where the input ``a`` is laid out so, as eager's pooling
    writes its results; else as it is."""
    fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(a.dim())
    if fmt is None or not _strides_channels_last(a):
        return out
    return prims.clone(out, memory_format=fmt)


@register_decomposition(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(a, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _max_pool(a, kernel_size, stride, padding, dilation, ceil_mode, 2)


@register_decomposition(aten.max_pool3d_with_indices.default)
def max_pool3d_with_indices(a, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _max_pool(a, kernel_size, stride, padding, dilation, ceil_mode, 3)


@register_decomposition(aten.max_pool2d.default)
def max_pool2d(a, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _max_pool(a, kernel_size, stride, padding, dilation, ceil_mode, 2)[0]


def _avg_divisor(length, out, k, s, p, count_include_pad, device, dtype):
    start = prims.sub(
        prims.iota(out, start=0, step=s, dtype=torch.int64, device=device),
        prims.scalar_tensor(p, dtype=torch.int64, device=device),
    )
    end = prims.minimum(
        prims.add(start, prims.scalar_tensor(k, dtype=torch.int64, device=device)),
        prims.scalar_tensor(length + p, dtype=torch.int64, device=device),
    )
    if not count_include_pad:
        start = prims.maximum(start, prims.scalar_tensor(0, dtype=torch.int64, device=device))
        end = prims.minimum(end, prims.scalar_tensor(length, dtype=torch.int64, device=device))
    return convert(prims.sub(end, start), dtype)


def _avg_pool(a, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, n):
    kernel = expand_pool_param(kernel_size, n)
    stride = expand_pool_param(stride, n, kernel)
    padding = expand_pool_param(padding, n, 0)
    compute = computation_dtype(a.dtype)
    x = convert(a, compute)
    spatial = a.dim() - n
    windows, outs = _windows(x, spatial, kernel, stride, padding, [1] * n, ceil_mode, 0)
    total = prims.sum(windows, list(range(windows.dim() - n, windows.dim())))
    if divisor_override:
        out = prims.div(total, scalar(divisor_override, total))
    else:
        divisor = None
        for i in range(n):
            part = _avg_divisor(
                a.shape[spatial + i],
                outs[i],
                kernel[i],
                stride[i],
                padding[i],
                count_include_pad,
                a.device,
                compute,
            )
            shape = [outs[j] if j == i else 1 for j in range(n)]
            part = prims.broadcast_in_dim(part, shape, [i])
            divisor = part if divisor is None else prims.mul(divisor, part)
        out = prims.div(total, divisor)
    out = convert(out, a.dtype)
    return in_layout_of(out, a) if n == 2 else out  # eager's 3-d average is contiguous


@register_decomposition(aten.avg_pool2d.default)
def avg_pool2d(
    a,
    kernel_size,
    stride=(),
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
):
    return _avg_pool(
        a, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 2
    )


@register_decomposition(aten.avg_pool3d.default)
def avg_pool3d(
    a,
    kernel_size,
    stride=(),
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
):
    return _avg_pool(
        a, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 3
    )


def _adaptive_bounds(length, out):
    starts = [(i * length) // out for i in range(out)]
    ends = [-(-((i + 1) * length) // out) for i in range(out)]
    return starts, ends


def window_mask(length, out, device):
    """bool [out, length]: element l is in adaptive window o."""
    starts, ends = _adaptive_bounds(length, out)
    pos = prims.broadcast_in_dim(
        prims.iota(length, start=0, step=1, dtype=torch.int64, device=device), [out, length], [1]
    )
    lo = prims.broadcast_in_dim(_int_vector(starts, device), [out, length], [0])
    hi = prims.broadcast_in_dim(_int_vector(ends, device), [out, length], [0])
    return prims.logical_and(prims.ge(pos, lo), prims.lt(pos, hi))


def _int_vector(values: Sequence[int], device) -> torch.Tensor:
    parts = [prims.full([1], v, dtype=torch.int64, device=device) for v in values]
    return prims.cat(parts, 0) if parts else prims.full([0], 0, dtype=torch.int64, device=device)


def _adaptive_avg(a, output_size, n):
    compute = computation_dtype(a.dtype)
    x = convert(a, compute)
    spatial = a.dim() - n
    for i, out in enumerate(output_size):
        d = spatial + i
        length = x.shape[d]
        weights = convert(window_mask(length, out, a.device), compute)
        weights = prims.div(weights, prims.expand_dims(prims.sum(weights, [1]), [1]))
        # move d last, contract with weights [out, length] -> [..., out], move back
        order = [j for j in range(x.dim()) if j != d] + [d]
        moved = prims.permute(x, order)
        prod = prims.sum(
            prims.mul(prims.expand_dims(moved, [moved.dim() - 1]), weights), [moved.dim()]
        )
        back = list(range(x.dim() - 1))
        back.insert(d, x.dim() - 1)
        x = prims.permute(prod, back)
    return convert(x, a.dtype)


@register_decomposition(aten._adaptive_avg_pool2d.default)
def adaptive_avg_pool2d(a, output_size):
    return _adaptive_avg(a, list(output_size), 2)


@register_decomposition(aten._adaptive_avg_pool3d.default)
def adaptive_avg_pool3d(a, output_size):
    return _adaptive_avg(a, list(output_size), 3)


def _adaptive_max(a, output_size, n):
    spatial = a.dim() - n
    sizes = list(a.shape[spatial:])
    lowest = -math.inf if a.dtype.is_floating_point else torch.iinfo(a.dtype).min
    # Joint windows as a mask over the flattened spatial plane: [o_1..o_n, prod(sizes)].
    mask = None
    for i, out in enumerate(output_size):
        m = window_mask(sizes[i], out, a.device)  # [out, L_i]
        shape = list(output_size) + sizes
        dims = [i, n + i]
        m = prims.broadcast_in_dim(m, shape, dims)
        mask = m if mask is None else prims.logical_and(mask, m)
    mask = prims.reshape(mask, [*output_size, math.prod(sizes)])
    flat = prims.reshape(a, [*a.shape[:spatial], math.prod(sizes)])
    full_shape = [*a.shape[:spatial], *output_size, math.prod(sizes)]
    values = prims.broadcast_in_dim(flat, full_shape, [*range(spatial), len(full_shape) - 1])
    masked = prims.where(
        prims.broadcast_in_dim(mask, full_shape, list(range(spatial, len(full_shape)))),
        values,
        scalar(lowest, a),
    )
    last = len(full_shape) - 1
    return prims.amax(masked, [last]), prims.argmax(masked, last)


@register_decomposition(aten.adaptive_max_pool2d.default)
def adaptive_max_pool2d(a, output_size):
    return _adaptive_max(a, list(output_size), 2)


@register_decomposition(aten.adaptive_max_pool3d.default)
def adaptive_max_pool3d(a, output_size):
    return _adaptive_max(a, list(output_size), 3)


def _pad_indices(length, low, high, mode, device):
    j = prims.iota(length + low + high, start=-low, step=1, dtype=torch.int64, device=device)
    last = prims.scalar_tensor(length - 1, dtype=torch.int64, device=device)
    zero = prims.scalar_tensor(0, dtype=torch.int64, device=device)
    if mode == "reflect":
        return prims.sub(last, prims.abs(prims.sub(last, prims.abs(j))))
    if mode == "circular":
        return prims.remainder(j, prims.scalar_tensor(length, dtype=torch.int64, device=device))
    return prims.minimum(prims.maximum(j, zero), last)


def _mode_pad(a, padding, mode, n):
    x = a
    for i in range(n):
        d = a.dim() - 1 - i
        low, high = padding[2 * i], padding[2 * i + 1]
        if mode == "reflect" and (low >= a.shape[d] or high >= a.shape[d]):
            raise RuntimeError(
                f"Argument #4: Padding size should be less than the corresponding input "
                f"dimension, but got: padding ({low}, {high}) at dimension {d} of input "
                f"{list(a.shape)}"
            )
        index = _pad_indices(a.shape[d], low, high, mode, a.device)
        x = prims.index_select(x, d, index)
    return x


def _register_pad(mode, n, op):
    def decomposition(a, padding):
        return _mode_pad(a, list(padding), mode, n)

    decomposition.__qualname__ = f"decompose_{mode}_pad{n}d"
    register_decomposition(op)(decomposition)


for _n in (1, 2, 3):
    _register_pad("reflect", _n, getattr(aten, f"reflection_pad{_n}d").default)
    _register_pad("replicate", _n, getattr(aten, f"replication_pad{_n}d").default)


@register_decomposition(aten._pad_circular.default)
def pad_circular(a, pad):
    return _mode_pad(a, list(pad), "circular", len(pad) // 2)


def _scale(in_size, out_size, scale, align_corners=False):
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    return 1.0 / scale if scale else in_size / out_size


def nearest_source(length, out, scale, exact, device):
    """int64 [out]: the input element nearest upsampling reads for each output along a dim."""
    s = _scale(length, out, scale)
    pos = prims.iota(out, start=0, step=1, dtype=torch.float32, device=device)
    if exact:
        pos = prims.add(pos, prims.scalar_tensor(0.5, dtype=torch.float32, device=device))
    src = prims.floor(prims.mul(pos, prims.scalar_tensor(s, dtype=torch.float32, device=device)))
    src = convert(src, torch.int64)
    return prims.minimum(src, prims.scalar_tensor(length - 1, dtype=torch.int64, device=device))


def _nearest(a, output_size, scales, exact):
    x = a
    n = len(output_size)
    for i, out in enumerate(output_size):
        d = a.dim() - n + i
        source = nearest_source(a.shape[d], out, scales[i] if scales else None, exact, a.device)
        x = prims.index_select(x, d, source)
    return in_layout_of(x, a) if a.dim() == 4 else x


def _register_nearest(n, exact):
    name = f"_upsample_nearest_exact{n}d" if exact else f"upsample_nearest{n}d"
    op = getattr(aten, name).default

    def decomposition(a, output_size, *scales):
        return _nearest(a, list(output_size), [s for s in scales] if scales else None, exact)

    decomposition.__qualname__ = f"decompose_{name}"
    register_decomposition(op)(decomposition)


for _n in (1, 2, 3):
    _register_nearest(_n, False)
    _register_nearest(_n, True)


def _linear(a, output_size, align_corners, scales):
    compute = computation_dtype(a.dtype)
    x = convert(a, compute)
    n = len(output_size)
    for i, out in enumerate(output_size):
        d = a.dim() - n + i
        length = a.shape[d]
        s = _scale(length, out, scales[i] if scales else None, align_corners)
        pos = prims.iota(out, start=0, step=1, dtype=compute, device=a.device)
        if align_corners:
            src = prims.mul(pos, scalar(s, pos))
        else:
            src = prims.sub(
                prims.mul(prims.add(pos, scalar(0.5, pos)), scalar(s, pos)), scalar(0.5, pos)
            )
            src = prims.maximum(src, scalar(0, src))
        i0 = prims.minimum(
            convert(prims.floor(src), torch.int64),
            prims.scalar_tensor(length - 1, dtype=torch.int64, device=a.device),
        )
        i1 = prims.minimum(
            prims.add(i0, prims.scalar_tensor(1, dtype=torch.int64, device=a.device)),
            prims.scalar_tensor(length - 1, dtype=torch.int64, device=a.device),
        )
        lam = prims.sub(src, convert(i0, compute))
        lam = prims.broadcast_in_dim(lam, [out if j == d else 1 for j in range(x.dim())], [d])
        lo = prims.index_select(x, d, i0)
        hi = prims.index_select(x, d, i1)
        x = prims.add(prims.mul(lo, prims.sub(scalar(1, lam), lam)), prims.mul(hi, lam))
    return convert(x, a.dtype)


def _register_linear(name, n):
    op = getattr(aten, name).default

    def decomposition(a, output_size, align_corners, *scales):
        return _linear(a, list(output_size), align_corners, list(scales) if scales else None)

    decomposition.__qualname__ = f"decompose_{name}"
    register_decomposition(op)(decomposition)


_register_linear("upsample_linear1d", 1)
_register_linear("upsample_bilinear2d", 2)
_register_linear("upsample_trilinear3d", 3)


#: the cubic convolution kernel's parameter eager's bicubic interpolation uses
CUBIC_A = -0.75


def _cubic_weights(t):
    """The four taps' weights (at floor - 1 .. floor + 2) for fractions ``t``."""

    def near(x):  # |x| <= 1
        return prims.add(
            prims.mul(
                prims.mul(
                    prims.sub(prims.mul(x, scalar(CUBIC_A + 2, x)), scalar(CUBIC_A + 3, x)), x
                ),
                x,
            ),
            scalar(1, x),
        )

    def far(x):  # 1 < |x| < 2
        inner = prims.sub(prims.mul(x, scalar(CUBIC_A, x)), scalar(5 * CUBIC_A, x))
        inner = prims.add(prims.mul(inner, x), scalar(8 * CUBIC_A, x))
        return prims.sub(prims.mul(inner, x), scalar(4 * CUBIC_A, x))

    one = scalar(1, t)
    return [
        far(prims.add(t, one)),
        near(t),
        near(prims.sub(one, t)),
        far(prims.sub(scalar(2, t), t)),
    ]


def _bicubic(a, output_size, align_corners, scales):
    compute = computation_dtype(a.dtype)
    x = convert(a, compute)
    n = len(output_size)
    for i in reversed(range(n)):  # along the width first, as eager sums
        d = a.dim() - n + i
        length, out = a.shape[d], output_size[i]
        s = _scale(length, out, scales[i] if scales else None, align_corners)
        pos = prims.iota(out, start=0, step=1, dtype=compute, device=a.device)
        if align_corners:
            src = prims.mul(pos, scalar(s, pos))
        else:  # no clamp at 0, unlike the linear modes: the taps are clamped instead
            src = prims.sub(
                prims.mul(prims.add(pos, scalar(0.5, pos)), scalar(s, pos)), scalar(0.5, pos)
            )
        floor = prims.floor(src)
        start = convert(floor, torch.int64)
        shape = [out if j == d else 1 for j in range(x.dim())]
        total = None
        for k, weight in enumerate(_cubic_weights(prims.sub(src, floor))):
            tap = prims.minimum(
                prims.maximum(prims.add(start, scalar(k - 1, start)), scalar(0, start)),
                scalar(length - 1, start),
            )
            term = prims.mul(
                prims.index_select(x, d, tap), prims.broadcast_in_dim(weight, shape, [d])
            )
            total = term if total is None else prims.add(total, term)
        x = total
    return in_layout_of(convert(x, a.dtype), a)


@register_decomposition(aten.upsample_bicubic2d.default)
def upsample_bicubic2d(a, output_size, align_corners, scales_h=None, scales_w=None):
    scales = None if scales_h is None and scales_w is None else [scales_h, scales_w]
    return _bicubic(a, list(output_size), align_corners, scales)


@register_decomposition(aten.im2col.default)
def im2col(a, kernel_size, dilation, padding, stride):
    kernel, dilation = expand_pool_param(kernel_size, 2), expand_pool_param(dilation, 2)
    padding, stride = expand_pool_param(padding, 2), expand_pool_param(stride, 2)
    batched = a.dim() == 4
    x = a if batched else prims.expand_dims(a, [0])
    windows, outs = _windows(x, 2, kernel, stride, padding, dilation, False, 0)
    # [N, C, oH, oW, kH, kW] -> [N, C, kH, kW, oH, oW] -> [N, C*kH*kW, oH*oW]
    moved = prims.permute(windows, [0, 1, 4, 5, 2, 3])
    n, c = x.shape[0], x.shape[1]
    out = prims.reshape(moved, [n, c * kernel[0] * kernel[1], outs[0] * outs[1]])
    return out if batched else prims.squeeze(out, [0])


@register_decomposition(aten.col2im.default)
def col2im(a, output_size, kernel_size, dilation, padding, stride):
    """``F.fold``: each output pixel sums the window elements that land on it. One plane of
    window elements per kernel offset, spread by the stride and shifted by the offset onto
    the output grid (a pad with interior spacing), the planes summed in the order eager's
    kernels sum them, in float32 and rounded once as its GPU kernel does (its CPU kernel
    adds into a half-precision image: within a rounding of this). A gather of the planes,
    so the readers and the sum fuse into one pointwise kernel (VOLO's outlook attention;
    eager's own kernel took 1.8 ms a step on the H200)."""
    size, kernel = expand_pool_param(output_size, 2), expand_pool_param(kernel_size, 2)
    dilation, padding = expand_pool_param(dilation, 2), expand_pool_param(padding, 2)
    stride = expand_pool_param(stride, 2)
    batched = a.dim() == 3
    x = a if batched else prims.expand_dims(a, [0])
    n, c = x.shape[0], x.shape[1] // (kernel[0] * kernel[1])
    blocks = [
        (size[d] + 2 * padding[d] - dilation[d] * (kernel[d] - 1) - 1) // stride[d] + 1
        for d in (0, 1)
    ]
    compute = computation_dtype(a.dtype)
    planes = prims.reshape(convert(x, compute), [n, c, *kernel, *blocks])
    total = None
    for kh in range(kernel[0]):
        for kw in range(kernel[1]):
            start, limit = [0, 0, kh, kw, 0, 0], [n, c, kh + 1, kw + 1, *blocks]
            plane = prims.squeeze(prims.slice(planes, start, limit), [2, 3])
            low = [kh * dilation[0] - padding[0], kw * dilation[1] - padding[1]]
            spread = [(blocks[d] - 1) * stride[d] + 1 for d in (0, 1)]
            high = [size[d] - low[d] - spread[d] for d in (0, 1)]
            placed = prims.pad(plane, 0.0, [0, 0, *low], [0, 0, *high],
                               [0, 0, stride[0] - 1, stride[1] - 1])  # fmt: skip
            total = placed if total is None else prims.add(total, placed)
    out = convert(total, a.dtype)
    return out if batched else prims.squeeze(out, [0])
