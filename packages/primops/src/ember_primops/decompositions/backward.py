"""The *_backward aten ops autograd emits, written over prims (activations, softmax, norms,
embedding, pooling, losses, dropout); convolution_backward maps to its extern prim."""

from __future__ import annotations

import math

import torch

from ember_primops._namespace import prims
from ember_primops.decompositions._helpers import canonical_dim, expand_to, scalar
from ember_primops.decompositions._registry import register_decomposition
from ember_primops.decompositions.nn_pooling import window_mask
from ember_primops.decompositions.type_promotion import computation_dtype, convert

aten = torch.ops.aten


def _up(a):
    return convert(a, computation_dtype(a.dtype))


@register_decomposition(aten.threshold_backward.default)
def threshold_backward(grad_output, a, threshold):
    return prims.where(prims.le(a, scalar(threshold, a)), scalar(0, grad_output), grad_output)


@register_decomposition(aten._softmax_backward_data.default)
def softmax_backward_data(grad_output, output, dim, input_dtype):
    g, y = _up(grad_output), _up(output)
    d = canonical_dim(dim, y.dim()) if y.dim() else None
    gy = prims.mul(g, y)
    total = prims.expand_dims(prims.sum(gy, [d]), [d]) if d is not None else gy
    return convert(prims.sub(gy, prims.mul(y, total)), input_dtype)


@register_decomposition(aten._log_softmax_backward_data.default)
def log_softmax_backward_data(grad_output, output, dim, input_dtype):
    g, y = _up(grad_output), _up(output)
    d = canonical_dim(dim, y.dim()) if y.dim() else None
    total = prims.expand_dims(prims.sum(g, [d]), [d]) if d is not None else g
    return convert(prims.sub(g, prims.mul(prims.exp(y), total)), input_dtype)


def _sum_to(t, shape):
    """Sum a broadcast gradient ``t`` back down to ``shape``."""
    shape = list(shape)
    lead = t.dim() - len(shape)
    dims = list(range(lead)) + [
        lead + i for i, s in enumerate(shape) if s == 1 and t.shape[lead + i] != 1
    ]
    out = prims.sum(t, dims) if dims else t
    return prims.reshape(out, shape)


@register_decomposition(aten.native_layer_norm_backward.default)
def native_layer_norm_backward(
    grad_out, a, normalized_shape, mean, rstd, weight, bias, output_mask
):
    compute = computation_dtype(a.dtype)
    g, x = convert(grad_out, compute), convert(a, compute)
    mean, rstd = convert(mean, compute), convert(rstd, compute)
    axis = a.dim() - len(normalized_shape)
    inner = list(range(axis, a.dim()))
    outer = list(range(axis))
    n = math.prod(a.shape[axis:]) if inner else 1
    x_hat = prims.mul(prims.sub(x, mean), rstd)
    g_w = (
        prims.mul(g, expand_to(convert(weight, compute), list(a.shape)))
        if weight is not None
        else g
    )
    dx = None
    if output_mask[0]:
        a1 = prims.expand_dims(prims.sum(g_w, inner), inner) if inner else g_w
        b1 = (
            prims.expand_dims(prims.sum(prims.mul(g_w, x_hat), inner), inner)
            if inner
            else prims.mul(g_w, x_hat)
        )
        inner_term = prims.sub(prims.sub(prims.mul(g_w, scalar(n, g_w)), a1), prims.mul(x_hat, b1))
        dx = convert(prims.mul(prims.div(rstd, scalar(n, rstd)), inner_term), a.dtype)
    dw = db = None
    if output_mask[1] and weight is not None:
        dw = convert(
            prims.sum(prims.mul(g, x_hat), outer) if outer else prims.mul(g, x_hat), weight.dtype
        )
    if output_mask[2] and bias is not None:
        db = convert(prims.sum(g, outer) if outer else prims.clone(g), bias.dtype)
    return dx, dw, db


def _channel(t, ndim):
    return prims.broadcast_in_dim(t, [t.shape[0] if i == 1 else 1 for i in range(ndim)], [1])


@register_decomposition(aten.native_batch_norm_backward.default)
def native_batch_norm_backward(
    grad_out, a, weight, running_mean, running_var, save_mean, save_invstd, train, eps, output_mask
):
    compute = computation_dtype(a.dtype)
    g, x = convert(grad_out, compute), convert(a, compute)
    reduce_dims = [0, *range(2, a.dim())]
    count = a.numel() // a.shape[1]
    if train:
        mean, invstd = convert(save_mean, compute), convert(save_invstd, compute)
    else:
        mean = convert(running_mean, compute)
        var = convert(running_var, compute)
        invstd = prims.rsqrt(prims.add(var, scalar(eps, var)))
    w = (
        convert(weight, compute)
        if weight is not None
        else prims.full([a.shape[1]], 1, dtype=compute, device=a.device)
    )
    centered = prims.sub(x, _channel(mean, a.dim()))
    grad_sum = prims.sum(g, reduce_dims)
    dot = prims.sum(prims.mul(g, centered), reduce_dims)
    dx = None
    if output_mask[0]:
        if train:
            proj = prims.mul(prims.div(dot, scalar(count, dot)), prims.mul(invstd, invstd))
            grad_mean = prims.div(grad_sum, scalar(count, grad_sum))
            inner = prims.sub(
                prims.sub(g, prims.mul(centered, _channel(proj, a.dim()))),
                _channel(grad_mean, a.dim()),
            )
            dx = prims.mul(inner, _channel(prims.mul(invstd, w), a.dim()))
        else:
            dx = prims.mul(g, _channel(prims.mul(invstd, w), a.dim()))
        dx = convert(dx, a.dtype)
    dw = (
        convert(prims.mul(dot, invstd), weight.dtype)
        if output_mask[1] and weight is not None
        else None
    )
    db = (
        convert(grad_sum, weight.dtype if weight is not None else a.dtype)
        if output_mask[2]
        else None
    )
    return dx, dw, db


@register_decomposition(aten.batch_norm_backward.default)
def batch_norm_backward(
    grad_out, a, weight, running_mean, running_var, save_mean, save_invstd, update, eps,
    output_mask, reserve,
):  # fmt: skip
    """The backward of `_batch_norm_with_update` / `_batch_norm_no_update` (`update` is
    whether the forward trained); on CUDA aten sends it to cuDNN's kernel."""
    return native_batch_norm_backward(
        grad_out, a, weight, running_mean, running_var, save_mean, save_invstd, update, eps,
        output_mask,
    )  # fmt: skip


@register_decomposition(aten.cudnn_batch_norm_backward.default)
def cudnn_batch_norm_backward(
    a, grad_out, weight, running_mean, running_var, save_mean, save_invstd, eps, reserve
):
    """The backward of a training `cudnn_batch_norm` (its saved statistics are the batch's)."""
    return native_batch_norm_backward(
        grad_out, a, weight, running_mean, running_var, save_mean, save_invstd, True, eps,
        [True, True, True],
    )  # fmt: skip


@register_decomposition(aten.native_group_norm_backward.default)
def native_group_norm_backward(grad_out, a, mean, rstd, weight, N, C, HxW, group, output_mask):
    compute = computation_dtype(a.dtype)
    # [N, group, C // group, *spatial]: only the channels split (see native_group_norm)
    grouped = [N, group, C // group, *a.shape[2:]]
    spatial = list(range(3, len(grouped)))
    ones = [1] * len(spatial)
    g = prims.reshape(convert(grad_out, compute), grouped)
    x = prims.reshape(convert(a, compute), grouped)
    m = prims.broadcast_in_dim(convert(mean, compute), [N, group, 1, *ones], [0, 1])
    r = prims.broadcast_in_dim(convert(rstd, compute), [N, group, 1, *ones], [0, 1])
    x_hat = prims.mul(prims.sub(x, m), r)
    w = (
        prims.broadcast_in_dim(
            prims.reshape(convert(weight, compute), [group, C // group]), grouped, [1, 2]
        )
        if weight is not None
        else None
    )
    g_w = prims.mul(g, w) if w is not None else g
    n = (C // group) * HxW
    row = [2, *spatial]
    dx = dw = db = None
    if output_mask[0]:
        a1 = prims.expand_dims(prims.sum(g_w, row), row)
        b1 = prims.expand_dims(prims.sum(prims.mul(g_w, x_hat), row), row)
        inner = prims.sub(prims.sub(prims.mul(g_w, scalar(n, g_w)), a1), prims.mul(x_hat, b1))
        dx = convert(
            prims.reshape(prims.mul(prims.div(r, scalar(n, r)), inner), list(a.shape)), a.dtype
        )
    if output_mask[1] and weight is not None:
        dw = convert(prims.reshape(prims.sum(prims.mul(g, x_hat), [0, *spatial]), [C]),
                     weight.dtype)  # fmt: skip
    if output_mask[2]:
        db = convert(prims.reshape(prims.sum(g, [0, *spatial]), [C]), a.dtype)
    return dx, dw, db


@register_decomposition(aten.embedding_dense_backward.default)
def embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    idx = prims.reshape(convert(indices, torch.int64), [indices.numel()])
    g = prims.reshape(grad_output, [indices.numel(), grad_output.shape[-1]])
    if padding_idx is not None and padding_idx >= 0:
        keep = prims.ne(idx, scalar(padding_idx, idx))
        g = prims.where(prims.expand_dims(keep, [1]), g, scalar(0, g))
    # index_add, not an accumulating index_put: the indices are rows in range (the forward
    # checked them), and CUDA's index_put accumulation gives each distinct row to one warp,
    # so a table of few rows serializes (t5's 32 position buckets: 20 ms a step)
    if scale_grad_by_freq:
        ones = prims.full([indices.numel()], 1, dtype=g.dtype, device=g.device)
        counts = prims.index_add(
            prims.full([num_weights], 0, dtype=g.dtype, device=g.device), 0, idx, ones
        )
        g = prims.div(g, prims.expand_dims(prims.index(counts, [idx]), [1]))
    zeros = prims.full([num_weights, grad_output.shape[-1]], 0, dtype=g.dtype, device=g.device)
    return prims.index_add(zeros, 0, idx, g)


@register_decomposition(aten.convolution_backward.default)
def convolution_backward(
    grad_output,
    a,
    weight,
    bias_sizes,
    stride,
    padding,
    dilation,
    transposed,
    output_padding,
    groups,
    output_mask,
):
    mask = list(output_mask)
    grads = prims.convolution_backward(
        grad_output,
        a,
        weight,
        bias_sizes,
        list(stride),
        list(padding),
        list(dilation),
        transposed,
        list(output_padding),
        groups,
        [mask[0], mask[1], False],
    )
    if not mask[2]:
        return grads
    # The bias gradient is a sum of grad_output over all but the channel dimension, kept in
    # the graph: it fuses with grad_output's producer (a split column reduction for
    # channels-last data) where the library computed it in a separate pass of its own.
    return grads[0], grads[1], prims.sum(grad_output, [0, *range(2, grad_output.ndim)])


@register_decomposition(aten.gelu_backward.default)
def gelu_backward(grad_output, a, *, approximate="none"):
    g, x = _up(grad_output), _up(a)
    if approximate == "tanh":
        k = math.sqrt(2 / math.pi)
        x3 = prims.mul(x, prims.mul(x, x))
        inner = prims.mul(scalar(k, x), prims.add(x, prims.mul(scalar(0.044715, x), x3)))
        t = prims.tanh(inner)
        dinner = prims.mul(
            scalar(k, x),
            prims.add(scalar(1, x), prims.mul(scalar(3 * 0.044715, x), prims.mul(x, x))),
        )
        left = prims.mul(scalar(0.5, x), prims.add(scalar(1, x), t))
        right = prims.mul(
            prims.mul(scalar(0.5, x), x),
            prims.mul(prims.sub(scalar(1, x), prims.mul(t, t)), dinner),
        )
        d = prims.add(left, right)
    else:
        cdf = prims.mul(
            scalar(0.5, x),
            prims.add(scalar(1, x), prims.erf(prims.mul(x, scalar(1 / math.sqrt(2), x)))),
        )
        pdf = prims.mul(
            scalar(1 / math.sqrt(2 * math.pi), x),
            prims.exp(prims.mul(scalar(-0.5, x), prims.mul(x, x))),
        )
        d = prims.add(cdf, prims.mul(x, pdf))
    return convert(prims.mul(g, d), grad_output.dtype)


@register_decomposition(aten.silu_backward.default)
def silu_backward(grad_output, a):
    g, x = _up(grad_output), _up(a)
    s = prims.sigmoid(x)
    d = prims.mul(s, prims.add(scalar(1, x), prims.mul(x, prims.sub(scalar(1, s), s))))
    return convert(prims.mul(g, d), grad_output.dtype)


@register_decomposition(aten.sigmoid_backward.default)
def sigmoid_backward(grad_output, output):
    g, y = _up(grad_output), _up(output)
    return convert(prims.mul(g, prims.mul(y, prims.sub(scalar(1, y), y))), grad_output.dtype)


@register_decomposition(aten.tanh_backward.default)
def tanh_backward(grad_output, output):
    g, y = _up(grad_output), _up(output)
    return convert(prims.mul(g, prims.sub(scalar(1, y), prims.mul(y, y))), grad_output.dtype)


@register_decomposition(aten.hardtanh_backward.default)
def hardtanh_backward(grad_output, a, min_val, max_val):
    outside = prims.logical_or(prims.le(a, scalar(min_val, a)), prims.ge(a, scalar(max_val, a)))
    return prims.where(outside, scalar(0, grad_output), grad_output)


@register_decomposition(aten.leaky_relu_backward.default)
def leaky_relu_backward(grad_output, a, negative_slope, self_is_result):
    return prims.where(
        prims.gt(a, scalar(0, a)),
        grad_output,
        prims.mul(grad_output, scalar(negative_slope, grad_output)),
    )


@register_decomposition(aten.elu_backward.default)
def elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result):
    g, y = _up(grad_output), _up(self_or_result)
    if is_result:
        neg = prims.mul(
            g, prims.mul(scalar(input_scale, y), prims.add(y, scalar(alpha * scale, y)))
        )
    else:
        neg = prims.mul(
            g,
            prims.mul(
                scalar(alpha * scale * input_scale, y),
                prims.exp(prims.mul(y, scalar(input_scale, y))),
            ),
        )
    pos = prims.mul(g, scalar(scale, g))
    return convert(prims.where(prims.le(y, scalar(0, y)), neg, pos), grad_output.dtype)


@register_decomposition(aten.native_dropout_backward.default)
def native_dropout_backward(grad_output, mask, scale):
    g = _up(grad_output)
    out = prims.mul(prims.mul(g, convert(mask, g.dtype)), scalar(scale, g))
    return convert(out, grad_output.dtype)


@register_decomposition(aten.log_sigmoid_backward.default)
def log_sigmoid_backward(grad_output, a, buffer):
    g, x = _up(grad_output), _up(a)
    # d/dx log(sigmoid(x)) = sigmoid(-x)
    return convert(prims.mul(g, prims.sigmoid(prims.neg(x))), grad_output.dtype)


@register_decomposition(aten.softplus_backward.default)
def softplus_backward(grad_output, a, beta, threshold):
    g, x = _up(grad_output), _up(a)
    scaled = prims.mul(x, scalar(beta, x))
    d = prims.where(prims.gt(scaled, scalar(threshold, x)), scalar(1, x), prims.sigmoid(scaled))
    return convert(prims.mul(g, d), grad_output.dtype)


@register_decomposition(aten.hardsigmoid_backward.default)
def hardsigmoid_backward(grad_output, a):
    inside = prims.logical_and(prims.gt(a, scalar(-3, a)), prims.lt(a, scalar(3, a)))
    return prims.where(
        inside, prims.div(grad_output, scalar(6, grad_output)), scalar(0, grad_output)
    )


@register_decomposition(aten.hardswish_backward.default)
def hardswish_backward(grad_output, a):
    g, x = _up(grad_output), _up(a)
    mid = prims.add(prims.div(x, scalar(3, x)), scalar(0.5, x))
    d = prims.where(
        prims.lt(x, scalar(-3, x)),
        scalar(0, x),
        prims.where(prims.le(x, scalar(3, x)), mid, scalar(1, x)),
    )
    return convert(prims.mul(g, d), grad_output.dtype)


@register_decomposition(aten.mse_loss_backward.default)
def mse_loss_backward(grad_output, a, target, reduction):
    diff = prims.sub(a, target)
    scale = 2.0 / a.numel() if reduction == 1 else 2.0
    return prims.mul(prims.mul(diff, scalar(scale, diff)), expand_to(grad_output, list(a.shape)))


@register_decomposition(aten.nll_loss_backward.default, aten.nll_loss2d_backward.default)
def nll_loss_backward(grad_output, a, target, weight, reduction, ignore_index, total_weight):
    channel_dim = 0 if a.dim() < 2 else 1
    t = convert(target, torch.int64)
    valid = prims.ne(t, scalar(ignore_index, t))
    safe_t = prims.where(valid, t, scalar(0, t))
    w = (
        prims.full([a.shape[channel_dim]], 1, dtype=a.dtype, device=a.device)
        if weight is None
        else weight
    )
    per = prims.where(valid, prims.index(w, [safe_t]), scalar(0, a))
    g = grad_output
    if reduction == 1:
        g = prims.div(g, total_weight)
    per = prims.mul(prims.neg(per), expand_to(g, list(per.shape)) if g.dim() <= per.dim() else g)
    # each class's gradient picked by comparing its index with the target: elementwise, so
    # it fuses into the softmax backward that reads it (a scatter into zeros did not)
    shape = list(a.shape)
    classes = prims.iota(shape[channel_dim], start=0, step=1, dtype=torch.int64, device=a.device)
    classes = prims.broadcast_in_dim(classes, shape, [channel_dim])
    picked = prims.eq(classes, expand_to(prims.expand_dims(safe_t, [channel_dim]), shape))
    per = expand_to(prims.expand_dims(per, [channel_dim]), shape)
    return prims.where(picked, per, scalar(0, a))


def _adaptive_avg_backward(grad_output, a, n):
    compute = computation_dtype(a.dtype)
    g = convert(grad_output, compute)
    spatial = a.dim() - n
    for i in range(n):
        d = spatial + i
        out, length = g.shape[d], a.shape[d]
        weights = convert(window_mask(length, out, a.device), compute)
        weights = prims.div(weights, prims.expand_dims(prims.sum(weights, [1]), [1]))
        order = [j for j in range(g.dim()) if j != d] + [d]
        moved = prims.permute(g, order)  # [..., out]
        prod = prims.sum(
            prims.mul(prims.expand_dims(moved, [moved.dim()]), weights), [moved.dim() - 1]
        )  # [..., length]
        back = list(range(g.dim() - 1))
        back.insert(d, g.dim() - 1)
        g = prims.permute(prod, back)
    return convert(g, a.dtype)


@register_decomposition(aten._adaptive_avg_pool2d_backward.default)
def adaptive_avg_pool2d_backward(grad_output, a):
    return _adaptive_avg_backward(grad_output, a, 2)


@register_decomposition(aten._adaptive_avg_pool3d_backward.default)
def adaptive_avg_pool3d_backward(grad_output, a):
    return _adaptive_avg_backward(grad_output, a, 3)


def _zeros(shape, like):
    return prims.full(list(shape), 0, dtype=like.dtype, device=like.device)


@register_decomposition(aten.slice_backward.default)
def slice_backward(grad_output, input_sizes, dim, start, end, step):
    return aten.slice_scatter.default(
        _zeros(input_sizes, grad_output), grad_output, dim, start, end, step
    )


@register_decomposition(aten.select_backward.default)
def select_backward(grad_output, input_sizes, dim, index):
    return aten.select_scatter.default(_zeros(input_sizes, grad_output), grad_output, dim, index)


@register_decomposition(aten.diagonal_backward.default)
def diagonal_backward(grad_output, input_sizes, offset, dim1, dim2):
    return aten.diagonal_scatter.default(
        _zeros(input_sizes, grad_output), grad_output, offset, dim1, dim2
    )
