"""`opt.zero_grad()` at the top of a compiled training step drops the old gradients before
the forward graph runs, as eager does: holding them through the forward (writing
`p.grad = None` only after the graph) adds one set of gradients to the step's peak memory.
Where the trace reads a gradient before zeroing it, the write stays after the graph."""

from __future__ import annotations

import copy

import pytest
import torch

import ember

TOL = {"rtol": 1e-5, "atol": 1e-6}


class Watching:
    """A backend that records, at each graph call, which of `params` still hold a gradient,
    then runs the graph through `inner`."""

    def __init__(self, inner: str, params: list[torch.Tensor]) -> None:
        self.inner, self.params, self.seen = inner, params, []

    def __call__(self, gm, example_inputs):
        compiled = ember.lookup_backend(self.inner)(gm, example_inputs)

        def run(*args):
            self.seen.append([p.grad is not None for p in self.params])
            return compiled(*args)

        return run


def _setup():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    return model, torch.randn(6, 8), torch.randn(6, 4)


def _step(model, opt, read_first: bool = False):
    def step(x, y):
        norm = None
        if read_first:  # a gradient read before zero_grad: it must reach the graph intact
            norm = model[0].weight.grad.abs().sum() if model[0].weight.grad is not None else None
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss, norm

    return step


def _same(model, ref_model, opt, ref_opt):
    for p, q in zip(model.parameters(), ref_model.parameters(), strict=True):
        torch.testing.assert_close(p, q, **TOL)
        torch.testing.assert_close(p.grad, q.grad, **TOL)
        for key in ref_opt.state[q]:
            torch.testing.assert_close(opt.state[p][key], ref_opt.state[q][key], **TOL)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_old_gradients_are_gone_when_the_forward_graph_runs(backend):
    ember.reset()
    model, x, y = _setup()
    ref_model = copy.deepcopy(model)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    ref_opt = torch.optim.AdamW(ref_model.parameters(), lr=0.01)
    watching = Watching(backend, list(model.parameters()))
    compiled = ember.compile(_step(model, opt), backend=watching)
    eager = _step(ref_model, ref_opt)
    for _ in range(3):
        got, ref = compiled(x, y), eager(x, y)
        torch.testing.assert_close(got[0], ref[0], **TOL)
        _same(model, ref_model, opt, ref_opt)
    # per step: the forward graph (no gradient left: zero_grad ran first), then the
    # optimizer graph after backward (all four); a first step has no old gradients either
    assert watching.seen == [[False] * 4, [True] * 4] * 3
    assert ember.counters[backend]["forward_graphs"] == 2
    assert ember.counters[backend]["backward_runs"] == 3


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_gradient_read_before_zero_grad_stays_for_the_graph(backend):
    ember.reset()
    model, x, y = _setup()
    ref_model = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref_model.parameters(), lr=0.1)
    compiled = ember.compile(_step(model, opt, read_first=True), backend=backend)
    eager = _step(ref_model, ref_opt, read_first=True)
    for _ in range(3):
        got, ref = compiled(x, y), eager(x, y)
        torch.testing.assert_close(got[0], ref[0], **TOL)
        if ref[1] is None:
            assert got[1] is None
        else:
            torch.testing.assert_close(got[1], ref[1], **TOL)
        _same(model, ref_model, opt, ref_opt)
