"""Losses: nll_loss(2d), mse, binary cross entropy (with logits), smooth_l1, huber, soft margin.

``reduction`` is aten's enum: 0 none, 1 mean, 2 sum.
"""

from __future__ import annotations

import torch

from ember_primops._namespace import prims
from ember_primops.decompositions._helpers import expand_to, scalar
from ember_primops.decompositions._registry import register_decomposition
from ember_primops.decompositions.type_promotion import computation_dtype, convert

aten = torch.ops.aten


def _reduce(loss, reduction):
    if reduction == 0:
        return loss
    total = prims.sum(loss, list(range(loss.dim())))
    if reduction == 1:
        return (
            prims.div(total, scalar(loss.numel(), total))
            if loss.numel()
            else prims.div(total, scalar(0, total))
        )
    return total


def _pointwise_loss(a, target, reduction, body):
    compute = computation_dtype(a.dtype)
    x, t = convert(a, compute), convert(target, compute)
    return convert(_reduce(body(x, t), reduction), a.dtype)


@register_decomposition(aten.mse_loss.default)
def mse_loss(a, target, reduction=1):
    def body(x, t):
        d = prims.sub(x, t)
        return prims.mul(d, d)

    return _pointwise_loss(a, target, reduction, body)


@register_decomposition(aten.huber_loss.default)
def huber_loss(a, target, reduction=1, delta=1.0):
    def body(x, t):
        d = prims.abs(prims.sub(x, t))
        quad = prims.mul(scalar(0.5, d), prims.mul(d, d))
        lin = prims.mul(scalar(delta, d), prims.sub(d, scalar(0.5 * delta, d)))
        return prims.where(prims.lt(d, scalar(delta, d)), quad, lin)

    return _pointwise_loss(a, target, reduction, body)


@register_decomposition(aten.smooth_l1_loss.default)
def smooth_l1_loss(a, target, reduction=1, beta=1.0):
    def body(x, t):
        d = prims.abs(prims.sub(x, t))
        if beta == 0:
            return d
        quad = prims.div(prims.mul(scalar(0.5, d), prims.mul(d, d)), scalar(beta, d))
        return prims.where(prims.lt(d, scalar(beta, d)), quad, prims.sub(d, scalar(0.5 * beta, d)))

    return _pointwise_loss(a, target, reduction, body)


@register_decomposition(aten.soft_margin_loss.default)
def soft_margin_loss(a, target, reduction=1):
    def body(x, t):
        return prims.log1p(prims.exp(prims.neg(prims.mul(t, x))))

    return _pointwise_loss(a, target, reduction, body)


@register_decomposition(aten.binary_cross_entropy.default)
def binary_cross_entropy(a, target, weight=None, reduction=1):
    def body(x, t):
        floor = scalar(-100, x)
        log_x = prims.maximum(prims.log(x), floor)
        log_1mx = prims.maximum(prims.log1p(prims.neg(x)), floor)
        loss = prims.neg(
            prims.add(prims.mul(t, log_x), prims.mul(prims.sub(scalar(1, t), t), log_1mx))
        )
        if weight is not None:
            loss = prims.mul(loss, convert(weight, x.dtype))
        return loss

    return _pointwise_loss(a, target, reduction, body)


@register_decomposition(aten.binary_cross_entropy_with_logits.default)
def binary_cross_entropy_with_logits(a, target, weight=None, pos_weight=None, reduction=1):
    def body(x, t):
        # (1 - t) x + (1 + (pw - 1) t) * log(1 + exp(-x)), computed stably
        log_sig_neg = prims.add(
            prims.log1p(prims.exp(prims.neg(prims.abs(x)))),
            prims.maximum(prims.neg(x), scalar(0, x)),
        )
        if pos_weight is not None:
            pw = convert(pos_weight, x.dtype)
            coef = prims.add(scalar(1, t), prims.mul(prims.sub(pw, scalar(1, pw)), t))
            loss = prims.add(prims.mul(prims.sub(scalar(1, t), t), x), prims.mul(coef, log_sig_neg))
        else:
            loss = prims.add(prims.mul(prims.sub(scalar(1, t), t), x), log_sig_neg)
        if weight is not None:
            loss = prims.mul(loss, convert(weight, x.dtype))
        return loss

    return _pointwise_loss(a, target, reduction, body)


def _nll(a, target, weight, reduction, ignore_index, channel_dim):
    t = convert(target, torch.int64)
    valid = prims.ne(t, scalar(ignore_index, t))
    safe_t = prims.where(valid, t, scalar(0, t))
    picked = (
        prims.squeeze(
            prims.gather(a, channel_dim, prims.expand_dims(safe_t, [channel_dim])), [channel_dim]
        )
        if a.dim() > 1
        else prims.index(a, [safe_t])
    )
    if weight is not None:
        w = prims.index(weight, [safe_t])
    else:
        w = expand_to(scalar(1, a), list(safe_t.shape))
    w = prims.where(valid, w, scalar(0, a))
    loss = prims.neg(prims.mul(picked, w))
    total_weight = prims.sum(w, list(range(w.dim())))
    if reduction == 0:
        return loss, prims.full([], 0, dtype=a.dtype, device=a.device)
    total = prims.sum(loss, list(range(loss.dim())))
    if reduction == 1:
        return prims.div(total, total_weight), total_weight
    return total, total_weight


@register_decomposition(aten.nll_loss_forward.default)
def nll_loss_forward(a, target, weight, reduction, ignore_index):
    return _nll(a, target, weight, reduction, ignore_index, 0 if a.dim() == 1 else 1)


@register_decomposition(aten.nll_loss2d_forward.default)
def nll_loss2d_forward(a, target, weight, reduction, ignore_index):
    return _nll(a, target, weight, reduction, ignore_index, 1)
