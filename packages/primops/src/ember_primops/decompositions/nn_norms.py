"""Normalization and embedding: layer_norm, batch_norm (all aten variants), group_norm, embedding.

The batch-norm variants whose aten schema mutates the running statistics decompose into
their functional twin (``_native_batch_norm_legit_functional``) and then write the new
statistics back with ``copy_``; a functionalizing tracer turns those into graph outputs.
"""

from __future__ import annotations

import torch

from ember_primops import prims
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
    return convert(out, a.dtype), convert(mean_k, stats_dtype), convert(rstd_k, stats_dtype)


# aten ops with mutating schemas kept in the table: their decomposition returns the outputs and
# writes the new running statistics back with copy_ (see the module docstring).
MUTATING_WITH_WRITE_BACK = frozenset(
    {aten._native_batch_norm_legit.default, aten._batch_norm_with_update.default}
)


def _batch_norm_core(a, weight, bias, running_mean, running_var, training, momentum, eps):
    """(out, save_mean, save_invstd, new_running_mean, new_running_var) in compute dtype."""
    compute = computation_dtype(a.dtype)
    x = convert(a, compute)
    reduce_dims = [0, *range(2, a.dim())]
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
    out = prims.mul(
        prims.sub(x, _stats_shape_broadcast(use_mean, a.dim(), 1)),
        _stats_shape_broadcast(use_invstd, a.dim(), 1),
    )
    if weight is not None:
        out = prims.mul(out, _stats_shape_broadcast(convert(weight, compute), a.dim(), 1))
    if bias is not None:
        out = prims.add(out, _stats_shape_broadcast(convert(bias, compute), a.dim(), 1))
    return convert(out, a.dtype), use_mean, use_invstd, new_mean, new_var


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
    grouped = prims.reshape(x, [N, group, (C // group) * HxW])
    if grouped.numel() == 0:
        mean = prims.sum(grouped, [2])
        rstd = mean
    else:
        var, mean = prims.var_mean(grouped, [2], 0.0)
        rstd = prims.rsqrt(prims.add(var, scalar(eps, var)))
    normed = prims.mul(
        prims.sub(grouped, prims.expand_dims(mean, [2])), prims.expand_dims(rstd, [2])
    )
    out = prims.reshape(normed, list(a.shape))
    if weight is not None:
        out = prims.mul(out, _stats_shape_broadcast(convert(weight, compute), a.dim(), 1))
    if bias is not None:
        out = prims.add(out, _stats_shape_broadcast(convert(bias, compute), a.dim(), 1))
    return convert(out, a.dtype), convert(mean, a.dtype), convert(rstd, a.dtype)


@register_decomposition(aten.embedding.default)
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    if weight.dim() != 2:
        raise RuntimeError("'weight' must be 2-D")
    return prims.index(weight, [convert(indices, torch.int64)])
