"""A float32 buffer whose values are all bfloat16 values (narrow_stores in the loop IR) is
allocated as bfloat16, its kernel stores bfloat16 and its readers widen: the compiled
graph matches eager bit for bit."""

from __future__ import annotations

import torch

from ember_primops import prims


def _rounded_for_two(x, w):
    """exp(x) * w rounded to bfloat16 and widened, read by a reduction and by a pointwise
    at the transposed element (so that the value goes through memory)."""
    y = prims.convert_element_type(
        prims.convert_element_type(prims.mul(prims.exp(x), w), torch.bfloat16), torch.float32
    )
    return prims.add(y, prims.permute(y, [1, 0])), prims.amax(y, [1])


def _inputs():
    torch.manual_seed(0)
    return torch.randn(96, 96), torch.randn(96, 96)


def test_a_rounded_value_is_stored_as_bfloat16(compile_prims):
    x, w = _inputs()
    sched, compiled = compile_prims(_rounded_for_two, x, w)
    bf16 = [b for b in sched.buffers.values() if b.widen_to is torch.float32]
    assert len(bf16) == 1 and bf16[0].layout.dtype == torch.bfloat16
    name = bf16[0].name
    source = compiled.cpp_source
    assert f"uint16_t* EMBER_RESTRICT {name}" in source  # written as bfloat16 bits
    assert f"{name}[" in source and f"bf16_to_float({name}[" in source  # read widened
    for _ in range(2):
        got = compiled([x, w])
        for g, e in zip(got, _rounded_for_two(x, w), strict=True):
            assert g.dtype == e.dtype and torch.equal(g, e)
