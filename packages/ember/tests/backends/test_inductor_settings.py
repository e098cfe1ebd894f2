"""ember.compile(mode=..., options=...) reaches the inductor backend as InductorSettings;
bad modes and options are typed errors raised by ember.compile itself."""

from __future__ import annotations

import pytest
import torch

import ember
from ember.backends.inductor_settings import InductorSettings, inductor_settings
from ember.backends.inductor_target import codegen_target
from ember.backends.inductor_target import target_of as _target_of
from ember.exc import EmberError, InvalidBackendError


def fn(x):
    return torch.relu(x) * 2 + 1


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (None, InductorSettings()),
        ("default", InductorSettings()),
        ("reduce-overhead", InductorSettings(cudagraphs=True)),
        ("max-autotune", InductorSettings(autotune=True, cudagraphs=True)),
        ("max-autotune-no-cudagraphs", InductorSettings(autotune=True)),
    ],
)
def test_modes_map_to_settings(mode, expected, monkeypatch):
    monkeypatch.delenv("EMBER_INDUCTOR_TARGET", raising=False)
    assert inductor_settings(mode) == expected


def test_options_override_the_mode(monkeypatch):
    monkeypatch.delenv("EMBER_INDUCTOR_TARGET", raising=False)
    settings = inductor_settings("max-autotune", {"triton.cudagraphs": False, "target": "cpp"})
    assert settings == InductorSettings(target="cpp", autotune=True, cudagraphs=False)


def test_environment_forces_the_target(monkeypatch):
    monkeypatch.setenv("EMBER_INDUCTOR_TARGET", "triton")
    assert inductor_settings().target == "triton"
    monkeypatch.setenv("EMBER_INDUCTOR_TARGET", "cuda")
    with pytest.raises(EmberError, match="EMBER_INDUCTOR_TARGET must be one of"):
        inductor_settings()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"backend": "eager", "mode": "reduce-overhead"}, "settings of a named backend"),
        ({"backend": "aot_eager", "options": {"max_autotune": True}}, "not of 'aot_eager'"),
        ({"options": {"bogus": 1}}, "unknown inductor option 'bogus'"),
        ({"options": {"target": "cuda"}}, r"options\['target'\] must be one of"),
        ({"options": {"max_autotune": 1}}, "must be True or False"),
        ({"mode": "fastest"}, "mode must be one of"),
    ],
)
def test_bad_mode_or_options_raise_at_compile(kwargs, message):
    with pytest.raises(EmberError, match=message):
        ember.compile(fn, **kwargs)


def test_settings_error_type_for_other_backends():
    with pytest.raises(InvalidBackendError):
        ember.compile(fn, backend="eager", options={"target": "cpp"})


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune-no-cudagraphs"])
def test_cpu_graphs_compile_and_match_eager_under_every_mode(mode, monkeypatch, tmp_path):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("EMBER_INDUCTOR_TARGET", raising=False)
    x = torch.randn(16)
    compiled = ember.compile(fn, mode=mode)
    torch.testing.assert_close(compiled(x), fn(x))
    assert ember.counters["inductor"]["forward_graphs"] == 1
    assert ember.counters["inductor"]["kernels"] == 1
    assert not ember.counters["cudagraphs"]  # CUDA graphs apply to GPU graphs only


def test_target_follows_devices_unless_forced():
    assert _target_of({"cpu"}) == "cpp"
    assert _target_of({"cuda"}) == "triton"
    assert _target_of({"cpu"}, InductorSettings(target="triton")) == "triton"
    with pytest.raises(EmberError, match="target 'cpp' compiles CPU graphs"):
        _target_of({"cuda"}, InductorSettings(target="cpp"))
    assert _target_of({"cpu", "cuda"}) == "triton"  # CPU scalars of a GPU graph
    gm = torch.fx.symbolic_trace(fn)
    assert codegen_target(gm) == "cpp"  # no example values: the CPU target
