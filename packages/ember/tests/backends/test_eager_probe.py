"""A stage failing on a graph that eager refuses too: the call raises eager's exception (same
type, same message, when the function is called), never BackendCompilerFailed; a stage
failing on a graph eager runs is still a BackendCompilerFailed. Cases from the tracer
fuzzer (seeds 1:75, 1:98, 1:149)."""

from __future__ import annotations

import pytest
import torch

import ember
from ember.backends.eager_fallback import eager_on_limitation
from ember.backends.eager_probe import eager_error
from ember.exc import BackendCompilerFailed
from ember_bytecode_tracer import eager_checks

BACKENDS = ["aot_eager", "inductor"]


def _float_at_double_vector(a, b):  # fuzz 1:75
    return {"a": a @ b, "b": (a @ b) * 2}


def _softmax_of_int64(x):  # fuzz 1:98
    return torch.softmax(x, dim=-1) * 2


def _long_at_double_vector(a, b):  # fuzz 1:149
    return (a @ b).reshape(-1)


def _float_at_double_matrix(a, b):
    return torch.relu(a @ b)


CASES = {
    "float@double_vector": (
        _float_at_double_vector,
        lambda: (torch.randn(3, 4), torch.randn(4, dtype=torch.float64)),
    ),
    "long@double_vector": (
        _long_at_double_vector,
        lambda: (torch.arange(12).reshape(3, 4), torch.randn(4, dtype=torch.float64)),
    ),
    "float@double_matrix": (
        _float_at_double_matrix,
        lambda: (torch.randn(3, 4, requires_grad=True), torch.randn(4, 2, dtype=torch.float64)),
    ),
}


def _raised(fn, *args) -> BaseException:
    with pytest.raises(Exception) as info:
        fn(*args)
    return info.value


@pytest.fixture
def backend_sees_matrix_products(monkeypatch):
    # the tracer's table of eager-only checks breaks mixed-dtype matrix products before any
    # backend sees them (fuzz 3001:2431); without those entries, the cases below reach the
    # backend stages and exercise the probe
    aten = torch.ops.aten
    for op in (aten.mm, aten.mv, aten.addmm, aten.addmm_, aten.addmv, aten.addmv_, aten.addbmm):
        monkeypatch.delitem(eager_checks.CHECKS, op)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.usefixtures("backend_sees_matrix_products")
def test_eager_refusals_raise_eagers_exception(backend, case):
    fn, make = CASES[case]
    expected = _raised(fn, *make())
    compiled = ember.compile(fn, backend=backend)
    for _ in range(2):  # the first call compiles, the second runs what was installed
        got = _raised(compiled, *make())
        assert not isinstance(got, BackendCompilerFailed)
        assert type(got) is type(expected)
        assert str(got) == str(expected)
    assert ember.counters["eager_errors"][type(expected).__name__] == 1
    assert not ember.counters[backend]["forward_runs"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_refusals_the_tracer_knows_break_before_the_backend(backend):
    # softmax of int64: the tracer's table of eager-only checks (eager_checks.py) breaks the
    # graph before the call, so eager raises it; no backend ever sees the refused op
    x = torch.arange(6).reshape(2, 3)
    expected = _raised(_softmax_of_int64, x)
    got = _raised(ember.compile(_softmax_of_int64, backend=backend), x)
    assert type(got) is type(expected) and str(got) == str(expected)
    assert not ember.counters["eager_errors"]
    assert not ember.counters[backend]["forward_runs"]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("backend", BACKENDS)
def test_mixed_dtype_matrix_products_break_before_the_backend(backend, case):
    fn, make = CASES[case]
    expected = _raised(fn, *make())
    got = _raised(ember.compile(fn, backend=backend), *make())
    assert type(got) is type(expected) and str(got) == str(expected)
    assert not ember.counters["eager_errors"]
    assert not ember.counters[backend]["forward_runs"]


@pytest.mark.usefixtures("backend_sees_matrix_products")
def test_an_input_written_before_the_error_is_written_as_in_eager():
    def f(x, v):
        x.add_(1)
        return x @ v

    x, v = torch.zeros(2, 3), torch.ones(3, dtype=torch.float64)
    expected = _raised(f, x.clone(), v)
    got = _raised(ember.compile(f, backend="aot_eager"), x, v)
    assert type(got) is type(expected) and str(got) == str(expected)
    assert x.tolist() == [[1.0] * 3] * 2  # eager's write happened once, before the error


@pytest.mark.usefixtures("backend_sees_matrix_products")
def test_the_probe_changes_nothing_the_user_sees():
    def f(x, w):
        w.mul_(2)  # an in-place write to a graph input
        x.add_(torch.rand(3))  # a random draw
        return x @ torch.ones(3, dtype=torch.float64)

    gm = torch.fx.symbolic_trace(f)
    x, w = torch.zeros(3), torch.ones(3)
    state = torch.get_rng_state()
    error = eager_error(gm, [x, w])
    assert isinstance(error, RuntimeError)
    assert x.tolist() == [0.0] * 3 and w.tolist() == [1.0] * 3
    assert torch.equal(torch.get_rng_state(), state)
    assert eager_error(torch.fx.symbolic_trace(lambda x: x + 1), [x]) is None


def test_a_stage_bug_on_a_graph_eager_runs_is_a_backend_failure():
    def broken(gm, example_inputs):
        raise RuntimeError("a bug in a stage")

    with pytest.raises(BackendCompilerFailed, match="a bug in a stage"):
        ember.compile(lambda x: x + 1, backend=eager_on_limitation("test", broken))(torch.ones(2))
    assert not ember.counters["eager_errors"]


def test_a_later_variant_failing_where_eager_fails_raises_eagers_error():
    calls = []

    def compile_fn(gm, example_inputs):
        def run(*args):
            calls.append(args)
            if len(calls) > 1:  # as aot_module tracing a new variant on a call
                raise RuntimeError("stage's own words")
            return gm(*args)

        return run

    gm = torch.fx.symbolic_trace(lambda x, y: x @ y)
    run = eager_on_limitation("test", compile_fn)(gm, [torch.ones(2), torch.ones(2)])
    assert run(torch.ones(2), torch.ones(2)).item() == 2.0
    with pytest.raises(RuntimeError, match="same dtype"):  # eager's error, not the stage's
        run(torch.ones(2), torch.ones(2, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="stage's own words"):  # eager runs: a stage bug
        run(torch.ones(2), torch.ones(2))
    assert dict(ember.counters["eager_errors"]) == {"RuntimeError": 1}
