"""Programs that raised under ember.compile where eager runs (issue 26, "crashes where eager
works"), each run under backend="eager" and the default "inductor" and compared with eager.
`ember.explain` pins the graph count, so that a silent fallback to eager fails the test."""

from __future__ import annotations

import pytest
import torch

import ember

BACKENDS = ["eager", "aot_eager", "inductor"]


pytestmark = pytest.mark.usefixtures("private_ember_cache")


def run_both(fn, make_args, backend, *, seed=0):
    """(eager result, compiled result) of fn on equal fresh arguments under one seed."""
    torch.manual_seed(seed)
    expected = fn(*make_args())
    torch.manual_seed(seed)
    got = ember.compile(fn, backend=backend)(*make_args())
    return expected, got


def graphs_and_breaks(fn, make_args, backend):
    ember.reset()
    out = ember.explain(fn, backend=backend)(*make_args())
    return out.graph_count, out.graph_break_count


# ---- 3. an argument named after a Python keyword (`from=`) ---------------------------------


def random_from_keyword(t):
    t = t.clone()
    t.random_(**{"from": -10, "to": 10})
    return t * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_from_keyword_argument(backend):
    make = lambda: (torch.zeros(64, dtype=torch.int64),)  # noqa: E731
    expected, got = run_both(random_from_keyword, make, backend)
    assert torch.equal(got, expected)  # aten's random_.from runs as in eager, same draws
    assert (got >= -20).all() and (got < 20).all()
    assert graphs_and_breaks(random_from_keyword, make, backend) == (1, 0)


# ---- 1. copy_ from a Python number -----------------------------------------------------------


def copy_from_numbers(x, n):
    y = x.clone()
    y.copy_(1)
    n.copy_(2.75)  # into an int32 input: truncated as eager does, and written back
    return y + x, n * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_copy_from_a_python_number(backend):
    make = lambda: (torch.randn(3, 4), torch.zeros(5, dtype=torch.int32))  # noqa: E731
    expected, got = run_both(copy_from_numbers, make, backend)
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype
        torch.testing.assert_close(g, e)
    args = make()
    ember.compile(copy_from_numbers, backend=backend)(*args)
    assert torch.equal(args[1], torch.full((5,), 2, dtype=torch.int32))
    assert graphs_and_breaks(copy_from_numbers, make, backend) == (1, 0)


# ---- 5. foreach ops that write a list of tensors (AMP GradScaler's unscale) ----------------


def unscale_grads(g1, g2, inv_scale):
    grads = [g1 * 1, g2 * 1]
    found_inf = torch.zeros(1)
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)
    torch._foreach_add_(grads, 1.0)
    return grads, found_inf


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", [False, True])
def test_amp_unscale_of_a_list_of_grads(backend, bad):
    def make():
        g2 = torch.tensor([3.0, float("inf") if bad else 4.0, -1.0])
        return torch.randn(2, 3), g2, torch.tensor(0.25)

    expected, got = run_both(unscale_grads, make, backend)
    (e_grads, e_found), (g_grads, g_found) = expected, got
    assert torch.equal(g_found, e_found) and float(g_found) == float(bad)
    for g, e in zip(g_grads, e_grads, strict=True):
        torch.testing.assert_close(g, e)
    assert not ember.counters["graph_fallbacks"]  # compiled, not run eagerly by the backend
    assert graphs_and_breaks(unscale_grads, make, backend) == (1, 0)
