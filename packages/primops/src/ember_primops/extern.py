"""Extern prims: operators the loop IR hands to libraries (BLAS, cuDNN, FFT, attention).

Each reference calls the aten kernel; each meta checks the arguments and asks aten's meta kernel
for the result metadata. The LAPACK-style kernels live in ``linalg.py``.
"""

from __future__ import annotations

import math

import torch

from ._checks import broadcast_shapes, check_dtype, check_same_dtype, check_tensor
from ._extern_base import define_extern
from ._registry import fail

aten = torch.ops.aten


def _check_mm(p: str, a, b, ndim: int) -> None:
    for t, what in ((a, "a"), (b, "b")):
        check_tensor(p, t, what)
        if t.ndim != ndim:
            fail(p, f"{what} must be {ndim}-d, got shape {list(t.shape)}")
    check_same_dtype(p, [a, b])
    check_dtype(p, a, "number")
    if a.shape[-1] != b.shape[-2]:
        fail(p, f"shapes {list(a.shape)} and {list(b.shape)} cannot be multiplied")
    if ndim == 3 and a.shape[0] != b.shape[0]:
        fail(p, f"batch sizes {a.shape[0]} and {b.shape[0]} differ")


define_extern(
    "mm(Tensor a, Tensor b) -> Tensor",
    lambda a, b: aten.mm(a, b),
    lambda a, b: _check_mm("mm", a, b, 2),
    notes="(n, k) @ (k, m)",
)
define_extern(
    "bmm(Tensor a, Tensor b) -> Tensor",
    lambda a, b: aten.bmm(a, b),
    lambda a, b: _check_mm("bmm", a, b, 3),
    notes="(b, n, k) @ (b, k, m)",
)


def _check_addmm(bias, a, b):
    _check_mm("addmm", a, b, 2)
    check_tensor("addmm", bias, "bias")
    check_same_dtype("addmm", [bias, a])
    out = [a.shape[0], b.shape[1]]
    if broadcast_shapes("addmm", [bias.shape, out]) != out:
        fail("addmm", f"bias of shape {list(bias.shape)} does not broadcast to {out}")


define_extern(
    "addmm(Tensor bias, Tensor a, Tensor b) -> Tensor",
    lambda bias, a, b: aten.addmm(bias, a, b),
    _check_addmm,
    notes="bias + a @ b (a GEMM epilogue)",
)


def _check_conv(
    p: str, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups
) -> None:
    check_tensor(p, input, "input")
    check_tensor(p, weight, "weight")
    ts = [input, weight] + ([check_tensor(p, bias, "bias")] if bias is not None else [])
    check_same_dtype(p, ts)
    check_dtype(p, input, "float_complex")
    spatial = input.ndim - 2
    if spatial < 1 or weight.ndim != input.ndim:
        fail(p, f"input {list(input.shape)} and weight {list(weight.shape)} must both be 3-5 d")
    for name, values in (("stride", stride), ("padding", padding), ("dilation", dilation)):
        if len(values) not in (1, spatial):
            fail(p, f"{name} {list(values)} needs {spatial} entries")
    if groups <= 0:
        fail(p, f"groups must be positive, got {groups}")
    channels = weight.shape[0] if transposed else weight.shape[1] * groups
    if input.shape[1] != channels:
        fail(p, f"input has {input.shape[1]} channels, weight expects {channels}")


def conv_layout(input, *args) -> torch.memory_format:
    """Like eager: channels_last(_3d) input -> channels_last(_3d) result, else contiguous."""
    for fmt in (torch.channels_last, torch.channels_last_3d):
        rank = 4 if fmt == torch.channels_last else 5
        if (
            input.ndim == rank
            and input.is_contiguous(memory_format=fmt)
            and not input.is_contiguous()
        ):
            return fmt
    return torch.contiguous_format


define_extern(
    "convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding,"
    " SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor",
    lambda *args: aten.convolution(*args),
    lambda *args: _check_conv("convolution", *args),
    notes="aten.convolution (1-3 spatial dims, groups, transposed); keeps channels_last",
    layout=conv_layout,
)


def _check_conv_backward(
    grad_output,
    input,
    weight,
    bias_sizes,
    stride,
    padding,
    dilation,
    transposed,
    output_padding,
    groups,
    output_mask,
) -> None:
    p = "convolution_backward"
    _check_conv(
        p, input, weight, None, stride, padding, dilation, transposed, output_padding, groups
    )
    check_tensor(p, grad_output, "grad_output")
    check_same_dtype(p, [grad_output, input])


define_extern(
    "convolution_backward(Tensor grad_output, Tensor input, Tensor weight, SymInt[]? bias_sizes,"
    " SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed,"
    " SymInt[] output_padding, SymInt groups, bool[3] output_mask)"
    " -> (Tensor?, Tensor?, Tensor?)",
    lambda *args: aten.convolution_backward(*args),
    _check_conv_backward,
    notes="(grad_input, grad_weight, grad_bias); None where output_mask is False",
)


def _check_sdpa(query, key, value, attn_mask, is_causal, scale):
    p = "scaled_dot_product_attention"
    for t, what in ((query, "query"), (key, "key"), (value, "value")):
        check_tensor(p, t, what)
        if t.ndim < 2:
            fail(p, f"{what} must have at least 2 dims")
    check_same_dtype(p, [query, key, value])
    check_dtype(p, query, "float")
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        fail(
            p,
            f"query {list(query.shape)}, key {list(key.shape)}, value "
            f"{list(value.shape)}: need E(q) == E(k) and S(k) == S(v)",
        )
    if attn_mask is not None and is_causal:
        fail(p, "give either attn_mask or is_causal, not both")


def _sdpa(query, key, value, attn_mask, is_causal, scale):
    return torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attn_mask, dropout_p=0.0, is_causal=is_causal, scale=scale
    )


define_extern(
    "scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask,"
    " bool is_causal, float? scale) -> Tensor",
    _sdpa,
    _check_sdpa,
    notes="softmax(q k^T * scale + mask) v, no dropout; scale None = 1/sqrt(E)",
)


def _check_fft(p: str, a, dims, dtype_class: str) -> None:
    check_tensor(p, a)
    check_dtype(p, a, dtype_class)
    if not dims or any(not -a.ndim <= d < a.ndim for d in dims):
        fail(p, f"dims {list(dims)} must be a non-empty list of dims of a {a.ndim}-d tensor")


define_extern(
    "fft_r2c(Tensor a, int[] dims, bool onesided) -> Tensor",
    lambda a, dims, onesided: aten._fft_r2c(a, dims, 0, onesided),
    lambda a, dims, onesided: _check_fft("fft_r2c", a, dims, "float32_64"),
    notes="unnormalized real -> complex FFT over dims (onesided: last dim n//2 + 1)",
    eager=lambda a, dims, onesided: (torch.fft.rfftn if onesided else torch.fft.fftn)(a, dim=dims),
)
define_extern(
    "fft_c2c(Tensor a, int[] dims, bool forward) -> Tensor",
    lambda a, dims, forward: aten._fft_c2c(a, dims, 0, forward),
    lambda a, dims, forward: _check_fft("fft_c2c", a, dims, "complex"),
    notes="unnormalized complex FFT (forward) or inverse FFT (not divided by n)",
    eager=lambda a, dims, forward: (
        torch.fft.fftn(a, dim=dims)
        if forward
        else torch.fft.ifftn(a, dim=dims) * math.prod(a.shape[d] for d in dims)
    ),
)
define_extern(
    "fft_c2r(Tensor a, int[] dims, SymInt last_dim_size) -> Tensor",
    lambda a, dims, n: aten._fft_c2r(a, dims, 0, n),
    lambda a, dims, n: _check_fft("fft_c2r", a, dims, "complex"),
    notes="unnormalized inverse of fft_r2c; last_dim_size is the real length of the last dim",
    eager=lambda a, dims, n: (
        torch.fft.irfftn(a, s=[a.shape[d] for d in dims[:-1]] + [n], dim=dims)
        * (math.prod(a.shape[d] for d in dims[:-1]) * n)
    ),
)
