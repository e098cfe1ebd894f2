"""Normalization and embedding: layer_norm, batch_norm (all aten variants), group_norm, embedding.

The batch-norm variants whose aten schema mutates the running statistics decompose into
their functional twin (``_native_batch_norm_legit_functional``) and then write the new
statistics back with ``copy_``; a functionalizing tracer turns those into graph outputs.
"""

from __future__ import annotations

import struct

import torch

from ember_primops._namespace import prims
from ember_primops.decompositions._helpers import scalar
from ember_primops.decompositions._registry import register_decomposition
from ember_primops.decompositions.type_promotion import computation_dtype, convert

aten = torch.ops.aten


def _stats_shape_broadcast(t, ndim, dim):
    """A per-channel vector shaped to broadcast against an ndim input along ``dim``."""
    return prims.broadcast_in_dim(t, [t.shape[0] if i == dim else 1 for i in range(ndim)], [dim])


@register_decomposition(aten.native_layer_norm.default)
def native_layer_norm(a, normalized_shape, weight, bias, eps):
    axis = a.dim() - len(normalized_shape)
    if list(a.shape[axis:]) != list(normalized_shape):
        raise RuntimeError(
            f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
            f"[*, {', '.join(map(str, normalized_shape))}], but got input of size {list(a.shape)}"
        )
    compute = computation_dtype(a.dtype)
    x = convert(a, compute)
    dims = list(range(axis, a.dim()))
    if a.numel() == 0:
        mean = prims.sum(x, dims)
        rstd = prims.sum(x, dims)
    else:
        var, mean = prims.var_mean(x, dims, 0.0)
        rstd = prims.rsqrt(prims.add(var, scalar(eps, var)))
    mean_k = prims.expand_dims(mean, dims) if dims else mean
    rstd_k = prims.expand_dims(rstd, dims) if dims else rstd
    out = prims.mul(prims.sub(x, mean_k), rstd_k)
    if weight is not None:
        out = prims.mul(out, convert(weight, compute))
    if bias is not None:
        out = prims.add(out, convert(bias, compute))
    stats_dtype = a.dtype if a.device.type == "cpu" else compute
    out = convert(out, a.dtype)
    if not out.is_contiguous():
        # Eager's kernels (CPU and CUDA) write a contiguous output whatever the input's
        # strides: a permuted input (ConvNeXt's NHWC LayerNorm) must not hand its strides on,
        # or a following matmul sees a batch it cannot fold and goes through bmm with the
        # weight expanded (one copy of it per batch row).
        out = prims.clone(out, memory_format=torch.contiguous_format)
    return out, convert(mean_k, stats_dtype), convert(rstd_k, stats_dtype)


# aten ops with mutating schemas kept in the table: their decomposition returns the outputs and
# writes the new running statistics back with copy_ (see the module docstring).
MUTATING_WITH_WRITE_BACK = frozenset(
    {
        aten._native_batch_norm_legit.default,
        aten._batch_norm_with_update.default,
        aten.cudnn_batch_norm.default,
    }
)


def _per_channel(t, a):
    return _stats_shape_broadcast(t, a.dim(), 1)


def _follows_eager_cpu_kernel(a) -> bool:
    """Decompose in eager's rounding order: a non-empty contiguous CPU float32 input with
    spatial positions. (Eager's channels-last and (N, C) inputs sum float32 partials per
    thread first, an order that depends on the thread count; those take the generic path.)"""
    return (
        a.device.type == "cpu"
        and a.dtype == torch.float32
        and a.numel() > 0
        and a.numel() > a.shape[0] * a.shape[1]
        and a.is_contiguous()
    )


def _fused_multiply_add(a, b, c):
    """``a * b + c`` of float32 operands, rounded once to float32: the product of two floats is
    exact in float64, so only the sum rounds there (the second rounding, to float32, differs
    from a true fma only on an exact float64 tie)."""
    f64 = torch.float64
    product = prims.mul(convert(a, f64), convert(b, f64))
    return convert(prims.add(product, convert(c, f64)), torch.float32)


def _eager_cpu_statistics(x, reduce_dims, count):
    """(mean, var_sum), both float32, rounded the way eager's CPU float32 kernel rounds them:
    each channel summed in float64 and the mean rounded to float32, the float32 squared
    deviations summed in float64 and that sum rounded to float32. (The caller divides by the
    count in float32 and takes ``1 / sqrt(var + eps)`` in float64, as eager does.)"""
    f32, f64 = torch.float32, torch.float64
    total = prims.sum(convert(x, f64), reduce_dims)
    mean = convert(prims.div(total, scalar(count, total)), f32)
    deviation = prims.sub(x, _per_channel(mean, x))
    squares = convert(prims.mul(deviation, deviation), f64)
    var_sum = convert(prims.sum(squares, reduce_dims), f32)
    return mean, var_sum


def _eager_cpu_output(x, weight, bias, mean, invstd):
    """``x * alpha + beta`` with ``alpha = invstd * w`` and ``beta = b - mean * alpha``, both
    multiply-adds fused, as eager's CPU kernel writes it.

    Bit-equal matters beyond tolerance: a max-pool after the norm picks its argmax among
    values a rounding apart, and one flipped argmax sends a gradient to the wrong element.
    """
    alpha = invstd if weight is None else prims.mul(invstd, weight)
    negated_mean = prims.neg(mean)
    if bias is None:
        beta = prims.mul(negated_mean, alpha)
    else:
        beta = _fused_multiply_add(negated_mean, alpha, bias)
    return _fused_multiply_add(x, _per_channel(alpha, x), _per_channel(beta, x))


def _batch_norm_core(a, weight, bias, running_mean, running_var, training, momentum, eps):
    """(out, save_mean, save_invstd, new_running_mean, new_running_var) in compute dtype."""
    compute = computation_dtype(a.dtype)
    x = convert(a, compute)
    reduce_dims = [0, *range(2, a.dim())]
    if training and _follows_eager_cpu_kernel(a):
        return _eager_cpu_training(x, weight, bias, running_mean, running_var, momentum, eps)
    if training:
        var, mean = prims.var_mean(x, reduce_dims, 0.0)
        invstd = prims.rsqrt(prims.add(var, scalar(eps, var)))
        count = a.numel() // a.shape[1]
        new_mean = new_var = None
        if running_mean is not None:
            rm = convert(running_mean, compute)
            new_mean = prims.add(
                prims.mul(rm, scalar(1 - momentum, rm)), prims.mul(mean, scalar(momentum, mean))
            )
        if running_var is not None:
            rv = convert(running_var, compute)
            unbiased = prims.mul(var, scalar(count / max(count - 1, 1), var))
            new_var = prims.add(
                prims.mul(rv, scalar(1 - momentum, rv)),
                prims.mul(unbiased, scalar(momentum, unbiased)),
            )
        use_mean, use_invstd = mean, invstd
    else:
        mean = convert(running_mean, compute)
        var = convert(running_var, compute)
        use_mean, use_invstd = mean, prims.rsqrt(prims.add(var, scalar(eps, var)))
        new_mean, new_var = running_mean, running_var
    out = prims.mul(prims.sub(x, _per_channel(use_mean, a)), _per_channel(use_invstd, a))
    if weight is not None:
        out = prims.mul(out, _per_channel(convert(weight, compute), a))
    if bias is not None:
        out = prims.add(out, _per_channel(convert(bias, compute), a))
    return convert(out, a.dtype), use_mean, use_invstd, new_mean, new_var


def _as_float32(value: float) -> float:
    return struct.unpack("f", struct.pack("f", value))[0]


def _running_mean_update(running_mean, mean, momentum):
    """``m * mean + (1 - m) * running`` in float32, with ``m`` rounded to float32 first."""
    m = _as_float32(momentum)
    kept = prims.mul(convert(running_mean, torch.float32), scalar(1 - m, mean))
    return prims.add(prims.mul(mean, scalar(m, mean)), kept)


def _running_var_update(running_var, unbiased, momentum):
    """Eager's mix of widths: ``m * unbiased`` in float64, ``(1 - m) * running`` in float32,
    their sum in float64, rounded to float32."""
    f64 = torch.float64
    m = _as_float32(momentum)
    fresh = prims.mul(convert(unbiased, f64), scalar(m, unbiased, f64))
    kept = prims.mul(convert(running_var, torch.float32), scalar(1 - m, unbiased))
    return convert(prims.add(fresh, convert(kept, f64)), torch.float32)


def _eager_cpu_training(x, weight, bias, running_mean, running_var, momentum, eps):
    """Training-mode batch norm of a CPU float32 input in eager's kernel's rounding order."""
    f64 = torch.float64
    reduce_dims = [0, *range(2, x.dim())]
    count = x.numel() // x.shape[1]
    mean, var_sum = _eager_cpu_statistics(x, reduce_dims, count)
    var = convert(prims.div(var_sum, scalar(float(count), var_sum)), f64)  # float32 division
    invstd = convert(
        prims.div(scalar(1.0, var), prims.sqrt(prims.add(var, scalar(eps, var)))), torch.float32
    )
    new_mean = new_var = None
    if running_mean is not None:
        new_mean = _running_mean_update(running_mean, mean, momentum)
    if running_var is not None:
        unbiased = prims.div(var_sum, scalar(float(max(count - 1, 1)), var_sum))
        new_var = _running_var_update(running_var, unbiased, momentum)
    out = _eager_cpu_output(x, weight, bias, mean, invstd)
    return out, mean, invstd, new_mean, new_var


def _empty_stats(a):
    return prims.full([0], 0, dtype=computation_dtype(a.dtype), device=a.device)


def _write_back(target, value):
    if target is not None and value is not None and value is not target:
        target.copy_(value)  # functionalized by DecomposeMode / the tracer


@register_decomposition(aten._native_batch_norm_legit_functional.default)
def native_batch_norm_legit_functional(
    a, weight, bias, running_mean, running_var, training, momentum, eps
):
    out, mean, invstd, new_mean, new_var = _batch_norm_core(
        a, weight, bias, running_mean, running_var, training, momentum, eps
    )
    if not training:
        mean, invstd = _empty_stats(a), _empty_stats(a)
    new_mean = convert(new_mean, running_mean.dtype)
    new_var = convert(new_var, running_var.dtype)
    return out, convert(mean, a.dtype), convert(invstd, a.dtype), new_mean, new_var


@register_decomposition(aten.native_batch_norm.default, aten._native_batch_norm_legit.default)
def native_batch_norm(a, weight, bias, running_mean, running_var, training, momentum, eps):
    out, mean, invstd, new_mean, new_var = _batch_norm_core(
        a, weight, bias, running_mean, running_var, training, momentum, eps
    )
    if training:
        _write_back(running_mean, new_mean)
        _write_back(running_var, new_var)
    else:
        mean, invstd = _empty_stats(a), _empty_stats(a)
    return out, convert(mean, a.dtype), convert(invstd, a.dtype)


@register_decomposition(aten._native_batch_norm_legit.no_stats)
def native_batch_norm_no_stats(a, weight, bias, training, momentum, eps):
    out, mean, invstd, _, _ = _batch_norm_core(a, weight, bias, None, None, True, momentum, eps)
    return out, convert(mean, a.dtype), convert(invstd, a.dtype)


@register_decomposition(aten._native_batch_norm_legit_no_training.default)
def native_batch_norm_no_training(a, weight, bias, running_mean, running_var, momentum, eps):
    return native_batch_norm(a, weight, bias, running_mean, running_var, False, momentum, eps)


def _reserve(a):
    return prims.full([0], 0, dtype=torch.uint8, device=a.device)


@register_decomposition(aten._batch_norm_with_update.default)
def batch_norm_with_update(a, weight, bias, running_mean, running_var, momentum, eps):
    out, mean, invstd = native_batch_norm(
        a, weight, bias, running_mean, running_var, True, momentum, eps
    )
    return out, mean, invstd, _reserve(a)


@register_decomposition(aten._batch_norm_with_update_functional.default)
def batch_norm_with_update_functional(a, weight, bias, running_mean, running_var, momentum, eps):
    out, mean, invstd, new_mean, new_var = native_batch_norm_legit_functional(
        a, weight, bias, running_mean, running_var, True, momentum, eps
    )
    return out, mean, invstd, _reserve(a), new_mean, new_var


@register_decomposition(aten.cudnn_batch_norm.default)
def cudnn_batch_norm(a, weight, bias, running_mean, running_var, training, momentum, eps):
    """What `F.batch_norm` becomes on CUDA (`_batch_norm_impl_index` picks cuDNN): the same
    arithmetic as aten's own kernel, so it fuses with its neighbours instead of staying a
    library call; training writes the running statistics back, as cuDNN does (its schema
    does not say so)."""
    out, mean, invstd = native_batch_norm(
        a, weight, bias, running_mean, running_var, training, momentum, eps
    )
    return out, mean, invstd, _reserve(a)


@register_decomposition(aten._batch_norm_no_update.default)
def batch_norm_no_update(a, weight, bias, running_mean, running_var, momentum, eps):
    out, mean, invstd = native_batch_norm(
        a, weight, bias, running_mean, running_var, False, momentum, eps
    )
    return out, mean, invstd, _reserve(a)


@register_decomposition(aten.native_group_norm.default)
def native_group_norm(a, weight, bias, N, C, HxW, group, eps):
    compute = computation_dtype(a.dtype)
    x = convert(a, compute)
    # The statistics come from a view that only splits the channels into groups: merging the
    # spatial dims into one (and splitting them back for the result) would make every index
    # of a later window (a pooling over the normalized value) divide and wrap per element.
    grouped = prims.reshape(x, [N, group, C // group, *a.shape[2:]])
    dims = list(range(2, grouped.dim()))
    if grouped.numel() == 0:
        mean = prims.sum(grouped, dims)
        rstd = mean
    else:
        var, mean = prims.var_mean(grouped, dims, 0.0)
        rstd = prims.rsqrt(prims.add(var, scalar(eps, var)))
    normed = prims.mul(prims.sub(x, _per_group(mean, a, group)), _per_group(rstd, a, group))
    out = normed
    if weight is not None:
        out = prims.mul(out, _per_channel(convert(weight, compute), a))
    if bias is not None:
        out = prims.add(out, _per_channel(convert(bias, compute), a))
    return convert(out, a.dtype), convert(mean, a.dtype), convert(rstd, a.dtype)


def _per_group(stat, a, group):
    """A [N, group] statistic broadcast over ``a`` ([N, C, *spatial]): channel c reads its
    group's value."""
    n, channels = a.shape[0], a.shape[1]
    per_channel = prims.reshape(
        prims.broadcast_in_dim(stat, [n, group, channels // group], [0, 1]), [n, channels]
    )
    return prims.broadcast_in_dim(per_channel, list(a.shape), [0, 1])


@register_decomposition(aten.embedding.default)
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    if weight.dim() != 2:
        raise RuntimeError("'weight' must be 2-D")
    return prims.index(weight, [convert(indices, torch.int64)])
