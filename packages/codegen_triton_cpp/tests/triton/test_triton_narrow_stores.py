"""The Triton target stores a float32 buffer of bfloat16 values (narrow_stores in the loop
IR) as bfloat16 and widens it in its readers: bit for bit eager's results."""

from __future__ import annotations

import torch

from ember_primops import prims


def _rounded_for_two(x, w):
    """A body too long to recompute (exp(x) * w, then eight multiply-adds) rounded to
    bfloat16 and widened, read by a reduction and by a pointwise at the transposed element
    (so that the value goes through memory)."""
    h = prims.mul(prims.exp(x), w)
    for _ in range(8):
        h = prims.add(prims.mul(h, w), x)
    y = prims.convert_element_type(prims.convert_element_type(h, torch.bfloat16), torch.float32)
    return prims.add(y, prims.permute(y, [1, 0])), prims.amax(y, [1])


def test_a_rounded_value_is_stored_as_bfloat16(compile_prims):
    torch.manual_seed(0)
    x, w = torch.randn(48, 48), torch.randn(48, 48)
    sched, compiled = compile_prims(_rounded_for_two, x, w)
    narrowed = [b for b in sched.buffers.values() if b.widen_to is torch.float32]
    assert len(narrowed) == 1 and narrowed[0].layout.dtype == torch.bfloat16
    source = compiled.triton_source
    assert f"tl.store(ptr_{narrowed[0].name}" in source, source
    assert ".to(tl.bfloat16)" in source
    for _ in range(2):
        got = compiled([x, w])
        for g, e in zip(got, _rounded_for_two(x, w), strict=True):
            assert g.dtype == e.dtype and torch.equal(g, e)
