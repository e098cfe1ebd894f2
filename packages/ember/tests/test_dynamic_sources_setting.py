"""ember.config.dynamic_sources: inputs named by the user are symbolic from the first compile,
through ember.compile, with the default inductor backend and a recording one."""

from __future__ import annotations

import pytest
import torch

import ember
from conftest import RecordingBackend


@pytest.fixture
def named(request):
    ember.config.dynamic_sources = request.param
    yield request.param
    ember.config.dynamic_sources = ""


def affine(x, n):
    return (x * n).sin() + n


@pytest.mark.parametrize("named", ["L['x'], L['n']"], indirect=True)
@pytest.mark.parametrize("backend", ["inductor", "recording"])
def test_named_inputs_compile_once_for_every_size(named, backend):
    recorder = RecordingBackend()
    compiled = ember.compile(affine, backend=recorder if backend == "recording" else backend,
                             dynamic=False)  # fmt: skip
    for b in (3, 5, 8):
        x = torch.randn(b, 4)
        torch.testing.assert_close(compiled(x, b), affine(x, b))
    if backend == "recording":
        assert len(recorder.graphs) == 1
    else:
        assert ember.counters["inductor"]["forward_graphs"] == 1
        assert ember.counters["inductor"]["forward_runs"] == 3


class Head(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = torch.nn.Linear(d, 2)

    def forward(self, x):
        return self.lin(x).relu()


@pytest.mark.parametrize("named", ["L['self'].lin.weight:1, L['x']:1"], indirect=True)
def test_named_parameter_of_a_module(named):
    recorder = RecordingBackend()
    for d in (3, 4, 6):
        model = Head(d)
        compiled = ember.compile(model.forward, backend=recorder)
        x = torch.randn(2, d)
        torch.testing.assert_close(compiled(x), model(x))
    assert len(recorder.graphs) == 1


def test_setting_is_a_string_of_names():
    assert ember.config.dynamic_sources == ""
    with pytest.raises(AttributeError, match="no setting"):
        ember.config.dynamic_source = "L['x']"


@pytest.mark.parametrize("backend", ["inductor", "recording"])
def test_a_marked_dim_the_program_fixes_fails_as_a_runtime_error(backend):
    recorder = RecordingBackend()
    compiled = ember.compile(torch.mul, backend=recorder if backend == "recording" else backend)
    x, y = torch.ones(5, 5), torch.randn(5, 5)
    ember.mark_dynamic(x, 1)
    with pytest.raises(RuntimeError, match="specialized"):
        compiled(x, y)  # broadcasting against y pins x's dim 1 to 5
    assert recorder.graphs == []
    other = torch.randn(5, 5)
    torch.testing.assert_close(compiled(other, y), torch.mul(other, y))  # unmarked: compiles
