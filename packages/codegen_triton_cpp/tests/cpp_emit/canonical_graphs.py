"""The canonical graphs of the golden files and the kernel-count tests (prim functions
plus example inputs; deterministic so that their generated code is stable)."""

from __future__ import annotations

import torch

from ember_primops import prims

CPU = torch.device("cpu")


def pointwise_chain(a, b):
    x = prims.add(a, b)
    for op in (
        prims.sin,
        prims.exp,
        prims.neg,
        prims.abs,
        prims.sqrt,
        prims.cos,
        prims.tanh,
        prims.sigmoid,
    ):
        x = op(x)
    return (prims.mul(x, b),)  # 10 element-wise ops


def softmax(n, d):
    return lambda a: _softmax(a, n, d)


def _softmax(a, n, d):
    m = prims.broadcast_in_dim(prims.amax(a, [1]), [n, d], [0])
    e = prims.exp(prims.sub(a, m))
    s = prims.broadcast_in_dim(prims.sum(e, [1]), [n, d], [0])
    return (prims.div(e, s),)


def reduction_epilogue(a):
    vm = prims.var_mean(a, [1], 1.0)
    return (prims.rsqrt(prims.add(vm[0], vm[1])),)


def layer_norm(n, d):
    return lambda a, w, b: _layer_norm(a, w, b, n, d)


def _layer_norm(a, w, b, n, d):
    vm = prims.var_mean(a, [1], 0.0)
    mean = prims.broadcast_in_dim(vm[1], [n, d], [0])
    var = prims.broadcast_in_dim(vm[0], [n, d], [0])
    eps = prims.full([n, d], 1e-5, dtype=torch.float32, device=CPU)
    y = prims.mul(prims.sub(a, mean), prims.rsqrt(prims.add(var, eps)))
    y = prims.mul(y, prims.broadcast_in_dim(w, [n, d], [1]))
    return (prims.add(y, prims.broadcast_in_dim(b, [n, d], [1])),)


def mm_bias_relu(n, m):
    return lambda x, w, b: _mm_bias_relu(x, w, b, n, m)


def _mm_bias_relu(x, w, b, n, m):
    h = prims.mm(x, prims.permute(w, [1, 0]))
    h = prims.add(h, prims.broadcast_in_dim(b, [n, m], [1]))
    return (prims.maximum(h, prims.full([n, m], 0.0, dtype=torch.float32, device=CPU)),)


def _inputs(*shapes):
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(*s, generator=gen) for s in shapes]


GOLDEN = {
    "pointwise_chain": (pointwise_chain, lambda: _inputs((64, 32), (64, 32))),
    "softmax": (softmax(256, 512), lambda: _inputs((256, 512))),
    "reduction_epilogue": (reduction_epilogue, lambda: _inputs((6, 10))),
    "mm_bias_relu": (mm_bias_relu(8, 4), lambda: _inputs((8, 16), (4, 16), (4,))),
}
