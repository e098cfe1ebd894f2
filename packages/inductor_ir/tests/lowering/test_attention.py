"""The attention prims lower to one extern kernel each, with tuple outputs (out and
logsumexp; three gradients), reading HF's transposed heads as strided views of the
projection's buffer (no copy), the output's eager strides kept for the reshape after it."""

import torch

from ember_inductor_ir.extern import ExternKernel
from ember_inductor_ir.nodes import ComputedBuffer
from ember_primops import prims

B, L, H, E = 2, 6, 4, 8


def _externs(lowering) -> list[ExternKernel]:
    return [op for op in lowering.operations if isinstance(op, ExternKernel)]


def _heads(x):
    return prims.permute(prims.reshape(x, [B, L, H, E]), [0, 2, 1, 3])


def test_flash_forward_is_one_extern_reading_transposed_views(check):
    def fn(x, k, v, mask):
        q = _heads(prims.mul(x, x))
        out, lse = prims.sdpa_flash_cpu(q, _heads(k), _heads(v), mask, False, None)
        merged = prims.reshape(prims.permute(out, [0, 2, 1, 3]), [B, L, H * E])
        return prims.tanh(merged), prims.exp(lse)

    x, k, v = (torch.randn(B, L, H * E) for _ in range(3))
    mask = torch.randn(B, 1, 1, L)
    lowering, _ = check(fn, x, k, v, mask)
    (extern,) = _externs(lowering)
    assert extern.kernel_name == "sdpa_flash_cpu" and not extern.fallback
    assert len(extern.outputs) == 2 and [o.index for o in extern.outputs] == [0, 1]
    assert lowering.extern_counts["sdpa_flash_cpu"] == 1 and not lowering.fallback_counts
    # q is the squared buffer itself, seen transposed: no copy into (B, H, L, E)
    squared = next(op for op in lowering.operations if isinstance(op, ComputedBuffer))
    q_arg = extern.args[0]
    assert q_arg.name == squared.name and q_arg.view is not None
    # the output keeps the kernel's (B, L, H, E) layout, so the head merge is a view
    out_layout = extern.outputs[0].layout
    assert [int(s) for s in out_layout.stride] == [L * H * E, E, H * E, 1]


def test_flash_backward_is_one_extern_with_three_outputs(check):
    q, k, v = (torch.randn(B, L, H, E).transpose(1, 2) for _ in range(3))
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, True)
    grad = torch.randn(B, H, L, E)

    def fn(grad, q, k, v, out, lse):
        gq, gk, gv = prims.sdpa_flash_cpu_backward(
            prims.neg(grad), q, k, v, out, lse, None, True, 0.5
        )
        return prims.add(gq, gk), gv

    lowering, _ = check(fn, grad, q, k, v, out, lse)
    (extern,) = _externs(lowering)
    assert extern.kernel_name == "sdpa_flash_cpu_backward" and len(extern.outputs) == 3
    assert not lowering.fallback_counts


def test_computed_heads_are_stored_in_the_traced_order(check):
    # a fused qkv projection's bias add, selected per head group: q/k/v must be computed
    # (a select reads a third of the base), and are stored (B, L, H, E)-ordered as eager's
    # views are, so the kernel returns the traced (B, L, H, E) output layout: no copy after it
    def fn(qkv, bias):
        heads = prims.reshape(prims.add(qkv, bias), [B, L, 3, H, E])
        q, k, v = (
            prims.permute(
                prims.squeeze(prims.slice(heads, [0, 0, i, 0, 0], [B, L, i + 1, H, E]), [2]),
                [0, 2, 1, 3],
            )
            for i in range(3)
        )
        out, _ = prims.sdpa_flash_cpu(q, k, v, None, True, None)
        return (prims.reshape(prims.permute(out, [0, 2, 1, 3]), [B, L, H * E]),)

    lowering, _ = check(fn, torch.randn(B, L, 3 * H * E), torch.randn(3 * H * E))
    (extern,) = _externs(lowering)
    for arg in extern.args[:3]:
        stride = [int(s) for s in lowering.buffers[arg.name].layout.stride]
        assert stride == [L * H * E, E, H * E, 1] and arg.view is None
    assert [int(s) for s in extern.outputs[0].layout.stride] == [L * H * E, E, H * E, 1]


def test_a_padded_mask_is_fed_with_eagers_row_alignment(check):
    # aten pads an attention mask's rows to 16 bytes for the fused kernels (pad, then slice
    # back): the slice must be computed, and is stored with the padded row stride eager feeds
    # (8 here, not the 7 of dense rows) and its broadcast batch dim outermost
    n = 7

    def fn(q, bias):
        mask = prims.broadcast_in_dim(prims.tanh(bias), [B, H, n, n], [1, 2, 3])
        padded = prims.pad(mask, 0.0, [0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 0, 0])
        sliced = prims.slice(padded, [0, 0, 0, 0], [B, H, n, n])
        out, _ = prims.sdpa_flash_cpu(q, q, q, sliced, False, None)
        return (out,)

    q, bias = torch.randn(B, H, n, E), torch.randn(H, n, n)
    lowering, _ = check(fn, q, bias)
    (extern,) = _externs(lowering)
    mask_arg = extern.args[3]
    stride = [int(s) for s in lowering.buffers[mask_arg.name].layout.stride]
    assert stride[3] == 1 and stride[2] == 8, stride
