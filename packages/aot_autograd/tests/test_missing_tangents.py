"""Outputs the loss does not use: gradients None exactly where eager's are None."""

import pytest
import torch

from conftest import CountingCompiler, clone_module
from ember_aot_autograd import aot_function, aot_module
from ember_aot_autograd.missing_tangents import tangent_masks


class TwoHeads(torch.nn.Module):
    """`h` feeds both outputs; `b` feeds only the second, `c` only the third."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 4)
        self.c = torch.nn.Linear(4, 3)

    def forward(self, x):
        h = torch.tanh(self.a(x))
        return h, self.b(h), self.c(x).relu()


LOSSES = {
    "first": lambda outs: outs[0].sum(),
    "second": lambda outs: outs[1].square().sum(),
    "third": lambda outs: outs[2].sum(),
    "first_and_third": lambda outs: outs[0].sum() + outs[2].mean(),
    "all": lambda outs: sum(o.sum() for o in outs),
}


def _grads(module, x):
    return {name: p.grad for name, p in module.named_parameters()} | {"x": x.grad}


@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_unused_outputs_leave_grads_none_like_eager(loss, partition_fn):
    torch.manual_seed(0)
    module = TwoHeads()
    eager = clone_module(module)
    x_eager = torch.randn(2, 4, requires_grad=True)
    x = x_eager.detach().clone().requires_grad_()
    fw, bw = CountingCompiler(), CountingCompiler()
    compiled = aot_module(module, [x], fw, bw, partition_fn=partition_fn)
    for _ in range(2):  # the second call reuses the cached keep-decision
        LOSSES[loss](eager(x_eager)).backward()
        LOSSES[loss](compiled(x)).backward()
        expected, actual = _grads(eager, x_eager), _grads(module, x)
        for name, want in expected.items():
            got = actual[name]
            assert (got is None) == (want is None), (name, got, want)
            if want is not None:
                torch.testing.assert_close(got, want)
    assert fw.calls == 1 and bw.calls == 1  # one training variant, really compiled


def test_absent_tangent_read_by_a_kept_gradient_is_zeros(partition_fn):
    # x's gradient reads both tangents; only the first output is used
    def fn(x, w):
        return (x * w).sin(), (x * 3).exp()

    x = torch.randn(5, requires_grad=True)
    w = torch.randn(5, requires_grad=True)
    xe, we = (t.detach().clone().requires_grad_() for t in (x, w))
    compiled = aot_function(fn, CountingCompiler(), partition_fn=partition_fn)
    compiled(x, w)[0].sum().backward()
    fn(xe, we)[0].sum().backward()
    torch.testing.assert_close(x.grad, xe.grad)
    torch.testing.assert_close(w.grad, we.grad)


def test_tangent_masks_follow_the_backward_graph():
    def bw(saved, t0, t1):
        return saved * t0, t1 + 1, saved * 2

    gm = torch.fx.symbolic_trace(bw)
    assert tangent_masks(gm, 1) == (0b01, 0b10, 0)
