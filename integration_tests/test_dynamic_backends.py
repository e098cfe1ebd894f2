"""Symbolic shapes below the tracer (issue 13): aot_eager and inductor on graphs whose sizes
are symbols, against eager, with counts of what was compiled.

- the pipeline alone (aot -> lower -> schedule -> C++ codegen) compiles a symbolic graph
  once and runs it at several sizes, with as many C++ builds as one static compile;
- the backends called with a tracer-style symbolic graph compile one forward and one
  backward for every batch size;
- through ember.compile (the tracer's automatic dynamic shapes): 20 batch sizes, at most 2
  graphs, and a training step with a varying batch size matching eager's gradients.
"""

from __future__ import annotations

import copy
import json
import math
import os
import pathlib

import pytest
import torch
import torch.fx

import ember
import ember_symbolic as es
from ember.backends.aot_eager import aot_eager
from ember.backends.inductor import inductor
from ember.stats import counters

BACKENDS = {"aot_eager": aot_eager, "inductor": inductor}
#: the slower model-sized cases run through `inductor` in CI, `aot_eager` in `nox -s extended`
INDUCTOR_IN_CI = [pytest.param("aot_eager", marks=pytest.mark.extended), "inductor"]


def symbolic_graph(fn, args, dims):
    """`fn` traced by torch.fx with example values of symbolic sizes, as the tracer makes
    them: `dims[i]` is {dim: Dim} for a tensor argument, "int" for a SymInt one."""
    env = es.ShapeEnv()
    mode = es.fake_mode(env)
    gm = torch.fx.symbolic_trace(fn)
    fakes = []
    for i, (arg, dim) in enumerate(zip(args, dims, strict=True)):
        if isinstance(arg, torch.Tensor):
            fake = es.fake_tensor(mode, arg, f"a{i}", dims=dim or {}, default=es.DimDynamic.STATIC)
            fakes.append(fake.requires_grad_(arg.requires_grad))
        else:
            fakes.append(env.create_symint(arg, f"a{i}", dynamic=es.DimDynamic.DYNAMIC))

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node):
            value = super().run_node(node)
            if node.op != "output":
                node.meta["example_value"] = value
            return value

    with mode:
        Recorder(gm).run(*fakes)
    return gm


def block(x, n, w1, w2, lw, lb):
    """A residual MLP block with a layer norm, a view on the batch size and an int input."""
    h = torch.nn.functional.layer_norm(x, (x.size(-1),), lw, lb)
    h = torch.relu(h @ w1.t()) @ w2.t()
    y = (h + x).view(x.size(0), -1) * n
    return y.softmax(-1) + torch.arange(x.size(0)).float()[:, None]


def _params():
    torch.manual_seed(0)
    # features and hidden sizes that no batch size below equals (the tracer guards a batch
    # size equal to a static one separately: its own recompile, not these stages')
    shapes = [(48, 40), (40, 48), (40,), (40,)]
    return [(torch.randn(*s) * 0.3).requires_grad_() for s in shapes]


def _so_files(root: pathlib.Path) -> int:
    return len(list(root.rglob("*.so")))


@pytest.fixture(autouse=True)
def _fresh(monkeypatch, tmp_path):
    counters.clear()
    ember.reset()
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    yield
    ember.reset()


def _prim_graph(fn, args, dims):
    """The inference prim graph aot makes of `fn` (symbolic when dims mark sizes dynamic)."""
    from ember_aot_autograd import aot_module
    from ember_primops import decomposition_table

    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm

    gm = symbolic_graph(fn, args, dims)
    if not dims[0]:  # static: the plain torch-level graph, traced on the real inputs
        gm = torch.fx.symbolic_trace(fn)
    with torch.no_grad():
        aot_module(gm, args, keep, None, decomposition_table())
    return graphs[0]


def test_pipeline_compiles_once_for_every_size_with_a_static_compiles_builds(tmp_path):
    from ember_codegen import compile_graph
    from ember_inductor_ir import lower, schedule

    params = [p.detach() for p in _params()]

    def args(b):
        return [torch.randn(b, 40), 3, *params]

    dims = [{0: es.Dim()}, "int", None, None, None, None]
    symbolic = _prim_graph(block, args(4), dims)
    compiled = compile_graph(schedule(lower(symbolic, args(4))), target="cpp")
    builds = _so_files(tmp_path / "cache")
    for b, n in ((4, 3), (7, 2), (2, 5), (13, 1)):
        a = args(b)
        a[1] = n
        (out,) = compiled(a)
        torch.testing.assert_close(out, block(*a), rtol=1e-5, atol=1e-5)
    assert _so_files(tmp_path / "cache") == builds  # no build for a new size

    static = _prim_graph(block, args(4), [None] * 6)
    static_inputs = [a for a in args(4) if isinstance(a, torch.Tensor)]
    static_cache = tmp_path / "static"
    os.environ["EMBER_CACHE_DIR"] = str(static_cache)  # restored by the fixture's monkeypatch
    compile_graph(schedule(lower(static, static_inputs)), target="cpp")
    assert builds == _so_files(static_cache) == 1


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_backend_compiles_one_forward_and_backward_for_20_batch_sizes(backend):
    params = _params()

    def args(b, n=3):
        return [torch.randn(b, 40), n, *params]

    dims = [{0: es.Dim()}, "int", None, None, None, None]
    compiled = BACKENDS[backend](symbolic_graph(block, args(4), dims), args(4))
    for b in range(2, 22):
        a = args(b, n=b % 4 + 1)
        for p in params:
            p.grad = None
        out = compiled(*a)
        out.sum().backward()
        grads = [p.grad for p in params]
        for p in params:
            p.grad = None
        ref = block(*a)
        ref.sum().backward()
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
        for got, want in zip(grads, [p.grad for p in params], strict=True):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    stats = counters[backend]
    assert (stats["forward_graphs"], stats["backward_graphs"]) == (1, 1)
    assert stats["forward_runs"] == stats["backward_runs"] == 20
    if backend == "inductor":
        assert not stats["static_specializations"]  # compiled symbolically, not per size


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_ember_compile_20_batch_sizes(backend, tmp_path):
    params = [p.detach() for p in _params()]

    def fn(x, w1, w2, lw, lb):
        return block(x, 2, w1, w2, lw, lb)

    compiled = ember.compile(fn, backend=backend)
    for b in range(2, 22):
        x = torch.randn(b, 40)
        torch.testing.assert_close(compiled(x, *params), fn(x, *params), rtol=1e-5, atol=1e-5)
    assert counters[backend]["forward_graphs"] <= 2
    if backend == "inductor":
        assert not counters["inductor"]["static_specializations"]
        # a build per compiled graph: the first call's static one, then the symbolic one
        assert _so_files(tmp_path / "cache") == counters["inductor"]["forward_graphs"] <= 2


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_training_step_with_a_varying_batch_size(backend):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    reference = copy.deepcopy(model)

    def loss_of(net, x, y):
        return torch.nn.functional.mse_loss(net(x), y)

    compiled_loss = ember.compile(lambda x, y: loss_of(model, x, y), backend=backend)
    for b in (3, 5, 8, 2, 11, 6):
        x, y = torch.randn(b, 8), torch.randn(b, 4)
        model.zero_grad()
        reference.zero_grad()
        loss = compiled_loss(x, y)
        loss.backward()
        expected = loss_of(reference, x, y)
        expected.backward()
        torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-6)
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6)
    assert counters[backend]["forward_graphs"] <= 2
    assert counters[backend]["backward_graphs"] <= 2
    assert not counters["inductor"]["static_specializations"]  # symbolic kernels
    assert not counters["graph_fallbacks"]


def attention(x, n, wq, wo, lw, lb):
    """Batch and sequence length symbolic, heads reshaped from the width, an int input."""
    b, t, d = x.size(0), x.size(1), x.size(2)
    h = torch.nn.functional.layer_norm(x, (d,), lw, lb)
    q = (h @ wq).view(b, t, 4, d // 4).transpose(1, 2)
    a = torch.softmax(q @ q.transpose(-1, -2) / math.sqrt(8), dim=-1)
    o = (a @ q).transpose(1, 2).reshape(b, t, d) @ wo
    return (o + x) * n


def test_inductor_attention_block_symbolic_batch_and_length(tmp_path):
    torch.manual_seed(0)
    params = [(torch.randn(*s) * 0.2).requires_grad_() for s in ((32, 32), (32, 32), (32,), (32,))]

    def args(b, t, n):
        return [torch.randn(b, t, 32), n, *params]

    dims = [{0: es.Dim(), 1: es.Dim()}, "int", None, None, None, None]
    compiled = inductor(symbolic_graph(attention, args(2, 5, 3), dims), args(2, 5, 3))
    builds = _so_files(tmp_path / "cache")
    for b, t, n in ((2, 5, 3), (3, 7, 2), (4, 3, 5), (2, 33, 1)):
        a = args(b, t, n)
        for p in params:
            p.grad = None
        out = compiled(*a)
        out.sum().backward()
        grads = [p.grad for p in params]
        for p in params:
            p.grad = None
        ref = attention(*a)
        ref.sum().backward()
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
        for got, want in zip(grads, [p.grad for p in params], strict=True):
            torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)
    stats = counters["inductor"]
    assert (stats["forward_graphs"], stats["backward_graphs"]) == (1, 1)
    assert not stats["static_specializations"] and not counters["inductor_fallbacks"]
    assert _so_files(tmp_path / "cache") == builds == 2  # forward and backward, built once


@pytest.mark.parametrize("backend", INDUCTOR_IN_CI)
def test_ember_compile_dynamic_true_attention_over_lengths(backend, tmp_path):
    """dynamic=True: every size symbolic from the first call (width and heads' size too:
    d // 4 is a floor division the env proves exact), one graph for every length."""
    torch.manual_seed(0)
    params = [torch.randn(*s) * 0.2 for s in ((32, 32), (32, 32), (32,), (32,))]
    compiled = ember.compile(attention, backend=backend, dynamic=True)
    for t in range(3, 40, 3):
        x = torch.randn(2, t, 32)
        torch.testing.assert_close(
            compiled(x, 2, *params), attention(x, 2, *params), rtol=1e-4, atol=1e-4
        )
    assert counters[backend]["forward_graphs"] == 1
    if backend == "inductor":
        assert not counters["inductor"]["static_specializations"]
        assert _so_files(tmp_path / "cache") == 1


@pytest.mark.parametrize("backend", INDUCTOR_IN_CI)
def test_tiny_gpt2_over_lengths(backend, tmp_path):
    """HF GPT-2 (library defaults, a tiny config, no KV cache) over 12 lengths: the first
    call static, then one symbolic graph; with inductor one C++ build per graph."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=2, n_head=2, n_embd=32, vocab_size=100, n_positions=128,
        bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    model = transformers.GPT2LMHeadModel(config).eval()
    compiled = ember.compile(model, backend=backend)
    built = []  # C++ libraries in the cache after each call
    with torch.no_grad():
        for length in range(4, 40, 3):
            ids = torch.randint(0, 100, (1, length))
            torch.testing.assert_close(
                compiled(ids, use_cache=False).logits,
                model(ids, use_cache=False).logits,
                rtol=1e-4,
                atol=1e-4,
            )
            built.append(_so_files(tmp_path / "cache"))
    assert counters[backend]["forward_graphs"] <= 2
    assert not counters["graph_fallbacks"]
    if backend == "inductor":
        assert not counters["inductor"]["static_specializations"]
        # the symbolic graph (second call) is built once: no length after it builds again
        # (a graph may be several libraries: its C++ split into units built in parallel)
        assert built[1] > built[0] > 0 and set(built[1:]) == {built[1]}


TRITON_CHILD = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import ember_symbolic as es
from test_dynamic_backends import _params, block, symbolic_graph
from ember.backends.inductor import inductor
from ember.backends.inductor_settings import inductor_settings
from ember.stats import counters

params = _params()
def args(b, n):
    return [torch.randn(b, 40), n, *params]
dims = [{0: es.Dim()}, "int", None, None, None, None]
settings = inductor_settings(options={"target": "triton", "dynamic_specializations": 3})
compiled = inductor(symbolic_graph(block, args(4, 3), dims), args(4, 3), settings=settings)
for b in (4, 5, 6, 7, 8, 5):
    a = args(b, 3)
    for p in params:
        p.grad = None
    out = compiled(*a)
    out.sum().backward()
    grads = [p.grad.clone() for p in params]
    for p in params:
        p.grad = None
    ref = block(*a)
    ref.sum().backward()
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    for got, p in zip(grads, params):
        torch.testing.assert_close(got, p.grad, rtol=1e-4, atol=1e-4)
print(json.dumps(dict(counters["inductor"])))
"""


def test_triton_interpreter_one_compile_serves_every_size(tmp_path):
    """The Triton kernels take the size symbols as arguments: one forward and one backward
    kernel module (as many as one static compile) serve every batch size, correct
    throughout (TRITON_INTERPRET=1, in a child so it is set before import)."""
    pytest.importorskip("triton", reason="the Triton target needs the 'triton' extra")
    import subprocess
    import sys

    env = {**os.environ, "TRITON_INTERPRET": "1", "EMBER_CACHE_DIR": str(tmp_path / "c")}
    here = str(pathlib.Path(__file__).parent)
    out = subprocess.run(
        [sys.executable, "-c", TRITON_CHILD, here],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    stats = json.loads(out.stdout.strip().splitlines()[-1])
    assert (stats["forward_graphs"], stats["backward_graphs"]) == (1, 1)
    assert not stats.get("static_specializations") and not stats.get("specialization_overflow_runs")
    modules = [
        p for p in (tmp_path / "c" / "triton" / "kernels").rglob("*.py")
        if not p.name.endswith(".wrapper.py")
    ]  # fmt: skip
    assert len(modules) == 2  # forward and backward, compiled once


SECOND_PROCESS = """
import json, sys, torch, ember
sys.path.insert(0, sys.argv[1])
from test_dynamic_backends import attention
torch.manual_seed(0)
params = [torch.randn(*s) * 0.2 for s in ((32, 32), (32, 32), (32,), (32,))]
compiled = ember.compile(attention, backend="inductor", dynamic=True)
for t in map(int, sys.argv[2].split(",")):
    x = torch.randn(2, t, 32)
    torch.testing.assert_close(compiled(x, 2, *params), attention(x, 2, *params), rtol=1e-4, atol=1e-4)
print(json.dumps(dict(ember.counters["inductor"])))
"""


# about 35 s of cold C++ builds: `nox -s extended`; CI's second-process check of symbolic
# graphs is test_dynamic_artifact_cache.py's (the artifact level above this kernel level)
@pytest.mark.extended
def test_second_process_reuses_the_symbolic_kernels_for_new_sizes(tmp_path):
    """The C++ kernel cache keys the kernels' source, which names no size: a second process
    compiling the same symbolic graph builds nothing, even for sizes the first never ran."""
    import subprocess
    import sys

    env = {**os.environ, "EMBER_CACHE_DIR": str(tmp_path / "cache")}
    here = str(pathlib.Path(__file__).parent)
    first = subprocess.run(
        [sys.executable, "-c", SECOND_PROCESS, here, "5,7"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr[-3000:]
    builds = _so_files(tmp_path / "cache")
    assert builds == 1
    second = subprocess.run(
        [sys.executable, "-c", SECOND_PROCESS, here, "11,30,4"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr[-3000:]
    assert _so_files(tmp_path / "cache") == builds  # no new build
    stats = json.loads(second.stdout.strip().splitlines()[-1])
    assert stats["forward_graphs"] == 1 and not stats.get("static_specializations")


def test_a_symbolic_inference_graph_skips_the_per_call_signature(monkeypatch):
    """Under the tracer's guards, the symbolic variant warmed at compile time runs without
    aot's per-call signature (about 40 us of a tiny GPT-2 decode step): the sizes it reads
    are the tracer's shape guards' business, and it writes no input."""
    from ember_aot_autograd.symbolic import DynamicSignature

    calls = []
    original = DynamicSignature.__call__
    monkeypatch.setattr(
        DynamicSignature, "__call__", lambda self, args: calls.append(1) or original(self, args)
    )

    def f(x, w):
        return torch.softmax(x @ w, dim=-1) * 2

    compiled = ember.compile(f, backend="inductor", dynamic=True)
    w = torch.randn(8, 4)
    with torch.no_grad():
        for n in (3, 5, 9, 17):
            x = torch.randn(n, 8)
            torch.testing.assert_close(compiled(x, w), f(x, w))
    assert len(compiled._ember_compiler.records) == 1
    assert len(calls) == 1  # the warm-up at compile time, never per call


# ---- a user's backend that compiles for its example inputs (issue 26) ----------------------


class UserAotBackend:
    """The custom-backend pattern of PyTorch's tutorial: PyTorch's own AOT tracer over the graph
    and the example inputs it is handed (it specialises on them), counting its calls."""

    def __init__(self) -> None:
        self.example_sizes: list[list] = []

    def __call__(self, gm, example_inputs):
        from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func

        self.example_sizes.append(
            [tuple(e.shape) if isinstance(e, torch.Tensor) else e for e in example_inputs]
        )
        return aot_module_simplified(
            gm, example_inputs, fw_compiler=lambda g, _: make_boxed_func(g.forward)
        )


def test_user_aot_backend_over_sizes_under_default_settings():
    """Default settings: the second size makes the trace symbolic; the user's backend gets
    one compile per size, each with that size's inputs, and every result equals eager's."""
    user = UserAotBackend()

    def fn(x, w):
        return (x.reshape(-1, 2) @ w).sum(0) * x.shape[0]

    compiled = ember.compile(fn, backend=user)
    w = torch.randn(2, 3)
    for n in (4, 6, 8, 12, 6, 8):
        x = torch.randn(n)
        torch.testing.assert_close(compiled(x, w), fn(x, w))
    assert len(compiled._ember_compiler.records) == 2  # static, then symbolic: no retrace
    assert [s[0] for s in user.example_sizes] == [(4,), (6,), (8,), (12,)]
    assert counters["per_size"]["compiles"] == 3


def test_user_aot_backend_with_an_int_alpha_under_dynamic():
    user = UserAotBackend()

    def fn(x, a):
        return torch.add(x, x.relu(), alpha=a)

    compiled = ember.compile(fn, backend=user, dynamic=True)
    x = torch.randn(5, requires_grad=True)
    for a in (2, 3, 5, 3):
        got, want = compiled(x, a), fn(x, a)
        torch.testing.assert_close(got, want)
        (grad,) = torch.autograd.grad(got.sum(), x)
        (expected,) = torch.autograd.grad(want.sum(), x)
        torch.testing.assert_close(grad, expected)
    assert len(compiled._ember_compiler.records) == 1
    assert [s[1] for s in user.example_sizes] == [2, 3, 5]


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_ember_backends_compile_a_symbolic_graph_once(backend):
    """The same program under Ember's own backends (declared symbolic): one compile."""

    def fn(x, a):
        return torch.add(x, x.relu(), alpha=a) * x.shape[0]

    compiled = ember.compile(fn, backend=backend, dynamic=True)
    for n, a in ((4, 2), (6, 3), (8, 5)):
        x = torch.randn(n)
        torch.testing.assert_close(compiled(x, a), fn(x, a))
    assert counters[backend]["forward_graphs"] == 1
    assert not counters["per_size"]["graphs"]
