"""Forward and backward graphs from ember-aot-autograd compiled by the Triton target."""

import pytest
import torch

from ember_codegen import compile_graph
from ember_inductor_ir import lower, schedule

aot = pytest.importorskip("ember_aot_autograd")


class TritonCompiler:
    def __init__(self) -> None:
        self.compiled = []

    def __call__(self, gm, example_inputs):
        compiled = compile_graph(schedule(lower(gm, example_inputs)), target="triton")
        self.compiled.append(compiled)
        return lambda *args: compiled(list(args))


def _mlp_loss(w1, b1, w2, x, y):
    h = torch.nn.functional.gelu(x @ w1.t() + b1)
    logits = torch.nn.functional.layer_norm(h @ w2.t(), (w2.shape[0],))
    return torch.nn.functional.cross_entropy(logits, y)


def test_training_step_matches_eager():
    from ember_primops import decomposition_table

    torch.manual_seed(0)
    params = [torch.randn(16, 8) * 0.3, torch.randn(16) * 0.1, torch.randn(5, 16) * 0.3]
    x, y = torch.randn(12, 8), torch.randint(0, 5, (12,))
    fw, bw = TritonCompiler(), TritonCompiler()
    fn = aot.aot_function(_mlp_loss, fw, bw, decompositions=decomposition_table())

    def step(fun, ps):
        ps = [p.clone().requires_grad_(True) for p in ps]
        loss = fun(*ps, x, y)
        loss.backward()
        return loss.detach(), [p.grad for p in ps]

    want_loss, want_grads = step(_mlp_loss, params)
    for _ in range(2):
        loss, grads = step(fn, params)
        torch.testing.assert_close(loss, want_loss, atol=1e-5, rtol=1e-5)
        for g, w in zip(grads, want_grads, strict=True):
            torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-4)
    assert len(fw.compiled) == 1 and len(bw.compiled) == 1
    assert fw.compiled[0].kernel_count >= 1 and bw.compiled[0].kernel_count >= 1
