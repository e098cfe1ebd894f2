"""Compiled graphs run with the caller's autocast off: a graph traced under autocast holds
its casts as ops, so running it under autocast again would cast what the graph keeps in
float32 (here a matmul in an `autocast(enabled=False)` block, as in an attention's math).
Eager's result under autocast is the oracle, forward and backward."""

import torch

from conftest import CountingCompiler
from ember_aot_autograd import aot_function


def _scores(a, b):
    with torch.autocast("cpu", enabled=False):
        s = torch.bmm(a.float(), b.float())
    return (s * 0.5).softmax(-1)


def _inputs(requires_grad: bool):
    torch.manual_seed(0)
    a, b = torch.randn(2, 16, 8), torch.randn(2, 8, 16)
    return a.requires_grad_(requires_grad), b.requires_grad_(requires_grad)


def test_inference_graph_keeps_its_float32_matmul_under_autocast():
    fw = CountingCompiler()
    compiled = aot_function(_scores, fw)
    a, b = _inputs(False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = _scores(a, b)
        for _ in range(2):
            got = compiled(a, b)
            assert torch.is_autocast_enabled("cpu")  # given back to the caller
    assert fw.calls == 1 and got.dtype == expected.dtype == torch.float32
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)


def test_training_graphs_keep_their_float32_matmul_under_autocast():
    fw, bw = CountingCompiler(), CountingCompiler()
    compiled = aot_function(_scores, fw, bw)
    a, b = _inputs(True)
    ea, eb = (t.detach().clone().requires_grad_(True) for t in (a, b))
    weights = torch.randn(2, 16, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = _scores(ea, eb)
        (expected * weights).sum().backward()
        got = compiled(a, b)
        (got * weights).sum().backward()
    assert (fw.calls, bw.calls) == (1, 1)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(a.grad, ea.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(b.grad, eb.grad, atol=1e-5, rtol=1e-5)
