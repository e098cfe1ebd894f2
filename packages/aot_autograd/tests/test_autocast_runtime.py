"""Compiled graphs called under an enclosing autocast: the graph already holds the casts
that autocast made while it was traced, so it must not be cast a second time when it runs.
A float32 product the function computes with autocast switched off (as Llama's rotary
embedding does) stays float32, in an inference call and in a training forward; the
backward, traced under the same autocast, runs with autocast off as well."""

import torch

from conftest import CountingCompiler, leaves
from ember_aot_autograd import aot_function


def angles(scale, steps):
    """An outer product forced to float32 inside a bfloat16 region, then a bf16 product."""
    with torch.autocast("cpu", enabled=False):
        table = scale.float() @ steps.float()  # float32 on purpose
        waves = table.sin() * 3.0
    return waves, waves @ waves.t()  # the second product follows the enclosing autocast


def make_inputs(requires_grad):
    torch.manual_seed(0)
    scale = torch.rand(24, 8, requires_grad=requires_grad)
    steps = torch.randn(8, 40)
    return [scale, steps]


def run_both(requires_grad):
    fw, bw = CountingCompiler(), CountingCompiler()
    compiled = aot_function(angles, fw, bw)
    eager_in, compiled_in = leaves(make_inputs(requires_grad)), leaves(make_inputs(requires_grad))
    with torch.autocast("cpu", torch.bfloat16):
        expected = angles(*eager_in)
        actual = compiled(*compiled_in)
        for _ in range(2):  # a later call (the compiled variant reused) as well
            actual = compiled(*compiled_in)
    for want, got in zip(expected, actual, strict=True):
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert expected[0].dtype == torch.float32 and expected[1].dtype == torch.bfloat16
    return fw, bw, eager_in, compiled_in, expected, actual


def test_inference_under_autocast_keeps_float32_block():
    with torch.no_grad():
        fw, bw, *_ = run_both(requires_grad=False)
    assert fw.calls == 1 and bw.calls == 0


def test_training_under_autocast_forward_and_backward():
    fw, bw, eager_in, compiled_in, expected, actual = run_both(requires_grad=True)
    with torch.autocast("cpu", torch.bfloat16):  # the backward too, inside the region
        (expected[0].sum() + expected[1].float().sum()).backward()
        (actual[0].sum() + actual[1].float().sum()).backward()
    assert fw.calls == 1 and bw.calls == 1
    torch.testing.assert_close(compiled_in[0].grad, eager_in[0].grad, rtol=0, atol=0)
