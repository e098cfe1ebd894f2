"""Dynamic shapes end to end through `ember.compile` (issue 13): the TorchDynamo talk's
`fn(x, n)`, varying batch sizes, dynamic=True/False, marks, constraint errors, symbolic
size arithmetic, branches on sizes, EMBER_LOGS=dynamic, data-dependent output sizes.
Outputs are compared with eager; compile counts prove the work went into graphs."""

from __future__ import annotations

import logging
import math

import pytest
import torch

import ember
import ember_symbolic as es


@ember.backends.symbolic_sizes  # it runs the graph as is: right for every size
class Recording:
    """A backend that keeps each graph and runs it as is (the eager backend, observed)."""

    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()
    ember.config.capture_dynamic_output_shape_ops = False


def placeholder_values(gm):
    return [n.meta["example_value"] for n in gm.graph.nodes if n.op == "placeholder"]


def fn(x, n):
    y = x**2
    if n >= 0:
        return (n + 1) * y
    else:
        return y / n


def test_talk_fn_x_n():
    backend = Recording()
    compiled = ember.compile(fn, backend=backend)
    x = torch.randn(200)
    counts = []
    for n in (2, 3, 6, -3):
        torch.testing.assert_close(compiled(x, n), fn(x, n))
        counts.append(len(backend.graphs))
    # n=2 traces static; n=3 retraces once with n a SymInt; n=6 reuses it; n=-3 retraces
    assert counts == [1, 2, 2, 3]
    static, dynamic, negative = backend.graphs
    assert placeholder_values(static)[1:] == []  # n was a constant
    assert isinstance(placeholder_values(dynamic)[1], torch.SymInt)
    assert isinstance(placeholder_values(negative)[1], torch.SymInt)
    records = compiled._ember_compiler.records
    assert "L['n'] >= 0" in records[1].guards.source_code
    assert "L['n'] < 0" in records[2].guards.source_code
    assert records[2].recompile_reason.startswith("shape guard failed: L['n'] >= 0")
    targets = [getattr(n.target, "__name__", n.target) for n in dynamic.graph.nodes]
    assert "add" in targets and "mul" in targets
    assert "truediv" in [getattr(n.target, "__name__", n.target) for n in negative.graph.nodes]


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_talk_fn_x_n_under_each_backend(backend):
    """The same calls through real backends (the default one compiles the symbolic `n` into
    a C++ kernel argument read by a wrapper that serves every n): its wrapper unpacked a
    single tensor input as a sequence and raised on the second call."""
    compiled = ember.compile(fn, backend=backend)
    x = torch.randn(200)
    for n in (2, 3, 6, -3, -5):
        torch.testing.assert_close(compiled(x, n), fn(x, n))
    records = compiled._ember_compiler.records
    assert len(records) == 3  # static n=2, then n >= 0 and n < 0 with n symbolic
    if backend != "eager":
        stats = ember.counters[backend]
        assert stats["forward_graphs"] == 3 and stats["forward_runs"] == 5


def mlp(x, w):
    return torch.relu(x @ w).sum(1) * x.shape[0]


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_twenty_batch_sizes_compile_at_most_twice(backend):
    compiled = ember.compile(mlp, backend=backend)
    w = torch.randn(16, 8)
    for b in range(2, 22):
        x = torch.randn(b, 16)
        torch.testing.assert_close(compiled(x, w), mlp(x, w), rtol=1e-4, atol=1e-4)
    assert len(compiled._ember_compiler.records) <= 2


def test_dynamic_true_is_symbolic_from_the_first_call():
    backend = Recording()
    compiled = ember.compile(mlp, backend=backend, dynamic=True)
    w = torch.randn(16, 8)
    for b in (3, 7, 12):
        x = torch.randn(b, 16)
        torch.testing.assert_close(compiled(x, w), mlp(x, w))
    assert len(backend.graphs) == 1
    assert isinstance(placeholder_values(backend.graphs[0])[0].shape[0], torch.SymInt)


def test_dynamic_false_retraces_per_size():
    backend = Recording()
    compiled = ember.compile(mlp, backend=backend, dynamic=False)
    w = torch.randn(16, 8)
    for b in (3, 7, 12):
        x = torch.randn(b, 16)
        torch.testing.assert_close(compiled(x, w), mlp(x, w))
    assert len(backend.graphs) == 3


def test_mark_dynamic_with_min_max():
    backend = Recording()
    compiled = ember.compile(mlp, backend=backend)
    w = torch.randn(16, 8)
    for b in (4, 6, 9):
        x = torch.randn(b, 16)
        ember.mark_dynamic(x, 0, min=3, max=9)
        torch.testing.assert_close(compiled(x, w), mlp(x, w))
    assert len(backend.graphs) == 1
    x = torch.randn(11, 16)  # out of range: a new trace (static for this size)
    ember.mark_dynamic(x, 0, min=3, max=9)
    torch.testing.assert_close(compiled(x, w), mlp(x, w))
    assert len(backend.graphs) == 2
    assert "<= 9" in compiled._ember_compiler.records[-1].recompile_reason


def test_mark_errors_are_typed():
    with pytest.raises(TypeError, match="tensor"):
        ember.mark_dynamic(3, 0)
    with pytest.raises(ValueError, match="out of range"):
        ember.mark_dynamic(torch.ones(2, 2), 5)
    with pytest.raises(ValueError, match="min"):
        ember.mark_dynamic(torch.ones(4, 2), 0, min=5, max=3)


def test_constraint_violation_names_the_line():
    def needs_four(x):
        return x.view(4, -1)  # forces dim 0 to 4

    compiled = ember.compile(needs_four, backend="eager")
    x = torch.randn(4, 6)
    ember.mark_dynamic(x, 0)
    with pytest.raises(es.ConstraintViolationError) as info:
        compiled(x)
    line = needs_four.__code__.co_firstlineno + 1
    assert f"test_dynamic_shapes.py:{line}" in str(info.value)
    assert "marked dynamic" in str(info.value)


def sizes_fn(x):
    b, d = x.shape
    y = x.view(b, d // 2, 2).sum(-1)
    steps = torch.arange(b, dtype=x.dtype).unsqueeze(1)
    flat = x.reshape(b * d)[: x.numel() // 2]
    pad = y.new_zeros(x.size(0), 1).expand(b, d // 2)
    return y + steps + pad, flat.sum(), torch.full((b, 2), 0.5), b * d - 1


def test_size_arithmetic_view_reshape_arange():
    backend = Recording()
    compiled = ember.compile(sizes_fn, backend=backend, dynamic=True)
    for b in (3, 5, 8):
        x = torch.randn(b, 6)
        got, want = compiled(x), sizes_fn(x)
        for g, w in zip(got[:3], want[:3], strict=True):
            torch.testing.assert_close(g, w)
        assert got[3] == want[3] and type(got[3]) is int
    assert len(backend.graphs) == 1
    gm = backend.graphs[0]
    size_nodes = [n for n in gm.graph.nodes if n.op == "call_method" and n.target == "size"]
    assert size_nodes and all(isinstance(n.meta["example_value"], torch.SymInt) for n in size_nodes)


def test_branch_on_a_size_adds_a_guard():
    def branchy(x):
        if x.size(0) > 8:
            return x.sum(0)
        return x.mean(0)

    backend = Recording()
    compiled = ember.compile(branchy, backend=backend, dynamic=True)
    for b in (3, 5, 10, 12):
        x = torch.randn(b, 4)
        torch.testing.assert_close(compiled(x), branchy(x))
    assert len(backend.graphs) == 2  # one per side, no graph break
    records = compiled._ember_compiler.records
    assert not any(r.breaks for r in records)
    assert "L['x'].size()[0] <= 8" in records[0].guards.source_code
    assert "L['x'].size()[0] <= 8" in records[1].recompile_reason


def test_ember_logs_dynamic(monkeypatch, caplog):
    monkeypatch.setenv("EMBER_LOGS", "dynamic")
    compiled = ember.compile(fn, backend="eager")
    x = torch.randn(8)
    with caplog.at_level(logging.INFO, logger="ember.dynamic"):
        compiled(x, 2)
        compiled(x, 3)
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "ember.dynamic")
    assert "create_symbol s0 = 3 for L['n']" in text
    assert "guard: L['n'] >= 0" in text and "test_dynamic_shapes.py" in text


def nonzero_fn(x):
    idx = torch.nonzero(x > 0)
    return idx.float().sum(0) + idx.shape[0], x[x > 0].sum()


@pytest.mark.parametrize("capture", [False, True])
def test_capture_dynamic_output_shape_ops(capture):
    ember.config.capture_dynamic_output_shape_ops = capture
    backend = Recording()
    compiled = ember.compile(nonzero_fn, backend=backend, dynamic=True)
    for _ in range(3):
        x = torch.randn(12)
        got, want = compiled(x), nonzero_fn(x)
        torch.testing.assert_close(got[0], want[0])
        torch.testing.assert_close(got[1], want[1])
    records = compiled._ember_compiler.records
    if capture:
        assert len(backend.graphs) == 1 and not records[0].breaks
        targets = [getattr(n.target, "__name__", n.target) for n in backend.graphs[0].graph.nodes]
        assert "nonzero" in targets
    else:
        assert any(r.breaks for r in records)


# ---- size expressions that stay symbolic (bytecode_tracer/variables/sym_builtins.py) -------
# Each compiles twice over six sizes under automatic dynamic shapes (a static trace, then a
# symbolic one), as torch.compile does; each was one graph per size before.


def window(x):  # max() of a size: a SymInt (torch.sym_max in the graph)
    return x.new_ones(max(x.shape[0], 3), 2) * x.sum()


def clipped(x):  # min() over sizes
    return x[: min(x.shape[0], x.shape[1] + 1)] * 2


def as_int(x):  # int(n) of a size is n: no guard
    return x.view(int(x.shape[0]), -1) * float(x.shape[0])


def halves(x):  # math.floor of size arithmetic, floordiv and mod
    return x.new_zeros(math.floor(x.shape[0] / 2) + x.shape[0] % 3) + 1


def split_three(x):  # divmod of a size
    q, r = divmod(x.shape[0], 3)
    return x.new_zeros(q + r + 1) + x.mean()


def ceil_half(x):  # math.ceil of size arithmetic
    return x.new_zeros(math.ceil(x.shape[0] / 2)) + 1


def even_prefix(x):  # a multiple of a floor division
    return x[: x.shape[0] // 2 * 2].view(-1, 2).sum(1)


SIZE_SNIPPETS = [window, clipped, as_int, halves, split_three, ceil_half, even_prefix]
# 2*floor(s0/2) and ceil(s0/2) once printed as `2*(s0) // 2` (= s0) and `-(-s0) // 2` by
# codegen's Python size printer: ceil_half and even_prefix through inductor guard that fix.


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("fn", SIZE_SNIPPETS, ids=lambda f: f.__name__)
def test_size_builtins_compile_once_across_sizes(backend, fn):
    compiled = ember.compile(fn, backend=backend)
    for n in (4, 5, 6, 7, 9, 12):
        x = torch.randn(n, 8)
        torch.testing.assert_close(compiled(x), fn(x))
    records = compiled._ember_compiler.records
    assert len(records) == 2 and not any(r.breaks for r in records)
    assert "size()[0] == 5" not in records[1].guards.source_code  # the size stayed symbolic


def unrolled(x):
    out = x
    for i in range(x.shape[0]):  # a loop over a size unrolls: it must specialize
        out = out * 0.5 + i
    return out


def test_range_over_a_size_specializes_and_logs_its_line(monkeypatch, caplog):
    monkeypatch.setenv("EMBER_LOGS", "dynamic")
    compiled = ember.compile(unrolled, backend="eager")
    with caplog.at_level(logging.INFO, logger="ember.dynamic"):
        for n in (3, 4, 5):
            x = torch.randn(n)
            torch.testing.assert_close(compiled(x), unrolled(x))
    assert len(compiled._ember_compiler.records) == 3  # one per length, as torch.compile
    line = unrolled.__code__.co_firstlineno + 2
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "ember.dynamic")
    assert f"guard: L['x'].size()[0] == 4  # Eq(s0, 4) (added at {__file__}:{line})" in text


PADS = [
    ("constant", (1, 2)),
    ("constant", (-1, 2, 1, -1)),  # negative pads crop
    ("reflect", (2, 1)),
    ("replicate", (1, 3)),
]


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize(("mode", "pad"), PADS, ids=str)
def test_pad_of_a_symbolic_length_compiles_once(backend, mode, pad):
    # issue 13: the tracer specialized constant_pad_nd's sizes on CPU fakes (one graph per
    # length) and inductor's pad lowering raised on symbolic sizes
    def fn(x):
        return torch.nn.functional.pad(x, pad, mode=mode) * 2

    compiled = ember.compile(fn, backend=backend, dynamic=True)
    for n in (5, 6, 7, 9, 12):
        x = torch.randn(2, 3, n)
        torch.testing.assert_close(compiled(x), fn(x))
    records = compiled._ember_compiler.records
    assert len(records) == 1 and not records[0].breaks
    assert "== 5" not in records[0].guards.source_code  # the length stayed symbolic


def test_branch_splitting_a_marked_range_raises_under_inductor():
    def halves(x):
        if x.shape[0] > 4:
            return x[: x.shape[0] // 2] * 2
        return x + 1

    x = torch.randn(6, 3)
    ember.mark_dynamic(x, 0, min=2, max=8)
    with pytest.raises(es.ConstraintViolationError, match="of that range"):
        ember.compile(halves, backend="inductor")(x)
    ember.reset()
    compiled = ember.compile(halves, backend="inductor")
    for b in (6, 8):  # a range the branch does not split: one graph
        x = torch.randn(b, 3)
        ember.mark_dynamic(x, 0, min=5, max=8)
        torch.testing.assert_close(compiled(x), halves(x))
    assert ember.counters["inductor"]["forward_graphs"] == 1, dict(ember.counters["inductor"])
