"""Optimizer steps, gradient clipping and autograd calls in a trace (variables/optimizer.py,
variables/autograd_calls.py, optim_rules.py), and dict items reached by position."""

from __future__ import annotations

import pytest
import torch
from torch.optim.adam import adam

import ember_frame_hook as fh
from ember_bytecode_tracer import optim_rules
from ember_bytecode_tracer.convert_frame import FrameCompiler
from ember_bytecode_tracer.guards import (
    DictKeysSource,
    DictValuesSource,
    GlobalSource,
    ItemSource,
    dict_item_source,
)


def _eager_backend(gm, example_inputs):
    return gm.forward


def _compile(fn):
    compiler = FrameCompiler(_eager_backend)

    def run(*args):
        with fh.eval_frame(compiler):
            return fn(*args)

    run.compiler = compiler
    return run


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))


def _with_grads(model):
    torch.manual_seed(1)
    model(torch.randn(3, 4)).square().sum().backward()
    return model


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: torch.optim.SGD(ps, lr=0.1),
        lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.1, nesterov=False),
        lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1),
        lambda ps: torch.optim.SGD(ps, lr=0.1, maximize=True, momentum=0.5),
        lambda ps: torch.optim.Adam(ps, lr=0.01, weight_decay=0.1),
        lambda ps: torch.optim.Adam(ps, lr=0.01, maximize=True),
        lambda ps: torch.optim.AdamW(ps, lr=0.01, betas=(0.8, 0.9)),
    ],
)
def test_step_traced_matches_eager(make):
    model, ref = _with_grads(_model()), _with_grads(_model())
    opt, ref_opt = make(model.parameters()), make(ref.parameters())
    step = _compile(lambda m: opt.step())  # a module argument: the frame is traced
    for _ in range(3):
        step(model)
        ref_opt.step()
        for p, q in zip(model.parameters(), ref.parameters(), strict=True):
            torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)
            for key, value in ref_opt.state[q].items():
                torch.testing.assert_close(opt.state[p][key], value, rtol=1e-6, atol=1e-7)
    records = step.compiler.records
    assert records and all(len(r.graphs) == 1 and not r.breaks for r in records)
    assert len(records) <= 2  # SGD with momentum: a second trace once its buffers exist


def test_parameters_without_grad_are_skipped():
    model, ref = _model(), _model()
    model[0].weight.grad = torch.ones_like(model[0].weight)
    ref[0].weight.grad = torch.ones_like(ref[0].weight)
    opt, ref_opt = torch.optim.Adam(model.parameters()), torch.optim.Adam(ref.parameters())
    _compile(lambda m: opt.step())(model)
    ref_opt.step()
    assert len(opt.state) == len(ref_opt.state) == 1
    for p, q in zip(model.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p, q)


def test_new_gradient_after_a_step_is_guarded():
    """A parameter whose gradient appears later gets state and an update (recompile)."""
    model, ref = _model(), _model()
    model[0].weight.grad = torch.ones_like(model[0].weight)
    ref[0].weight.grad = torch.ones_like(ref[0].weight)
    opt, ref_opt = torch.optim.Adam(model.parameters()), torch.optim.Adam(ref.parameters())
    step = _compile(lambda m: opt.step())
    step(model)
    ref_opt.step()
    model[2].bias.grad = torch.ones_like(model[2].bias)
    ref[2].bias.grad = torch.ones_like(ref[2].bias)
    step(model)
    ref_opt.step()
    for p, q in zip(model.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p, q)
    assert len(step.compiler.records) == 2


def test_clip_grad_norm_traced():
    model, ref = _with_grads(_model()), _with_grads(_model())
    clip = _compile(lambda m: torch.nn.utils.clip_grad_norm_(m.parameters(), 0.1))
    norm = clip(model)
    ref_norm = torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.1)
    torch.testing.assert_close(norm, ref_norm)
    for p, q in zip(model.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad)
    (record,) = clip.compiler.records
    assert not record.breaks and len(record.graphs) == 1


def test_rules_match_torch_optim_eagerly():
    """The inlined functions, run eagerly, against torch.optim's functional API."""
    torch.manual_seed(0)
    params = [torch.randn(3, 2), torch.randn(4)]
    grads = [torch.randn_like(p) for p in params]
    ours = [p.clone() for p in params]
    exp_avgs = [torch.zeros_like(p) for p in params]
    exp_avg_sqs = [torch.zeros_like(p) for p in params]
    steps = [torch.tensor(0.0) for _ in params]
    theirs = [p.clone() for p in params]
    their_state = ([torch.zeros_like(p) for p in params], [torch.zeros_like(p) for p in params])
    their_steps = [torch.tensor(0.0) for _ in params]
    for _ in range(3):
        optim_rules.adam_update(ours, grads, exp_avgs, exp_avg_sqs, steps, lr=0.01, beta1=0.9,
                                beta2=0.999, eps=1e-8, weight_decay=0.1, maximize=False,
                                decoupled_weight_decay=True)  # fmt: skip
        adam(theirs, grads, *their_state, [], their_steps, foreach=False, amsgrad=False,
             beta1=0.9, beta2=0.999, lr=0.01, weight_decay=0.1, eps=1e-8, maximize=False,
             decoupled_weight_decay=True)  # fmt: skip
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_unsupported_step_is_a_graph_break():
    model = _with_grads(_model())
    opt = torch.optim.Adam(model.parameters(), amsgrad=True)

    def f(x):
        y = x + 1
        opt.step()
        return y * 2

    compiled = _compile(f)
    torch.testing.assert_close(compiled(torch.ones(2)), torch.full((2,), 4.0))
    reasons = [b.reason for r in compiled.compiler.records for b in r.breaks]
    assert reasons == ["Adam(amsgrad=True) inside a trace"]
    assert "max_exp_avg_sq" in opt.state[model[0].weight]  # the eager step ran


@pytest.mark.parametrize("call", ["backward", "grad"])
def test_autograd_engine_calls_are_graph_breaks(call):
    w = torch.randn(3, requires_grad=True)

    def f(x):
        y = (x * w).sum()
        if call == "backward":
            y.backward()
            g = w.grad
        else:
            (g,) = torch.autograd.grad(y, [w])
        return g + 1

    compiled = _compile(f)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), x + 1)
    first = compiled.compiler.records[0]
    assert len(first.breaks) == 1 and "autograd" in first.breaks[0].reason


def test_dict_items_by_position_for_keys_without_literal():
    table = {(torch.float32, 4): torch.ones(2), torch.device("cpu"): torch.zeros(2)}
    scope_globals = {"t": table}
    first = dict_item_source(GlobalSource("t"), (torch.float32, 4), 0)
    second = dict_item_source(GlobalSource("t"), torch.device("cpu"), 1)
    assert first == ItemSource(DictValuesSource(GlobalSource("t")), 0)
    assert first.get({}, scope_globals) is table[(torch.float32, 4)]
    assert second.get({}, scope_globals) is table[torch.device("cpu")]
    assert eval(first.expr(), {"G": scope_globals}) is table[(torch.float32, 4)]
    key = ItemSource(DictKeysSource(GlobalSource("t")), 1)
    assert key.get({}, scope_globals) == torch.device("cpu")
    assert dict_item_source(GlobalSource("t"), "a", 3) == ItemSource(GlobalSource("t"), "a")


def test_dict_with_dtype_keys_traced_and_guarded():
    table = {(torch.float32, 4): 2.0, (torch.float64, 4): 3.0}

    def f(x):
        return x * table[(torch.float32, 4)]

    compiled = _compile(f)
    x = torch.ones(2)
    torch.testing.assert_close(compiled(x), x * 2)
    table[(torch.float32, 4)] = 5.0  # the value read by position is guarded
    torch.testing.assert_close(compiled(x), x * 5)


_GLOBAL_MODEL = _with_grads(_model())
_GLOBAL_OPT = torch.optim.AdamW(_GLOBAL_MODEL.parameters(), lr=0.01)
_GLOBAL_X = torch.randn(3, 4)


def _global_step():
    _GLOBAL_OPT.step()


def _global_tensor_math():
    return _GLOBAL_X.sin() * 2


def test_a_step_without_arguments_on_a_global_optimizer_is_traced():
    """`def step(): opt.step()` (the optimizer a global, no argument at all): every tensor of
    the frame sits in the optimizer, deeper than the argument scan looked; it was skipped
    as a frame without tensor work, silently running eagerly."""
    ref = _with_grads(_model())
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=0.01)
    step = _compile(_global_step)
    for _ in range(3):
        step()
        ref_opt.step()
    for p, q in zip(_GLOBAL_MODEL.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)
    records = step.compiler.records
    assert records and all(len(r.graphs) == 1 and not r.breaks for r in records)


def test_a_function_of_global_tensors_only_is_traced():
    step = _compile(_global_tensor_math)
    torch.testing.assert_close(step(), _GLOBAL_X.sin() * 2)
    (record,) = step.compiler.records
    assert len(record.graphs) == 1 and not record.breaks


def test_a_bound_step_handed_in_is_the_step_rule():
    """`opt.step` passed as a value and called: the same one graph of the step's math as
    `opt.step()` written in the trace (was: torch's step code inlined, its `.item()` reads
    in the graph)."""
    model, ref = _with_grads(_model()), _with_grads(_model())
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    ref_opt = torch.optim.Adam(ref.parameters(), lr=0.01)
    call = _compile(lambda method: method())
    for _ in range(2):
        call(opt.step)
        ref_opt.step()
    for p, q in zip(model.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)
    records = call.compiler.records
    assert records and all(len(r.graphs) == 1 and not r.breaks for r in records)
    ops = {n.target for r in records for g in r.graphs for n in g.graph.nodes}
    assert torch.ops.aten._local_scalar_dense.default not in ops and "item" not in map(str, ops)
