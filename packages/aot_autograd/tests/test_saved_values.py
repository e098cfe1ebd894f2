"""A tensor autograd saved for the backward, then written in place by the forward
(saved_values.py): the trace compiles (fuzz 2026:3, 2026:176 failed at compile time with
autograd's version check), forward values are eager's, and the backward raises eager's error
exactly when eager's backward reaches the written tensor; otherwise gradients are eager's."""

from __future__ import annotations

import pytest
import torch

from conftest import CountingCompiler
from ember_aot_autograd import aot_function
from ember_aot_autograd.joint import trace_joint


def _saved_then_clamped(y, w):
    a = y * w + 1.0  # MulBackward saves y
    y.clamp_(min=-0.5)
    return a, w * 2


def _saved_then_added_in_a_loop(y, w):
    v = y * 1.0  # a non-leaf, as the fuzzer's argument
    for _ in range(2):
        v.add_(v * w + 0.5)  # MulBackward saves v, which add_ then writes
    return v


def _written_but_not_saved(y, w):
    a = y + w  # AddBackward saves nothing
    y.mul_(2)
    return a, y


def _output_written_after_use(y, w):
    z = y * w
    out = z.exp()  # ExpBackward saves its result, not z
    z.add_(1)
    return out, z


def _args():
    torch.manual_seed(0)
    return torch.randn(3, 4), torch.randn(4, requires_grad=True)


def _run(fn, compiled_fn, loss):
    """Forward and backward, eager and compiled: (outputs, grad of w) or the error raised."""
    results = []
    for f in (fn, compiled_fn):
        y, w = _args()
        out = f(y, w)
        outs = out if isinstance(out, tuple) else (out,)
        try:
            loss(outs).backward()
            results.append((outs, y, w.grad, None))
        except RuntimeError as error:
            results.append((outs, y, w.grad, error))
    return results


CASES = [
    # (function, loss, eager's backward raises)
    (_saved_then_clamped, lambda o: o[0].sum(), True),
    (_saved_then_clamped, lambda o: o[1].sum(), False),  # never reaches MulBackward
    (_saved_then_added_in_a_loop, lambda o: o[0].sum(), True),
    (_written_but_not_saved, lambda o: o[0].sum() + o[1].sum(), False),
    (_output_written_after_use, lambda o: o[0].sum() + o[1].sum(), False),
]


@pytest.mark.parametrize(("fn", "loss", "raises"), CASES)
def test_saved_tensor_written_later_matches_eager(fn, loss, raises, partition_fn):
    fw, bw = CountingCompiler(), CountingCompiler()
    compiled = aot_function(fn, fw, bw, partition_fn=partition_fn)
    (e_outs, e_y, e_grad, e_err), (c_outs, c_y, c_grad, c_err) = _run(fn, compiled, loss)
    assert (e_err is not None) == raises
    assert (c_err is not None) == raises, c_err
    for want, got in zip(e_outs, c_outs, strict=True):
        torch.testing.assert_close(got, want)
    torch.testing.assert_close(c_y, e_y)  # the input's write reached the caller
    if raises:
        assert "modified by an inplace operation" in str(e_err)
        assert "modified by an inplace operation" in str(c_err)
    else:
        torch.testing.assert_close(c_grad, e_grad)
    assert fw.calls == 1 and bw.calls == 1  # one training variant, really compiled


def test_joint_graph_reads_the_value_saved_before_the_write():
    # eager's backward raises here, so the graph is checked directly: the gradient of w is
    # computed from y as the product saw it, not from y after the write
    def fn(y, w):
        a = y * w
        y.mul_(10.0)
        return a

    y, w = _args()
    joint = trace_joint(fn, [y, w])
    assert joint.stale_saved and "modified by an inplace operation" in joint.stale_saved[0][1]
    tangent = torch.randn(3, 4)
    new_y, a, grad_w = joint.gm(y, w.detach(), tangent)
    torch.testing.assert_close(new_y, y * 10.0)
    torch.testing.assert_close(a, y * w.detach())
    torch.testing.assert_close(grad_w, (y * tangent).sum(0))
