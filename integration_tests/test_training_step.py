"""A whole training step inside one compiled function, against eager PyTorch.

`zero_grad; loss = lossfn(model(x), y); loss.backward(); clip_grad_norm_; opt.step()`:
the forward is one graph compiled for training, `loss.backward()` a graph break (autograd's
engine runs the compiled backward), and clipping plus the optimizer step one graph of
in-place updates in the resume function. Three steps compiled and three eager on deep
copies must agree on losses, parameters, gradients and optimizer state; later calls must
reuse the compiled code.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest
import torch

import ember

BACKENDS = ["aot_eager", "inductor"]
OPTIMIZERS = {
    "sgd": lambda params, foreach: torch.optim.SGD(
        params, lr=0.1, momentum=0.9, weight_decay=0.01, foreach=foreach
    ),
    "adam": lambda params, foreach: torch.optim.Adam(
        params, lr=0.01, weight_decay=0.01, foreach=foreach
    ),
    "adamw": lambda params, foreach: torch.optim.AdamW(params, lr=0.01, foreach=foreach),
}
TOL = {"rtol": 1e-5, "atol": 1e-6}


def _mlp() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    return model, torch.randn(6, 8), torch.randn(6, 4)


def _cnn() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(2, 3, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(3 * 5 * 5, 4),
    )
    return model, torch.randn(2, 2, 5, 5), torch.randn(2, 4)


MODELS = {"mlp": _mlp, "cnn": _cnn}


def _make_step(model, opt, clip: bool = True):
    def step(x, y):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        return loss

    return step


def _assert_same_state(opt, ref_opt, model, ref_model) -> None:
    for p, q in zip(model.parameters(), ref_model.parameters(), strict=True):
        torch.testing.assert_close(p, q, **TOL)
        assert (p.grad is None) == (q.grad is None)
        if p.grad is not None:
            torch.testing.assert_close(p.grad, q.grad, **TOL)
        state, ref_state = opt.state[p], ref_opt.state[q]
        assert state.keys() == ref_state.keys()
        for key in ref_state:
            torch.testing.assert_close(state[key], ref_state[key], **TOL)


def _frames(compiled) -> list:
    return compiled._ember_compiler.records


def _run_steps(name, backend, model_name, foreach, clip=True, steps=3):
    model, x, y = MODELS[model_name]()
    ref_model = copy.deepcopy(model)
    opt = OPTIMIZERS[name](model.parameters(), foreach)
    ref_opt = OPTIMIZERS[name](ref_model.parameters(), foreach)
    compiled = ember.compile(_make_step(model, opt, clip), backend=backend)
    eager = _make_step(ref_model, ref_opt, clip)
    frames_after = []
    for _ in range(steps):
        loss = compiled(x, y)
        ref_loss = eager(x, y)
        torch.testing.assert_close(loss, ref_loss, **TOL)
        assert loss.requires_grad == ref_loss.requires_grad
        _assert_same_state(opt, ref_opt, model, ref_model)
        frames_after.append(len(_frames(compiled)))
    return compiled, frames_after


def _graph_ops(graph: torch.fx.GraphModule) -> list[str]:
    return [
        n.target if isinstance(n.target, str) else getattr(n.target, "__name__", str(n.target))
        for n in graph.graph.nodes
        if n.op.startswith("call")
    ]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_mlp_training_step_matches_eager(name, foreach, backend):
    ember.reset()
    compiled, frames_after = _run_steps(name, backend, "mlp", foreach)
    frames = _frames(compiled)
    # the step up to loss.backward(), then clipping + the optimizer step in its resume
    forward, rest = frames[0], frames[-1]
    assert [b.reason for b in forward.breaks] == [
        "Tensor.backward() runs autograd's engine (a graph break)"
    ]
    assert len(forward.graphs) == 1 and "mse_loss" in _graph_ops(forward.graphs[0])
    assert rest.code.co_name.startswith("resume_in_") and not rest.breaks
    assert len(rest.graphs) == 1
    ops = _graph_ops(rest.graphs[0])
    assert "linalg_vector_norm" in ops and ops.count("add_") + ops.count("sub_") >= 4  # 4 params
    # SGD's first step makes its momentum buffers (a new state layout: one recompile of
    # the resume function); Adam's state is created while tracing the first step
    expected = [2, 3, 3] if name == "sgd" else [2, 2, 2]
    assert frames_after == expected
    counters = ember.counters[backend]
    assert counters["backward_graphs"] >= 1 and counters["backward_runs"] == 3


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["sgd", "adam"])
def test_cnn_training_step_matches_eager(name, backend):
    ember.reset()
    compiled, frames_after = _run_steps(name, backend, "cnn", foreach=None)
    assert frames_after == ([2, 3, 3] if name == "sgd" else [2, 2, 2])
    assert sum(len(f.graphs) for f in _frames(compiled)) == frames_after[-1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_only_inside(backend):
    """loss.backward() inside, the optimizer outside: gradients equal eager's."""
    ember.reset()
    model, x, y = _mlp()
    ref = copy.deepcopy(model)

    def step(m, x, y):
        loss = torch.nn.functional.mse_loss(m(x), y)
        loss.backward()
        return loss * 2

    compiled = ember.compile(step, backend=backend)
    for _ in range(3):
        model.zero_grad()
        ref.zero_grad()
        torch.testing.assert_close(compiled(model, x, y), step(ref, x, y), **TOL)
        for p, q in zip(model.parameters(), ref.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, **TOL)
    assert ember.counters[backend]["backward_runs"] == 3
    frames = _frames(compiled)
    assert len(frames) == 2  # the step and its resume (loss * 2), each compiled once


@pytest.mark.parametrize("backend", BACKENDS)
def test_autograd_grad_inside(backend):
    ember.reset()
    w = torch.randn(5, 3, requires_grad=True)

    def f(x):
        y = (x @ w).tanh().sum()
        (g,) = torch.autograd.grad(y, w)
        return g * 3 + 1

    compiled = ember.compile(f, backend=backend)
    x = torch.randn(4, 5)
    for _ in range(2):
        torch.testing.assert_close(compiled(x), f(x), **TOL)
    assert w.grad is None
    assert ember.counters[backend]["backward_runs"] == 2
    (first, *rest) = _frames(compiled)
    assert "torch.autograd.grad()" in first.breaks[0].reason
    assert len(first.graphs) == 1 and rest and len(rest[0].graphs) == 1


def test_tensor_backward_with_gradient_argument():
    ember.reset()
    w = torch.randn(3, requires_grad=True)

    def f(x, g):
        y = x * w
        y.backward(g)
        return w.grad * 2

    compiled = ember.compile(f, backend="aot_eager")
    x, g = torch.randn(3), torch.randn(3)
    out = compiled(x, g)
    expected = x * g * 2
    torch.testing.assert_close(out, expected)


def test_learning_rate_change_is_honoured():
    ember.reset()
    model, x, y = _mlp()
    ref_model = copy.deepcopy(model)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    ref_opt = torch.optim.Adam(ref_model.parameters(), lr=0.01)
    compiled = ember.compile(_make_step(model, opt), backend="aot_eager")
    eager = _make_step(ref_model, ref_opt)
    for lr in (0.01, 0.05, 0.05):
        for group, ref_group in zip(opt.param_groups, ref_opt.param_groups, strict=True):
            group["lr"] = ref_group["lr"] = lr
        torch.testing.assert_close(compiled(x, y), eager(x, y), **TOL)
        _assert_same_state(opt, ref_opt, model, ref_model)
    assert len(_frames(compiled)) == 3  # the resume recompiled once, for the new lr


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad_variants(set_to_none):
    ember.reset()
    model, x, y = _mlp()
    ref_model = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref_model.parameters(), lr=0.1)

    def make(m, o):
        def step(x, y):
            o.zero_grad(set_to_none=set_to_none)
            loss = torch.nn.functional.mse_loss(m(x), y)
            loss.backward()
            o.step()
            return loss

        return step

    compiled = ember.compile(make(model, opt), backend="aot_eager")
    eager = make(ref_model, ref_opt)
    for _ in range(3):
        torch.testing.assert_close(compiled(x, y), eager(x, y), **TOL)
        _assert_same_state(opt, ref_opt, model, ref_model)


def test_unsupported_optimizer_breaks_cleanly():
    """amsgrad is not traced: the step runs eagerly (a graph break), still eager's result."""
    ember.reset()
    model, x, y = _mlp()
    ref_model = copy.deepcopy(model)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, amsgrad=True)
    ref_opt = torch.optim.Adam(ref_model.parameters(), lr=0.01, amsgrad=True)
    compiled = ember.compile(_make_step(model, opt), backend="aot_eager")
    eager = _make_step(ref_model, ref_opt)
    for _ in range(3):
        torch.testing.assert_close(compiled(x, y), eager(x, y), **TOL)
        _assert_same_state(opt, ref_opt, model, ref_model)
    reasons = [b.reason for f in _frames(compiled) for b in f.breaks]
    assert any("amsgrad" in r for r in reasons)


def _deep_mlp() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    layers = [torch.nn.Linear(4, 4) for _ in range(80)]  # 160 parameters
    return torch.nn.Sequential(*layers), torch.randn(2, 4), torch.randn(2, 4)


MODELS["deep_mlp"] = _deep_mlp


def test_an_optimizer_step_over_many_parameters_compiles():
    """AdamW over 160 parameters reads and writes over a thousand buffers in one C++ graph:
    more than one native entry point takes (ctypes: 1024 arguments)."""
    ember.reset()
    _run_steps("adamw", "inductor", "deep_mlp", foreach=False, clip=False, steps=2)
    assert ember.counters["inductor"]["forward_graphs"] >= 2
    assert not ember.counters["graph_fallbacks"], dict(ember.counters["graph_fallbacks"])


def test_optimizer_updates_are_written_into_the_parameters(monkeypatch, tmp_path):
    """The optimizer graph writes parameters, moments and step counts in place: no copy back
    after it, compiled afresh or read from the artifact caches (a second process). Values
    match eager's; version counters move as eager's in-place ops move them. On the C++
    target here, on the Triton target in a child under Triton's interpreter."""
    target = os.environ.get(IN_PLACE_TARGET, "cpp")
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    copies: list[int] = []
    copy_all = torch._foreach_copy_
    monkeypatch.setattr(
        torch, "_foreach_copy_", lambda a, b, **k: copies.append(len(a)) or copy_all(a, b, **k)
    )
    for start in ("cold", "warm"):
        ember.reset()
        model, x, y = _mlp()
        ref_model = copy.deepcopy(model)
        opt = OPTIMIZERS["adamw"](model.parameters(), False)
        ref_opt = OPTIMIZERS["adamw"](ref_model.parameters(), False)
        compiled = ember.compile(_make_step(model, opt, clip=False), options={"target": target})
        eager = _make_step(ref_model, ref_opt, clip=False)
        addresses = [p.data_ptr() for p in model.parameters()]
        for _ in range(3):
            versions = [p._version for p in model.parameters()]
            torch.testing.assert_close(compiled(x, y), eager(x, y), **TOL)
            _assert_same_state(opt, ref_opt, model, ref_model)
            assert all(p._version > v for p, v in zip(model.parameters(), versions, strict=True))
        assert [p.data_ptr() for p in model.parameters()] == addresses
        assert copies == [], (start, copies)
        if start == "cold":
            assert ember.counters["inductor"]["outputs_written_in_place"] >= 3 * 4  # p, m, v


IN_PLACE_TARGET = "EMBER_TEST_IN_PLACE_TARGET"


def test_optimizer_updates_are_written_into_the_parameters_on_the_triton_target():
    pytest.importorskip("triton")
    env = {**os.environ, IN_PLACE_TARGET: "triton", "TRITON_INTERPRET": "1"}
    test = f"{__file__}::test_optimizer_updates_are_written_into_the_parameters"
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert child.returncode == 0, child.stdout[-3000:] + child.stderr[-2000:]


def test_an_in_place_write_still_invalidates_saved_tensors():
    """Eager raises when autograd's saved value was written in place since; so do we."""

    def scale_(t):
        t.mul_(2)
        return t.sum()

    compiled = ember.compile(scale_)
    for run in (scale_, compiled):
        a = torch.randn(4, requires_grad=True)
        b = a * 1
        y = b.sin()  # saves b
        with torch.no_grad():
            run(b)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


_STEP_MODEL, _STEP_X, _STEP_Y = _mlp()
_STEP_OPT = torch.optim.AdamW(_STEP_MODEL.parameters(), lr=0.01)


def _optimizer_step_of_globals() -> None:
    _STEP_OPT.step()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("form", ["function", "bound_step"])
def test_an_optimizer_step_compiled_alone_is_one_graph(backend, form):
    """The optimizer-compiling idiom: `@compile def step(): opt.step()` with the optimizer a
    global (no argument), or `compile(opt.step)` itself. Both ran eagerly before (the first
    as a frame without tensor work, the second as torch's own code)."""
    ember.reset()
    ref = copy.deepcopy(_STEP_MODEL)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=0.01)
    ref_opt.load_state_dict(copy.deepcopy(_STEP_OPT.state_dict()))
    step = ember.compile(
        _optimizer_step_of_globals if form == "function" else _STEP_OPT.step, backend=backend
    )
    for _ in range(3):
        for model in (_STEP_MODEL, ref):
            model.zero_grad()
            torch.nn.functional.mse_loss(model(_STEP_X), _STEP_Y).backward()
        step()
        ref_opt.step()
    for p, q in zip(_STEP_MODEL.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p, q, **TOL)
    counters = ember.counters[backend]
    assert counters["forward_graphs"] >= 1 and counters["forward_runs"] == 3
    assert not counters["graph_fallbacks"]  # the step's math compiled, not run eagerly
