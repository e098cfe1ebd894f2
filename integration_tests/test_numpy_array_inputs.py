"""NumPy arrays crossing the compiled boundary (variables/numpy_arrays.py): `Tensor.numpy()`
as a graph of its own, arrays whose sizes change between calls, array data read into Python
lists. Each program is compared with eager and its graph count asserted, under a recording
backend and under inductor, so that a silent fallback to eager fails."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import ember

BACKENDS = ["eager", "inductor"]
pytestmark = pytest.mark.usefixtures("fresh_ember")


def same_arrays(got, expected) -> None:
    assert type(got) is type(expected), (type(got), type(expected))
    if isinstance(expected, tuple | list):
        assert len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            same_arrays(g, e)
    elif isinstance(expected, np.ndarray):
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert np.allclose(got, expected, equal_nan=True), (got, expected)
    else:
        assert got == expected, (got, expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_numpy_is_a_view_compiled_in_a_graph(backend, counted_compile):
    # x.numpy() alone is a graph (a view of x, as eager's array shares x's memory): the
    # frame is compiled, not left to eager; writes through the array reach x
    def view_only(x):
        return x.numpy(force=False)

    def written_through(x):
        a = x.numpy()
        a *= 3
        return a + 1, x.numpy().strides

    counted = counted_compile(view_only, backend)
    x = torch.randn(3, 4)
    got = counted(x)
    same_arrays(got, view_only(x))
    assert np.shares_memory(got, x.numpy())
    assert len(counted.graphs) == 1

    counted = counted_compile(written_through, backend)
    x, x_eager = torch.arange(6.0).reshape(2, 3), torch.arange(6.0).reshape(2, 3)
    same_arrays(counted(x), written_through(x_eager))
    assert torch.equal(x, x_eager)
    assert len(counted.graphs) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_numpy_of_a_tensor_requiring_grad(backend, counted_compile):
    def forced(x):
        return x.numpy(force=True) * 2

    def unforced(x):
        return x.numpy() * 2  # eager raises: Ember breaks and lets eager raise it

    x = torch.randn(4, requires_grad=True)
    counted = counted_compile(forced, backend)
    same_arrays(counted(x), forced(x))
    assert len(counted.graphs) == 1
    with pytest.raises(RuntimeError, match="requires grad"):
        counted_compile(unforced, backend)(x)


@pytest.fixture
def capture_scalars():
    ember.config.capture_scalar_outputs = True
    yield
    ember.config.capture_scalar_outputs = False


def nested_types(value) -> object:
    return [nested_types(v) for v in value] if isinstance(value, list) else type(value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_array_tolist_and_item_read_in_the_graph(backend, capture_scalars, counted_compile):
    # Python ints, floats and bools, as NumPy's own tolist()/item() give them
    def fn(a):
        return a.tolist(), (a > 2).tolist(), a.max().item(), (a * 0.5).sum().item()

    for a in (np.arange(5), np.arange(6, dtype=np.float32).reshape(2, 3)):
        counted = counted_compile(fn, backend, fullgraph=True)
        got, expected = counted(a), fn(a)
        assert got == expected
        assert nested_types(list(got)) == nested_types(list(expected))
        assert len(counted.graphs) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_array_tolist_without_captured_scalars_breaks(backend, counted_compile):
    def fn(a):
        return (a + 1).tolist()

    a = np.arange(4)
    counted = counted_compile(fn, backend)
    assert counted(a) == fn(a)  # the read runs eagerly
    ember.reset()
    with pytest.raises(ember.exc.Unsupported, match=r"tolist\(\) reads array data"):
        counted_compile(fn, backend, fullgraph=True)(a)


@pytest.mark.parametrize("backend", BACKENDS)
def test_arrays_of_changing_sizes_share_one_symbolic_graph(backend, counted_compile):
    # the second size makes the array's sizes symbolic, as a tensor's: no compile after it
    def fn(a, t):
        return np.nan_to_num(a) * 2 + len(a) + a.size, a.shape, t * a.shape[1]

    counted = counted_compile(fn, backend)
    for n in (3, 4, 5, 7):
        a = np.linspace(-1.0, 1.0, n * 3).reshape(n, 3)
        a[0, 0] = np.nan
        t = torch.arange(float(n))
        got, expected = counted(a, t), fn(a, t)
        same_arrays(got[:2], expected[:2])
        assert torch.equal(got[2], expected[2])
    assert len(counted.graphs) == 2
    assert any(isinstance(s, torch.SymInt) for s in _input_sizes(counted.graphs[1]))


def _input_sizes(gm) -> list:
    return [
        s
        for n in gm.graph.nodes
        if n.op == "placeholder" and isinstance(n.meta.get("example_value"), torch.Tensor)
        for s in n.meta["example_value"].shape
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_rule_needing_sizes_specializes_a_symbolic_array(backend, counted_compile):
    # a[::-1] and take_along_axis along the flattened array read the sizes: each new size
    # compiles (its size guarded), never a break, never a stale graph
    def fn(a, i):
        return a[::-1] * 2, np.take_along_axis(a, i, None)

    counted = counted_compile(fn, backend)
    for n in (3, 4, 5):
        a, i = np.arange(n * 2.0).reshape(n, 2), np.arange(n)[::-1].copy()
        same_arrays(counted(a, i), fn(a, i))
    assert len(counted.graphs) == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_array_torch_refuses_fails_the_symbolic_graphs_guard(backend, counted_compile):
    # negative strides: torch.from_numpy raises in the guard, which fails; the new call runs
    # eagerly (Ember refuses such an array), its values right
    def fn(a):
        return np.sin(a) + 1

    counted = counted_compile(fn, backend)
    for n in (3, 4):
        a = np.arange(float(n))
        same_arrays(counted(a), fn(a))
    assert len(counted.graphs) == 2
    flipped = np.arange(6.0)[::-1]
    same_arrays(counted(flipped), fn(flipped))
    assert len(counted.graphs) == 2


def read_only(a: np.ndarray) -> np.ndarray:
    view = a.view()
    view.flags.writeable = False
    return view


@pytest.mark.parametrize("backend", BACKENDS)
def test_read_only_arrays_are_read_in_the_graph(backend, counted_compile):
    # np.broadcast_to and read-only views: no torch.from_numpy warning (an error here), one
    # graph; a writeable array of the same shape is another graph
    def fn(a):
        return a * 2 + a.sum(), np.sin(a[-1]), a.shape

    counted = counted_compile(fn, backend, fullgraph=True)
    broadcast = np.broadcast_to(np.arange(3.0), (2, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", DeprecationWarning)
        same_arrays(counted(broadcast), fn(broadcast))
        same_arrays(counted(read_only(np.ones((2, 3)))), fn(np.ones((2, 3))))
    assert len(counted.graphs) == 1
    same_arrays(counted(np.ones((2, 3))), fn(np.ones((2, 3))))
    assert len(counted.graphs) == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_write_into_a_read_only_array_raises_as_in_eager(backend, counted_compile):
    def fn(a):
        b = a * 2
        a += 1
        return b

    a = read_only(np.arange(3.0))
    with pytest.raises(ValueError, match="read-only"):
        fn(a)
    with pytest.raises(ValueError, match="read-only"):
        counted_compile(fn, backend)(a)
    assert np.array_equal(a, np.arange(3.0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_read_only_array_sees_writes_into_the_memory_it_shares(backend, counted_compile):
    # the graph reads a copy of the read-only array: a write into an input in the same trace
    # (before or after the read-only array is read) ends the graph, so no read is stale
    def write_first(base, view):
        base += 1
        return view * 2

    def read_first(base, view):
        doubled = view * 2
        base += 1
        return doubled, view + 0

    for fn in (write_first, read_first):
        ember.reset()
        counted = counted_compile(fn, backend)
        base, eager_base = np.arange(3.0), np.arange(3.0)
        same_arrays(counted(base, read_only(base)), fn(eager_base, read_only(eager_base)))
        assert np.array_equal(base, eager_base)


@pytest.mark.parametrize("backend", BACKENDS)
def test_array_factories_of_a_dynamic_size_share_one_graph(backend, counted_compile):
    # np.ones/np.zeros/np.full given an int that changes between calls: its size stays
    # symbolic in the graph (one graph after the first recompile), never a compile per value
    def fn(n, t):
        rows = np.stack([np.ones([2, n]), np.full((2, n), 0.5)], axis=0)
        as_tensor = torch.tensor(rows, dtype=torch.long)
        as_tensor.unsqueeze_(0)
        return as_tensor + t, np.zeros(n, dtype=np.int32), np.full(n, 7)

    counted = counted_compile(fn, backend)
    for n in range(2, 6):
        t = torch.randn(1, 2, 2, n)
        got, expected = counted(n, t), fn(n, t)
        assert torch.equal(got[0], expected[0])
        same_arrays(got[1:], expected[1:])
    assert len(counted.graphs) == 2
