"""Queries of thread/process state answered at trace time (the profiler, deterministic mode,
cuDNN and SDPA flags, the default dtype...): the graph depends on the answer, so a later call
under the other state must retrace rather than reuse it (variables/torch_functions.py)."""

from __future__ import annotations

import contextlib

import pytest
import torch

from conftest import Compiled, same


@contextlib.contextmanager
def _switched(setter, on, off):
    setter(on)
    try:
        yield
    finally:
        setter(off)


def _profiling():
    return torch.autograd.profiler.profile()


def _deterministic():
    return _switched(torch.use_deterministic_algorithms, True, False)


def _cudnn_off():
    return _switched(torch._C._set_cudnn_enabled, False, True)


def _float64_default():
    return _switched(torch.set_default_dtype, torch.float64, torch.float32)


def _flash_sdp_off():
    return _switched(torch.backends.cuda.enable_flash_sdp, False, True)


def _anomaly_mode():
    return _switched(torch.set_anomaly_enabled, True, False)


CASES = {
    "profiler": (torch.autograd._profiler_enabled, _profiling),
    "deterministic": (torch.are_deterministic_algorithms_enabled, _deterministic),
    "cudnn": (lambda: not torch._C._get_cudnn_enabled(), _cudnn_off),
    "default_dtype": (lambda: torch.get_default_dtype() == torch.float64, _float64_default),
    "flash_sdp": (lambda: not torch.backends.cuda.flash_sdp_enabled(), _flash_sdp_off),
    "anomaly": (torch.is_anomaly_enabled, _anomaly_mode),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_state_query_is_guarded(name):
    query, switched_on = CASES[name]

    def fn(x):
        if query():
            return x + 1
        return x - 1

    x = torch.ones(3)
    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(x), fn(x))
    with switched_on():
        assert query()
        assert same(compiled(x), fn(x))  # reusing the first graph would answer x - 1
    assert compiled.backend.graph_count == 2
    assert same(compiled(x), fn(x))  # back to the first state: its graph again
    assert compiled.backend.graph_count == 2


def test_states_the_trace_switches_are_not_guarded_at_their_inner_value():
    # Grad mode and autocast entered inside the trace are real at trace time; a guard on
    # the answer inside the block would never hold at frame entry (a recompile each call).
    def fn(x):
        with torch.no_grad():
            y = x * 2 if not torch.is_grad_enabled() else x
        with torch.autocast("cpu", dtype=torch.bfloat16):
            if torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu"):
                y = y + 1
        return y

    x = torch.ones(3)
    compiled = Compiled(fn, fullgraph=True)
    for _ in range(3):
        assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1


def test_pure_dtype_functions_fold_without_a_guard():
    def fn(x):
        return x.to(torch.promote_types(torch.float16, torch.float32))

    x = torch.ones(3, dtype=torch.float16)
    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(x), fn(x))
    assert compiled(x).dtype == torch.float32
    assert compiled.backend.graph_count == 1


def test_a_query_read_again_after_the_trace_changed_the_state_is_not_reguarded():
    # The inner context reads the message the outer one set: guarding that second answer
    # at frame entry would never hold (a retrace on every call).
    disable = torch.autograd.graph.disable_saved_tensors_hooks

    def fn(x):
        with disable("outer"):
            with disable("inner"):
                y = x * 2
            return y + 1

    x = torch.randn(3)
    compiled = Compiled(fn, fullgraph=True)
    for _ in range(3):
        assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1
    with disable("already"):  # the first answer (None: enabled) is guarded
        assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 2
    assert torch._C._autograd._saved_tensors_hooks_get_disabled_error_message() is None


class _Doubling(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out * 2 if func is torch.add else out


def test_torch_assert_on_a_python_bool_stays_in_one_graph_and_guards_function_modes():
    # torch._assert(cond, msg) asks has_torch_function((cond,)) of a constant: that once
    # broke every timm block with a shape assertion (efficientnet_b0: 38 graphs)
    def fn(x):
        y = torch.relu(x)
        torch._assert(x.shape[0] == 3, "three rows")
        return torch.add(y, 1)

    compiled = Compiled(fn)
    x = torch.randn(3, 2)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1 and not compiled.breaks
    with _Doubling():  # a torch-function mode on: has_torch_function answers otherwise
        expected = fn(x)
    with _Doubling():
        got = compiled(x)
    assert same(got, expected)
