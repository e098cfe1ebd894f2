"""Symbolic sizes through the Triton target on its CPU interpreter (issue 13): kernels take
the size symbols as int arguments, so one kernel module (one compile) serves every size.

Each case runs at 3+ sizes against eager and counts what was compiled: one graph per
direction, no static specialization, and as many kernel modules as one static compile.
The cases run in one child pytest process (TRITON_INTERPRET must be set before triton is
imported); `test_cases_on_the_interpreter` starts it and reports its failures.
"""

from __future__ import annotations

import math
import os
import pathlib
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import ember
from ember.stats import counters

pytest.importorskip("triton", reason="the Triton target needs the 'triton' extra")

TRITON = {"target": "triton"}
CHILD_FLAG = "EMBER_DYNAMIC_TRITON_CHILD"
IN_CHILD = os.environ.get(CHILD_FLAG) == "1"
case = pytest.mark.skipif(not IN_CHILD, reason="runs in test_cases_on_the_interpreter's child")
# masked-off lanes compute on placeholder values (0/0): numpy warns, a GPU does not
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning:triton.runtime.interpreter")


@pytest.mark.skipif(IN_CHILD, reason="the parent of the cases")
def test_cases_on_the_interpreter(tmp_path):
    env = {**os.environ, CHILD_FLAG: "1", "TRITON_INTERPRET": "1"}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", __file__],
        env=env, capture_output=True, text=True, timeout=1800, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and "skipped" in out.stdout  # only the parent skipped


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    counters.clear()
    ember.reset()
    yield tmp_path
    ember.reset()


def _modules(root: pathlib.Path) -> list[str]:
    """The kernel modules compiled (triton/kernels/<k>/<key>.py, wrappers aside)."""
    found = (root / "triton" / "kernels").rglob("*.py")
    return [p.read_text() for p in found if not p.name.endswith(".wrapper.py")]


def _one_symbolic_compile(root: pathlib.Path, graphs: int = 1) -> str:
    stats = counters["inductor"]
    assert stats["forward_graphs"] == graphs
    assert not stats["static_specializations"] and not stats["specialization_overflow_runs"]
    modules = _modules(root / "cache")
    assert len(modules) == graphs * (1 + bool(stats["backward_graphs"]))
    assert all("do_not_specialize" in m for m in modules)  # sizes are kernel arguments
    return "\n".join(modules)


def _run(fn, shapes, make=torch.randn, **kwargs):
    compiled = ember.compile(fn, backend="inductor", options=TRITON, **kwargs)
    for shape in shapes:
        args = make(shape)
        args = args if isinstance(args, tuple) else (args,)
        torch.testing.assert_close(compiled(*args), fn(*args), rtol=1e-4, atol=1e-5)


@case
def test_pointwise_one_kernel_for_every_size(fresh):
    def f(x, y):
        return torch.relu(x * 2 + y.sin()) - y.exp() / 3

    _run(f, [(3, 5), (7, 17), (4, 33), (9, 2)], lambda s: (torch.randn(s), torch.randn(s)),
         dynamic=True)  # fmt: skip
    source = _one_symbolic_compile(fresh)
    assert "xmask = xindex < (s0 * s1)" in source or "xmask = xindex < (s1 * s0)" in source
    assert "ptr_arg0 + xindex" in source  # contiguous: the flat index, no digits


@case
def test_looped_reductions_over_an_unbounded_row(fresh):
    def f(x):
        return x.sum(-1), x.amax(-1), x.var(-1), x.argmax(-1)

    _run(f, [(4, 5), (3, 70), (2, 1100), (5, 9)], dynamic=True)
    source = _one_symbolic_compile(fresh)
    # no upper bound on the row: looped over it (valid for every length), int64 indices
    assert "for roffset in range(0, _em_trip(s1), RBLOCK)" in source
    assert "s1 = s1.to(tl.int64)" in source


@case
def test_persistent_reduction_over_a_bounded_row(fresh):
    """mark_dynamic's max bounds the row: one RBLOCK holds every length (persistent), and
    the range proves int32 indexing."""

    def f(x):
        return torch.softmax(x, -1) * x.sum(-1, keepdim=True)

    compiled = ember.compile(f, backend="inductor", options=TRITON)
    for n in (5, 40, 200, 17):
        x = torch.randn(6, n)
        ember.mark_dynamic(x, 1, min=2, max=256)
        torch.testing.assert_close(compiled(x), f(x), rtol=1e-4, atol=1e-5)
    source = _one_symbolic_compile(fresh)
    assert "for roffset" not in source and "RBLOCK: tl.constexpr" in source
    assert "s1 = s1.to(tl.int64)" not in source and "program_id(0).to(tl.int64)" not in source


@case
@pytest.mark.parametrize("bounded", [False, True])
def test_softmax_and_layer_norm_rows_of_symbolic_length(fresh, bounded):
    """Unbounded row length (dynamic=True): looped kernels; bounded by mark_dynamic's max:
    persistent ones (the row in registers)."""

    def f(x):
        return torch.softmax(F.layer_norm(x, (x.shape[-1],)) * 1.5, -1)

    compiled = ember.compile(
        f, backend="inductor", options=TRITON, dynamic=True if not bounded else None
    )
    for n in (8, 33, 130):
        x = torch.randn(5, n)
        if bounded:
            ember.mark_dynamic(x, 1, min=2, max=512)
        torch.testing.assert_close(compiled(x), f(x), rtol=1e-4, atol=1e-5)
    source = _one_symbolic_compile(fresh)
    assert ("for roffset" in source) is not bounded


def attention(x, n, wq, wo, lw, lb):
    b, t, d = x.size(0), x.size(1), x.size(2)
    h = F.layer_norm(x, (d,), lw, lb)
    q = (h @ wq).view(b, t, 4, d // 4).transpose(1, 2)
    a = torch.softmax(q @ q.transpose(-1, -2) / math.sqrt(8), dim=-1)
    o = (a @ q).transpose(1, 2).reshape(b, t, d) @ wo
    return (o + x) * n


@case
def test_attention_block_over_lengths(fresh):
    torch.manual_seed(0)
    params = [torch.randn(*s) * 0.2 for s in ((16, 16), (16, 16), (16,), (16,))]
    compiled = ember.compile(attention, backend="inductor", options=TRITON, dynamic=True)
    for b, t in ((2, 3), (3, 9), (3, 5), (2, 12)):  # sizes 0 and 1 specialize
        x = torch.randn(b, t, 16)
        torch.testing.assert_close(
            compiled(x, 2, *params), attention(x, 2, *params), rtol=1e-4, atol=1e-4
        )
    _one_symbolic_compile(fresh)


@case
def test_training_step_with_a_varying_batch(fresh):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    reference = [p.detach().clone().requires_grad_() for p in model.parameters()]

    def loss_of(params, x, y):
        w1, b1, w2, b2 = params
        return F.mse_loss(torch.tanh(x @ w1.t() + b1) @ w2.t() + b2, y)

    compiled = ember.compile(
        lambda x, y: loss_of(list(model.parameters()), x, y),
        backend="inductor", options=TRITON, dynamic=True,
    )  # fmt: skip
    for b in (3, 7, 2, 12):
        x, y = torch.randn(b, 8), torch.randn(b, 4)
        model.zero_grad()
        for p in reference:
            p.grad = None
        loss = compiled(x, y)
        loss.backward()
        expected = loss_of(reference, x, y)
        expected.backward()
        torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-6)
        for p, q in zip(model.parameters(), reference, strict=True):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6)
    assert counters["inductor"]["backward_graphs"] == 1
    _one_symbolic_compile(fresh)


@case
def test_tiny_gpt2_over_lengths(fresh):
    """HF GPT-2 (library defaults, tiny config, no KV cache): the first length static, then
    one symbolic graph whose Triton kernels serve every later length."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=2, n_head=2, n_embd=32, vocab_size=100, n_positions=128,
        bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    model = transformers.GPT2LMHeadModel(config).eval()
    compiled = ember.compile(model, backend="inductor", options=TRITON)
    with torch.no_grad():
        for length in (4, 9, 17, 30):
            ids = torch.randint(0, 100, (1, length))
            torch.testing.assert_close(
                compiled(ids, use_cache=False).logits,
                model(ids, use_cache=False).logits,
                rtol=1e-4,
                atol=1e-4,
            )
    stats = counters["inductor"]
    assert stats["forward_graphs"] == 2 and not stats["static_specializations"]
    assert len(_modules(fresh / "cache")) == 2  # the static graph's and the symbolic one's
    assert not counters["graph_fallbacks"]


@case
def test_one_symbolic_wrapper_serves_every_size(fresh):
    """One wrapper source for every size (triton/symbolic_wrapper.py): buffer sizes, grids
    and size arguments are expressions over the symbols read from each call's inputs;
    exec'd once, never written per binding, and the results match eager."""
    from ember_codegen.wrapper.size_bindings import WRAPPER_STATS

    WRAPPER_STATS.clear()

    def f(x, y):
        h = torch.relu(x * 2 + y.sin())
        return h.softmax(-1) * h.sum(-1, keepdim=True), (h @ y.transpose(0, 1)).mean()

    shapes = [(3, 5), (7, 17), (4, 33), (9, 2), (2, 70)]
    _run(f, shapes, lambda s: (torch.randn(s), torch.randn(s)), dynamic=True)
    _one_symbolic_compile(fresh)
    assert dict(WRAPPER_STATS) == {"symbolic": 1, "wrapper_execs": 1}
