"""The attention prims as extern calls in the C++ target's wrapper: one call each (the
prim's implementation, no per-call meta check), tuple results adopted without copies, the
fused kernel reading transposed views of a computed buffer, results equal to eager."""

import torch

from ember_primops import prims

B, L, H, E = 2, 6, 4, 8


def _heads(x):
    return prims.permute(prims.reshape(x, [B, L, H, E]), [0, 2, 1, 3])


def attention_forward(x, k, v, mask):
    out, lse = prims.sdpa_flash_cpu(
        _heads(prims.mul(x, x)), _heads(k), _heads(v), mask, False, None
    )
    merged = prims.reshape(prims.permute(out, [0, 2, 1, 3]), [B, L, H * E])
    return prims.tanh(merged), lse


def attention_backward(grad, q, k, v, out, lse):
    gq, gk, gv = prims.sdpa_flash_cpu_backward(prims.neg(grad), q, k, v, out, lse, None, True, 0.5)
    return prims.add(gq, gk), gv


def forward_inputs():
    torch.manual_seed(0)
    return [torch.randn(B, L, H * E) for _ in range(3)] + [torch.randn(B, 1, 1, L)]


def backward_inputs():
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, L, H, E).transpose(1, 2) for _ in range(3))
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, True)
    return [torch.randn(B, H, L, E), q, k, v, out, lse]


def _calls(source: str, name: str) -> int:
    return sum(1 for line in source.splitlines() if line.rstrip().endswith(f"# {name}"))


def test_forward_is_one_extern_call_without_copies(check):
    _, compiled = check(attention_forward, *forward_inputs())
    src = compiled.wrapper_source
    assert _calls(src, "sdpa_flash_cpu") == 1, src
    assert "_prim_impl[" in src
    assert "bmm" not in src and ".copy_(" not in src, src


def test_backward_is_one_extern_call(check):
    _, compiled = check(attention_backward, *backward_inputs())
    assert _calls(compiled.wrapper_source, "sdpa_flash_cpu_backward") == 1
