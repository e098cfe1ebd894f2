"""What ember.compile is handed and where it is called, as torch.compile treats them:

- a callable without a Python frame of its own (an OpOverload, a C function such as
  torch.sin, a torch function the tracer runs as torch's own such as F.gelu) is called from
  an entry frame Ember traces: one graph holding the call, not an uncompiled call;
- while a user's TorchDispatchMode is on the stack, frames run as they are (a trace would run
  the mode's __torch_dispatch__ on fake tensors): the mode sees each real op once, as in
  eager, and nothing is cached; after the mode, the function compiles as usual.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import ember
from conftest import RecordingBackend

C_CALLABLES = [
    pytest.param(torch.ops.aten.mul.Tensor, (2,), id="opoverload"),
    pytest.param(torch.sin, (), id="c_function"),
    pytest.param(F.gelu, (), id="torch_python_function"),
]


@pytest.mark.parametrize(("fn", "extra"), C_CALLABLES)
def test_a_callable_without_a_frame_compiles_to_one_graph(fn, extra):
    backend = RecordingBackend()
    compiled = ember.compile(fn, backend=backend, fullgraph=True)
    x = torch.randn(6)
    args = (x, torch.full((6,), extra[0])) if extra else (x,)
    assert torch.equal(compiled(*args), fn(*args))
    assert len(backend.graphs) == 1


@pytest.mark.parametrize(("fn", "extra"), C_CALLABLES)
def test_a_callable_without_a_frame_under_inductor(fn, extra):
    compiled = ember.compile(fn, fullgraph=True)
    x = torch.randn(6)
    args = (x, torch.full((6,), extra[0])) if extra else (x,)
    torch.testing.assert_close(compiled(*args), fn(*args))
    assert ember.counters["inductor"]["forward_runs"] == 1


class OpLog(TorchDispatchMode):
    """A user's mode: logs each aten op it sees."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def body(x):
    return (x.sin() * 3).relu()


@pytest.mark.parametrize("backend", ["recording", "inductor"])
def test_a_user_dispatch_mode_runs_frames_as_they_are(backend):
    chosen = RecordingBackend() if backend == "recording" else backend
    compiled = ember.compile(body, backend=chosen)
    x = torch.randn(5)
    with OpLog() as eager_log:
        expected = body(x)
    with OpLog() as compiled_log:
        got = compiled(x)
    torch.testing.assert_close(got, expected)
    assert compiled_log.ops == eager_log.ops  # each real op once, none at trace time
    assert not compiled._ember_compiler.records
    torch.testing.assert_close(compiled(x), expected)  # no mode: compiled as usual
    assert len(compiled._ember_compiler.records) == 1
