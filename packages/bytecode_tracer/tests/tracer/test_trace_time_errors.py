"""A Python error raised while tracing an instruction (`range(2.0)`, a builtin refusing its
arguments) is a graph break before it: the graph and the writes of the code before it run,
then the instruction raises eager's own error (fuzz 2026:3972: the tracer's TypeError escaped
before `w.add_(...)` had run, so the caller saw another exception and an unwritten tensor)."""

from __future__ import annotations

import pytest
import torch

from conftest import Compiled
from ember_bytecode_tracer.exc import Unsupported


def _write_then_range(w, n):
    w.mul_(2)
    for _ in range(n):
        w.add_(1)
    return w


def _helper_range(n):
    return list(range(n))


def _write_then_inlined_error(w, n):
    w.mul_(2)
    steps = _helper_range(n)
    return w + len(steps)


def _overlapping_write_then_range(w, n):
    w.add_(w[0])  # eager refuses this first
    for _ in range(n):
        pass
    return w


@pytest.mark.parametrize("fn", [_write_then_range, _write_then_inlined_error])
def test_writes_before_a_trace_time_error_are_applied_and_eagers_error_raised(fn):
    compiled = Compiled(fn)
    w_eager, w = torch.arange(4.0), torch.arange(4.0)
    assert torch.equal(compiled(w.clone(), 3), fn(w_eager.clone(), 3))  # an int: no break
    with pytest.raises(TypeError) as eager:
        fn(w_eager, 2.0)
    with pytest.raises(TypeError) as got:
        compiled(w, 2.0)
    assert str(got.value) == str(eager.value)
    assert torch.equal(w, w_eager)  # the write before the error happened
    assert any("TypeError raised at trace time" in b.reason for b in compiled.breaks)
    assert compiled.backend.graph_count >= 1


def test_the_first_error_eager_raises_is_the_one_raised():
    compiled = Compiled(_overlapping_write_then_range)
    with pytest.raises(RuntimeError, match="single memory location"):
        _overlapping_write_then_range(torch.arange(4.0), 2.0)
    with pytest.raises(RuntimeError, match="single memory location"):
        compiled(torch.arange(4.0), 2.0)


def test_under_fullgraph_the_error_names_the_line():
    compiled = Compiled(_write_then_range, fullgraph=True)
    with pytest.raises(Unsupported, match="TypeError raised at trace time") as got:
        compiled(torch.arange(4.0), 2.0)
    assert "test_trace_time_errors.py" in str(got.value)


def test_an_op_failing_on_example_values_is_a_runtime_error_as_in_eager():
    """A shape mismatch: without fullgraph the break lets eager raise its own RuntimeError;
    with fullgraph=True the caller still catches a RuntimeError naming it (issue 26)."""
    weight = torch.randn(3, 4)

    def fn(x):
        return torch.mm(x, weight) + 1

    bad = torch.randn(2, 5)
    with pytest.raises(RuntimeError) as eager:
        fn(bad)
    with pytest.raises(RuntimeError) as broken:
        Compiled(fn)(bad)
    assert str(broken.value) == str(eager.value)
    with pytest.raises(RuntimeError, match="fullgraph") as strict:
        Compiled(fn, fullgraph=True)(bad)
    assert "mm" in str(strict.value)
