"""`Tensor.item()` / `.tolist()` under ember.config.capture_scalar_outputs=True, end to end
through ember.compile: one graph from the tracer, eager's results under every backend, the
value read at each call (never baked in). aot_eager runs the `_local_scalar_dense` read in
its aten graph; inductor compiles it: the wrapper reads the value on the host and passes it
to the kernels as a size or an int/float scalar argument, and a torch._check on it is a host
check (no graph fallback). A read inductor does not bind (of a computed value) is a declared
limitation: that graph runs eagerly (ember.counters["graph_fallbacks"]), never wrong."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import ember

BACKENDS = ["eager", "aot_eager", "inductor"]


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    ember.config.capture_scalar_outputs = True
    yield
    ember.config.capture_scalar_outputs = False
    ember.reset()


def _frames(compiled) -> int:
    return len(compiled._ember_compiler.records)


def _compiled_by(backend: str) -> None:
    """Under inductor, no graph ran eagerly: the reads were compiled."""
    if backend == "inductor":
        assert not ember.counters["graph_fallbacks"], dict(ember.counters["graph_fallbacks"])
        assert ember.counters["inductor"]["forward_graphs"] >= 1


def affine(x, w, b):
    scale, shift = w.item(), b.item()
    return x * scale + shift, scale - shift


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_item_in_arithmetic_with_tensors(backend, dtype):
    compiled = ember.compile(affine, backend=backend, fullgraph=True)
    x = torch.randn(6)
    for w, b in ((3, -1), (-2, 5), (7, 0)):
        w_t, b_t = torch.tensor(w, dtype=dtype), torch.tensor(b, dtype=dtype)
        got, want = compiled(x, w_t, b_t), affine(x, w_t, b_t)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1] and type(got[1]) is type(want[1])
    assert _frames(compiled) == 1
    _compiled_by(backend)


def sized(x, n):
    k = n.item()
    torch._check(k >= 0)
    return torch.arange(k) * x.sum(), torch.ones(k + 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_item_as_a_size(backend):
    compiled = ember.compile(sized, backend=backend, fullgraph=True)
    x = torch.randn(3)
    for n in (4, 9, 0):
        got, want = compiled(x, torch.tensor(n)), sized(x, torch.tensor(n))
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w)
    assert _frames(compiled) == 1
    _compiled_by(backend)


def as_lists(v, m):
    return v.tolist(), m.tolist()


@pytest.mark.parametrize("backend", BACKENDS)
def test_tolist_1d_and_2d(backend):
    compiled = ember.compile(as_lists, backend=backend, fullgraph=True)
    for scale in (1, -3):
        v, m = torch.tensor([0.5, -1.25, 2.0]) * scale, torch.tensor([[1, 2], [3, 4]]) * scale
        assert compiled(v, m) == as_lists(v, m)
    assert _frames(compiled) == 1
    _compiled_by(backend)


def of_a_sum(x):
    return x * x.sum().item()


def test_inductor_falls_back_for_a_read_of_a_computed_value():
    """A read of a value the graph computes (not an input's element) is not bound on the
    host: declared, the graph runs eagerly, eager's result."""
    compiled = ember.compile(of_a_sum, backend="inductor", fullgraph=True)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), of_a_sum(x))
    assert ember.counters["graph_fallbacks"]["aten._local_scalar_dense.default"] == 1


def test_off_by_default_is_a_graph_break():
    ember.config.capture_scalar_outputs = False
    compiled = ember.compile(affine, backend="inductor")
    x, w, b = torch.randn(4), torch.tensor(2.0), torch.tensor(1.0)
    torch.testing.assert_close(compiled(x, w, b)[0], affine(x, w, b)[0])
    assert any(r.breaks for r in compiled._ember_compiler.records)
    with pytest.raises(Exception, match="item"):
        ember.compile(affine, backend="eager", fullgraph=True)(x, w, b)


def checked(x, n):
    k = n.item()
    torch._check(k >= 2)
    return x * k


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_failing_check_raises_as_eager_does(backend):
    compiled = ember.compile(checked, backend=backend, fullgraph=True)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x, torch.tensor(4)), checked(x, torch.tensor(4)))
    with pytest.raises(RuntimeError):
        compiled(x, torch.tensor(-1))
    torch.testing.assert_close(compiled(x, torch.tensor(3)), checked(x, torch.tensor(3)))
    _compiled_by(backend)


def resized(image, n):
    k = n.item()
    torch._check(k > 0)
    out = torch.nn.functional.interpolate(image, size=(k * 3, k * 2), mode="bilinear")
    return out, out.shape[2]


@pytest.mark.parametrize("backend", BACKENDS)
def test_item_as_an_output_size_of_a_composite(backend):
    """interpolate's C++ composite reads its output size: an item() there runs through the
    Python dispatcher in the tracer and in aot (sizes stay symbolic, one graph)."""
    compiled = ember.compile(resized, backend=backend, fullgraph=True)
    image = torch.randn(1, 2, 5, 5)
    for n in (3, 7):
        got, want = compiled(image, torch.tensor(n)), resized(image, torch.tensor(n))
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]
    assert _frames(compiled) == 1
    if backend == "aot_eager":  # compiled by aot, not a fallback
        assert not ember.counters["graph_fallbacks"]


def even_count(x):
    idx = torch.nonzero(x > 0)
    torch._check(idx.shape[0] % 2 == 0)
    return idx.sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_check_on_nonzeros_length_is_asserted(backend):
    """A check on a data-dependent size (nonzero's): aot reads the length from nonzero's
    result for the assertion (it crashed: 'u1 is not a size of any graph input')."""
    ember.config.capture_dynamic_output_shape_ops = True
    try:
        compiled = ember.compile(even_count, backend=backend, dynamic=True)
        good = torch.tensor([1.0, -1.0, 2.0, -3.0])
        torch.testing.assert_close(compiled(good), even_count(good))
        with pytest.raises(RuntimeError):
            compiled(torch.tensor([1.0, 2.0, 3.0, -1.0]))
    finally:
        ember.config.capture_dynamic_output_shape_ops = False


@pytest.mark.parametrize("backend", BACKENDS)
def test_float_and_int_of_tensors(backend):
    def fn(x, n):
        return x * float(n) - int(n.to(torch.int64) + 1)

    compiled = ember.compile(fn, backend=backend, fullgraph=True)
    x = torch.randn(5)
    for n in (torch.tensor(2.5), torch.tensor(-4.0)):
        torch.testing.assert_close(compiled(x, n), fn(x, n))
    assert _frames(compiled) == 1


def from_a_list(x, v):
    a, b, c = v.tolist()
    return x * a + b - c, a * b


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float64])
def test_tolist_elements_in_arithmetic(backend, dtype):
    compiled = ember.compile(from_a_list, backend=backend, fullgraph=True)
    x = torch.randn(5, dtype=torch.float64 if dtype == torch.float64 else torch.float32)
    for values in ([3, -2, 5], [1, 7, -4]):
        v = torch.tensor(values, dtype=dtype) * (1.5 if dtype.is_floating_point else 1)
        got, want = compiled(x, v), from_a_list(x, v)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1] and type(got[1]) is type(want[1])
    assert _frames(compiled) == 1
    _compiled_by(backend)


def prefix(x, n):
    k = n.item()
    torch._check(k >= 0)
    torch._check(k <= x.shape[0])
    return x[:k] * 2, torch.zeros(k, 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_item_as_a_slice_bound_and_a_size(backend):
    compiled = ember.compile(prefix, backend=backend, fullgraph=True)
    x = torch.randn(6)
    for n in (4, 0, 6):
        got, want = compiled(x, torch.tensor(n)), prefix(x, torch.tensor(n))
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w)
    with pytest.raises(RuntimeError):
        compiled(x, torch.tensor(7))
    assert _frames(compiled) == 1
    _compiled_by(backend)


def mixed(x, n, w):
    return x * (n.item() * w.item()) + n.item()


def test_an_int_and_a_float_read_in_one_kernel():
    compiled = ember.compile(mixed, backend="inductor", fullgraph=True)
    x = torch.randn(7)
    for n, w in ((3, 0.5), (-2, 1.25)):
        args = (x, torch.tensor(n), torch.tensor(w))
        torch.testing.assert_close(compiled(*args), mixed(*args))
    _compiled_by("inductor")


def scaled_loss(x, w, n):
    return (x * w.item() + n.item()).sum()


def test_a_training_step_takes_the_read_value_into_backward():
    """The backward graph takes the float read as a saved scalar input: compiled too."""
    compiled = ember.compile(scaled_loss, fullgraph=True)
    for w, n in ((1.5, 2), (-0.5, 3)):
        mine = torch.randn(4, requires_grad=True)
        theirs = mine.detach().clone().requires_grad_()
        got = compiled(mine, torch.tensor(w), torch.tensor(n))
        want = scaled_loss(theirs, torch.tensor(w), torch.tensor(n))
        got.backward()
        want.backward()
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(mine.grad, theirs.grad)
    _compiled_by("inductor")
    assert ember.counters["inductor"]["backward_graphs"] == 1


TRITON_CHILD = textwrap.dedent(
    """
    import json, torch, ember
    ember.config.capture_scalar_outputs = True

    def affine(x, w, b):
        scale, shift = w.item(), b.item()
        return x * scale + shift, scale - shift

    def prefix(x, n):
        k = n.item()
        torch._check(k >= 0)
        torch._check(k <= x.shape[0])
        return x[:k] * 2, torch.zeros(k)

    def listed(x, v):
        a, b = v.tolist()
        return x * a - b

    raised = False
    x = torch.randn(6)
    for fn, calls in (
        (affine, [(x, torch.tensor(1.5), torch.tensor(-0.5)), (x, torch.tensor(-3.0), torch.tensor(2.0))]),
        (prefix, [(x, torch.tensor(4)), (x, torch.tensor(0))]),
        (listed, [(x, torch.tensor([2, 5])), (x, torch.tensor([-1, 0]))]),
    ):
        compiled = ember.compile(fn, fullgraph=True)
        for args in calls:
            got, want = compiled(*args), fn(*args)
            for g, w in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want)):
                torch.testing.assert_close(g, w)
        if fn is prefix:
            try:
                compiled(x, torch.tensor(9))
            except RuntimeError:
                raised = True
    print(json.dumps({"fallbacks": dict(ember.counters["graph_fallbacks"]),
                      "graphs": ember.counters["inductor"]["forward_graphs"], "raised": raised}))
    """
)


def test_triton_target_through_the_interpreter(tmp_path):
    pytest.importorskip("triton", reason="the Triton target needs the 'triton' extra")
    env = {
        **os.environ,
        "TRITON_INTERPRET": "1",
        "EMBER_INDUCTOR_TARGET": "triton",
        "EMBER_CACHE_DIR": str(tmp_path / "cache"),
    }
    out = subprocess.run(
        [sys.executable, "-c", TRITON_CHILD], env=env, capture_output=True, text=True, timeout=900
    )
    assert out.returncode == 0, out.stderr[-4000:]
    stats = json.loads(out.stdout.strip().splitlines()[-1])
    assert stats == {"fallbacks": {}, "graphs": 3, "raised": True}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.int64, torch.float32])
def test_bool_of_an_item_is_an_output_and_a_mask(backend, dtype):
    # bool(n) of a read value is `n != 0` in the graph: a Python bool output, and a factor
    def fn(x, n):
        flag = bool(n.item())
        return flag, x * flag

    compiled = ember.compile(fn, backend=backend, fullgraph=True)
    x = torch.randn(5)
    for v in (3, 0, -2):
        n = torch.tensor([v], dtype=dtype)
        got, want = compiled(x, n), fn(x, n)
        assert got[0] is want[0]
        torch.testing.assert_close(got[1], want[1])
    assert _frames(compiled) == 1
    _compiled_by(backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_size_of_nonzero_in_new_tensor_and_arithmetic(backend):
    # nonzero's length as data: eager's results under every backend; inductor binds no size
    # read from a result, so that graph runs eagerly (declared), never a failed compile
    def fn(a):
        n = a.nonzero().squeeze(-1).numel()
        return a.new_tensor([n, n * a.shape[0], 0]), a * n

    ember.config.capture_dynamic_output_shape_ops = True
    try:
        compiled = ember.compile(fn, backend=backend, fullgraph=True)
        for a in (torch.tensor([1, 0, 0, 5]), torch.tensor([0, 0, 3, 1])):
            got, want = compiled(a), fn(a)
            for g, w in zip(got, want, strict=True):
                assert g.dtype == w.dtype and torch.equal(g, w)
    finally:
        ember.config.capture_dynamic_output_shape_ops = False
    assert _frames(compiled) == 1
    if backend == "inductor":
        assert ember.counters["graph_fallbacks"]["aten::nonzero"] >= 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_a_power_of_a_read_value(backend, dtype):
    # k * k * k is sympy's k**3 (k**3.0 for a float read): a product in aot's graph and in
    # the kernels (no `**` in C++), never a failed compile
    def fn(x, w):
        k = w.item()
        return x * (k * k * k) + k * k, k * k * k

    compiled = ember.compile(fn, backend=backend, fullgraph=True)
    for v in (3, -2):
        x, w = torch.randn(5), torch.tensor(v * 0.75 if dtype.is_floating_point else v, dtype=dtype)
        got, want = compiled(x, w), fn(x, w)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1] and type(got[1]) is type(want[1])
    assert _frames(compiled) == 1
    _compiled_by(backend)
