"""Values that are not tensors flowing into graphs (issue 26, PyTorch's test_unspec): each
snippet is compiled with a recording backend (graph counts) and with inductor, and compared
with eager.

- `torch.tensor(b)` of a symbolic bool (a comparison of sizes under dynamic shapes) is a
  0-d bool tensor in the graph, as eager's `torch.tensor(True)`.
- an int a traced function reads from its closure cell becomes a SymInt input once it
  changed between calls (automatic dynamic, as for locals and globals): one recompile, not
  one per value.
- `torch.tensor([a, b])` of one-element tensors of the trace (and numbers): the values stay
  in the graph (each item reshaped to 0-d, converted to the promoted dtype, stacked,
  detached), dtype and values as eager's; ndarrays of the trace are sequences there (a list
  of arrays of one shape is their stack).
- NumPy's global random draws with `size=` run right before the graph, as eager's (same
  values from the same seed, the generator left where eager leaves it): arrays as inputs.
- `ember.config.static_parameter_shapes`: nn.Parameter inputs keep static sizes under
  automatic dynamic shapes (one compile per size); off, they become symbolic as others do.
- an argument that was a tensor and is now an int is a value that changes between calls: the
  int is a SymInt from its first compile, so ints that follow reuse that graph.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember


class Recording:
    """Records each graph; runs it as is, or through Ember's inductor when `compiler`."""

    def __init__(self, compiler: str | None = None) -> None:
        self.graphs: list[torch.fx.GraphModule] = []
        self.compiler = compiler

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        if self.compiler is None:
            return gm.forward
        return ember.lookup_backend(self.compiler)(gm, example_inputs)


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()


def backends():
    recording = Recording()
    return recording, [ember.backends.symbolic_sizes(recording), "inductor"]


def rounded_is_empty(x):
    kept = torch.zeros((x.size(0) // 5) * 5)
    return torch.tensor(kept.numel() == 0), torch.tensor(x.size(0) > 6, dtype=torch.float32)


def test_tensor_of_a_symbolic_bool_is_a_graph_value():
    recording, choices = backends()
    for backend in choices:
        ember.reset()
        f = ember.compile(rounded_is_empty, backend=backend, dynamic=True, fullgraph=True)
        for n in (3, 5, 7, 11):
            got, want = f(torch.ones(n)), rounded_is_empty(torch.ones(n))
            for g, w in zip(got, want, strict=True):
                assert g.dtype == w.dtype and g.shape == w.shape and torch.equal(g, w)
    assert len(recording.graphs) == 1  # one symbolic graph for every size


def scaler():
    factor = 2

    def scale(t):
        return t * factor

    def set_factor(value):
        nonlocal factor
        factor = value

    return scale, set_factor


def shift_by_closure(x, fn):
    return fn(x) + 1


@pytest.mark.parametrize("compiler", [None, "inductor"])
def test_closure_int_becomes_dynamic_after_it_changed(compiler):
    recording = Recording(compiler)
    scale, set_factor = scaler()
    f = ember.compile(shift_by_closure, backend=ember.backends.symbolic_sizes(recording))
    for factor in range(2, 14):
        set_factor(factor)
        x = torch.randn(6)
        assert torch.equal(f(x, scale), x * factor + 1)
    assert len(recording.graphs) == 2  # the first value, then a SymInt for every other


def times(x, y):
    return x * y


@pytest.mark.parametrize("compiler", [None, "inductor"])
def test_int_where_a_tensor_was_is_dynamic(compiler):
    recording = Recording(compiler)
    f = ember.compile(times, backend=ember.backends.symbolic_sizes(recording))
    calls = [(2, "t"), (3, 3), (4, "t"), (5, 4), (6, "t"), (7, 9)]
    for n, other in calls:
        x = torch.randn(n)
        y = torch.randn(n) if other == "t" else other
        assert torch.allclose(f(x, y), x * y)
    # sizes 2, then 3 with an int (symbolic at once), then a symbolic tensor; no more
    assert len(recording.graphs) == 3


def project(x, w):
    return x @ w


@pytest.mark.parametrize("static", [False, True])
def test_static_parameter_shapes_keeps_parameters_static(monkeypatch, static):
    monkeypatch.setattr(ember.config, "static_parameter_shapes", static)
    recording = Recording("inductor")
    f = ember.compile(project, backend=ember.backends.symbolic_sizes(recording))
    w = torch.randn(3, 2)
    for rows in (1, 10, 11, 15, 15):
        x = torch.nn.Parameter(torch.randn(rows, 3))
        torch.testing.assert_close(f(x, w), project(x, w))
    # static: one compile per size (1, 10, 11, 15); else size 10 makes the rows symbolic
    assert len(recording.graphs) == (4 if static else 2)


def pair_of_scalars(x):
    a = x.sum()
    b = x[:1].reshape(1, 1, 1) * 2
    return torch.tensor([a, b]) + 1


def mixed_items(x, n):
    a = x.max()
    return torch.tensor([[a, 2], [n, x.min()]]), torch.tensor([a, x[0]], dtype=torch.float64)


def int_and_float(x):
    i = x.to(torch.int32)[0]
    return torch.tensor([i, i * 2]), torch.tensor([i, x[1]]), torch.tensor([True, x[0] > 0])


def stacked_arrays(x):
    a = x.numpy() * 2
    b = np.ones((2, 3))
    return torch.tensor([a, b, a], dtype=torch.float32, device="cpu"), torch.tensor([[a], [a]])


@pytest.mark.parametrize("compiler", [None, "inductor"])
@pytest.mark.parametrize(
    "fn, make",
    [
        (stacked_arrays, lambda: (torch.randn(2, 3, dtype=torch.float64),)),
        (pair_of_scalars, lambda: (torch.randn(4, requires_grad=True),)),
        (mixed_items, lambda: (torch.randn(5), 7)),
        (int_and_float, lambda: (torch.randn(3) * 5,)),
    ],
)
def test_tensor_of_tensor_items_stays_in_the_graph(compiler, fn, make):
    recording = Recording(compiler)
    f = ember.compile(fn, backend=ember.backends.symbolic_sizes(recording), fullgraph=True)
    for _ in range(3):  # new values each call: nothing was read into Python or guarded
        args = make()
        got, want = f(*args), fn(*args)
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape and not g.requires_grad
            torch.testing.assert_close(g, w)
    assert len(recording.graphs) == 1


def jitter(x):
    noise = np.random.normal(0.0, 0.5, size=(x.shape[0], 1))
    picks = np.random.randint(0, 3, size=(2,))
    return x + torch.from_numpy(noise), torch.tensor([noise, noise]).sum() + torch.from_numpy(picks)


@pytest.mark.parametrize("compiler", [None, "inductor"])
def test_numpy_random_draws_are_inputs_of_the_graph(compiler):
    recording = Recording(compiler)
    f = ember.compile(jitter, backend=ember.backends.symbolic_sizes(recording), fullgraph=True)
    x = torch.randn(4, 3, dtype=torch.float64)
    for seed in (0, 7, 9):
        np.random.seed(seed)
        want, after = jitter(x), np.random.random()
        np.random.seed(seed)
        got = f(x)
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(torch.as_tensor(g), torch.as_tensor(w))
        assert np.random.random() == after
    assert len(recording.graphs) == 1
