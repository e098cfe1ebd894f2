"""A compiled backward that owns its arguments (`owns_arguments`): called with one list of
the saved values and tangents, after the context let go of the saved values, so that each
activation can die at its last use inside the backward instead of at its end."""

import gc
import weakref

import pytest
import torch

from ember_aot_autograd import aot_function


def _step(x, w):
    return (torch.tanh(x @ w) * x.sum()).sum()


def test_saved_values_are_handed_over_and_gradients_match():
    """The saved values are reachable only through the list: once it is emptied, nothing in
    the runtime or the autograd context keeps them (weakrefs dead). The gradients are
    eager's."""
    kept: dict = {}

    def keeping_backward(gm, example_inputs):
        def run(args: list):
            kept["args"] = list(args)  # this test's own hold: the values stay reachable
            args.clear()
            return gm(*kept["args"])

        run.owns_arguments = True
        return run

    x = torch.randn(8, 4, requires_grad=True)
    w = torch.randn(4, 4, requires_grad=True)
    compiled = aot_function(_step, lambda gm, _: gm, keeping_backward)
    compiled(x, w).backward()
    got = (x.grad.clone(), w.grad.clone())
    x.grad = w.grad = None
    _step(x, w).backward()
    torch.testing.assert_close(got, (x.grad, w.grad))
    assert kept["args"], "the backward was called with its saved values"


def test_nothing_else_holds_the_saved_values():
    seen: dict = {}
    saved_refs: list = []
    x = torch.randn(8, 4, requires_grad=True)
    w = torch.randn(4, 4, requires_grad=True)

    def backward(gm, example_inputs):
        def run(args: list):
            saved_refs.extend(
                weakref.ref(a)
                for a in args
                if isinstance(a, torch.Tensor) and a is not x and a is not w and a.dim()
            )  # what the forward made (not the user's inputs, not the scalar tangent)
            seen["made"] = len(saved_refs)
            values = list(args)
            args.clear()
            out = gm(*values)
            del values
            gc.collect()
            seen["alive_made"] = sum(r() is not None for r in saved_refs)
            return out

        run.owns_arguments = True
        return run

    loss = aot_function(_step, lambda gm, _: gm, backward)(x, w)
    loss.backward()
    # every value the forward made and saved was released once the list was emptied
    assert seen["made"] >= 1, "the step saves values it made (its tanh)"
    assert seen["alive_made"] == 0, seen
    with pytest.raises(RuntimeError, match=r"second time|already been freed"):
        loss.backward()


def test_a_retained_graph_keeps_its_saved_values_for_the_next_backward():
    calls = []

    def backward(gm, example_inputs):
        def run(args: list):
            values = list(args)
            args.clear()
            calls.append(len(values))
            return gm(*values)

        run.owns_arguments = True
        return run

    x = torch.randn(8, 4, requires_grad=True)
    w = torch.randn(4, 4, requires_grad=True)
    loss = aot_function(_step, lambda gm, _: gm, backward)(x, w)
    loss.backward(retain_graph=True)
    first = x.grad.clone()
    loss.backward()
    torch.testing.assert_close(x.grad, 2 * first)
    assert len(calls) == 2 and calls[0] == calls[1]
