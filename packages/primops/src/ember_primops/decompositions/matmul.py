"""Matrix products over the extern mm/bmm prims: mm, bmm, mv, dot, addmm, baddbmm, addr, ..."""

from __future__ import annotations

import torch

from ember_primops._namespace import prims
from ember_primops.decompositions._helpers import expand_to, scalar
from ember_primops.decompositions._registry import register_decomposition
from ember_primops.decompositions.type_promotion import as_tensor, convert

aten = torch.ops.aten


def _check_same_dtype(name, *tensors):
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) > 1:
        a, b = tensors[0].dtype, next(t.dtype for t in tensors if t.dtype != tensors[0].dtype)
        raise RuntimeError(
            f"{name}: expected m1 and m2 to have the same dtype, but got: {a} != {b}"
        )


@register_decomposition(aten.mm.default)
def mm(a, b):
    _check_same_dtype("mm", a, b)
    return prims.mm(a, b)


@register_decomposition(aten.bmm.default)
def bmm(a, b):
    _check_same_dtype("bmm", a, b)
    return prims.bmm(a, b)


@register_decomposition(aten.mv.default)
def mv(a, v):
    _check_same_dtype("mv", a, v)
    return prims.squeeze(prims.mm(a, prims.expand_dims(v, [1])), [1])


@register_decomposition(aten.dot.default, aten.vdot.default)
def dot(a, b):
    if a.dim() != 1 or b.dim() != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.dim()}D and {b.dim()}D tensors")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(
            f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src [{b.shape[0]}] "
            f"to have the same number of elements, but got {a.shape[0]} and {b.shape[0]} "
            "elements respectively"
        )
    _check_same_dtype("dot", a, b)
    return prims.reshape(prims.mm(prims.expand_dims(a, [0]), prims.expand_dims(b, [1])), [])


def _scaled_sum(bias, product, beta, alpha):
    """beta * bias + alpha * product; beta == 0 ignores bias entirely (NaNs included)."""
    if alpha != 1:
        product = prims.mul(product, as_tensor(alpha, product.dtype, product.device))
    if beta == 0:
        return product
    bias = expand_to(convert(bias, product.dtype), list(product.shape))
    if beta != 1:
        bias = prims.mul(bias, as_tensor(beta, product.dtype, product.device))
    return prims.add(bias, product)


#: dtypes whose addmm eager computes with the bias added in the GEMM's epilogue, rounding the
#: sum once (a linear layer under autocast); mm then add would round the product first
_EPILOGUE_BIAS_DTYPES = (torch.bfloat16, torch.float16)


@register_decomposition(aten.addmm.default)
def addmm(bias, m1, m2, *, beta=1, alpha=1):
    if (
        beta == 1
        and alpha == 1
        and m1.dtype in _EPILOGUE_BIAS_DTYPES
        and bias.dtype == m1.dtype
        and bias.dim() <= 2  # broadcast to the product's shape, as aten's addmm requires
    ):
        # one library call, as eager's: no kernel of its own for the bias where nothing else
        # would fuse it (a projection read by attention through views), eager's rounding
        _check_same_dtype("addmm", m1, m2)
        return prims.addmm(bias, m1, m2)
    return _scaled_sum(bias, mm(m1, m2), beta, alpha)


@register_decomposition(aten.addmv.default)
def addmv(bias, m, v, *, beta=1, alpha=1):
    return _scaled_sum(bias, mv(m, v), beta, alpha)


@register_decomposition(aten.baddbmm.default)
def baddbmm(bias, b1, b2, *, beta=1, alpha=1):
    return _scaled_sum(bias, bmm(b1, b2), beta, alpha)


@register_decomposition(aten.addbmm.default)
def addbmm(bias, b1, b2, *, beta=1, alpha=1):
    # sum_b b1[b] @ b2[b] as one mm over the joint (batch, k) dim: one accumulation, like eager.
    batch, n, k = b1.shape
    m = b2.shape[2]
    lhs = prims.reshape(prims.permute(b1, [1, 0, 2]), [n, batch * k])
    rhs = prims.reshape(b2, [batch * k, m])
    return _scaled_sum(bias, mm(lhs, rhs), beta, alpha)


@register_decomposition(aten.addr.default)
def addr(bias, v1, v2, *, beta=1, alpha=1):
    outer = prims.mul(prims.expand_dims(v1, [1]), prims.expand_dims(v2, [0]))
    if bias.dtype == torch.bool:
        out = prims.logical_and(outer, scalar(bool(alpha), outer)) if alpha is not None else outer
        if beta:
            out = prims.logical_or(expand_to(bias, list(out.shape)), out)
        return out
    return _scaled_sum(bias, outer, beta, alpha)


@register_decomposition(aten._cdist_forward.default)
def cdist_forward(x1, x2, p, compute_mode=None):
    # |x1_i - x2_j|_p over the last dim, by broadcasting [..., P, 1, M] against [..., 1, R, M].
    diff = prims.sub(prims.expand_dims(x1, [x1.dim() - 1]), prims.expand_dims(x2, [x2.dim() - 2]))
    return aten.linalg_vector_norm.default(diff, p, [-1])


def batched_matmul(a, b):
    """a @ b for operands with equal batch dims ([..., n, k] @ [..., k, m]) via mm/bmm."""
    if a.dim() == 2:
        return prims.mm(a, b)
    batch = list(a.shape[:-2])
    n = 1
    for s in batch:
        n *= s
    a3 = prims.reshape(a, [n, a.shape[-2], a.shape[-1]])
    b3 = prims.reshape(b, [n, b.shape[-2], b.shape[-1]])
    return prims.reshape(prims.bmm(a3, b3), [*batch, a.shape[-2], b.shape[-1]])


@register_decomposition(aten._euclidean_dist.default)
def euclidean_dist(x1, x2):
    return cdist_forward(x1, x2, 2.0)
