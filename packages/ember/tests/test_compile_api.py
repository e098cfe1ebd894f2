"""ember.compile as a function, decorator and on modules; backends; bad input; modes."""

from __future__ import annotations

import logging

import pytest
import torch
from torch import nn

import ember
import ember_frame_hook as fh
from conftest import RecordingBackend

x = torch.randn(4, 3)


def fn(a):
    return torch.relu(a) * 2


def test_compile_function_with_a_callable_backend():
    backend = RecordingBackend()
    compiled = ember.compile(fn, backend=backend)
    assert torch.equal(compiled(x), fn(x))
    assert len(backend.graphs) == 1
    assert compiled.__name__ == "fn" and compiled.__wrapped__ is fn


def test_decorator_forms():
    backend = RecordingBackend()

    @ember.compile(backend=backend)
    def g(a):
        return a.sin()

    @ember.compile
    def h(a):
        return a.cos()

    assert torch.equal(g(x), x.sin())
    torch.testing.assert_close(h(x), x.cos())  # default backend: inductor, C++ kernels
    assert len(backend.graphs) == 1
    assert ember.counters["inductor"]["forward_runs"] == 1


def test_compiled_module_shares_parameters_and_attributes():
    model = nn.Linear(3, 2)
    compiled = ember.compile(model)
    assert isinstance(compiled, nn.Module) and isinstance(compiled, ember.OptimizedModule)
    assert compiled.weight is model.weight and compiled.in_features == 3
    assert set(p for p in compiled.parameters()) == set(model.parameters())
    assert torch.equal(compiled(x), model(x))


def test_backend_registry():
    assert "eager" in ember.list_backends()
    eager = ember.lookup_backend("eager")
    assert callable(eager)

    @ember.register_backend("test_double_check")
    def named(gm, example_inputs):
        return gm.forward

    assert ember.lookup_backend("test_double_check") is named
    assert torch.equal(ember.compile(fn, backend="test_double_check")(x), fn(x))


def test_ember_backend_works_under_torch_compile():
    compiled = torch.compile(fn, backend=ember.lookup_backend("eager"))
    assert torch.equal(compiled(x), fn(x))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"backend": "no_such_backend"}, "unknown backend"),
        ({"backend": 3}, "name or a callable"),
        ({"fullgraph": "yes"}, "fullgraph"),
        ({"mode": "fastest"}, "mode"),
        ({"dynamic": "yes"}, "dynamic"),
        ({"options": [1]}, "options"),
    ],
)
def test_bad_arguments_raise_typed_errors(kwargs, message):
    with pytest.raises(ember.exc.EmberError, match=message):
        ember.compile(fn, **kwargs)


def test_bad_model_raises():
    with pytest.raises(ember.exc.EmberError, match=r"function or nn\.Module"):
        ember.compile(42)

    async def coro():
        return 1

    with pytest.raises(ember.exc.EmberError, match="async"):
        ember.compile(coro)


def test_config_rejects_unknown_settings():
    with pytest.raises(AttributeError, match="no setting"):
        ember.config.cache_limit = 3


def test_disable_returns_the_original():
    assert ember.compile(fn, disable=True) is fn


def test_disable_decorator_and_context():
    backend = RecordingBackend()

    @ember.disable
    def plain(a):
        return a.exp()

    compiled = ember.compile(lambda a: plain(a) + 1, backend=backend)
    compiled(x)
    assert all("exp" not in gm.code for gm in backend.graphs)
    with ember.disable():
        assert fh.get_eval_frame() is None


def test_run_only_mode_uses_cache_and_compiles_nothing_new():
    backend = RecordingBackend()
    compiled = ember.compile(fn, backend=backend)
    compiled(x)
    fh.set_cache_limit(8)
    with ember.run():
        assert fh.get_eval_frame() is False
        assert torch.equal(fn(x), torch.relu(x) * 2)  # cached entry runs
        fn(torch.randn(5))  # new shape: original code, no compile
    assert len(backend.graphs) == 1


def test_fullgraph_error_names_file_and_line():
    def breaks(a):
        b = a + 1
        print("no")
        return b

    compiled = ember.compile(breaks, fullgraph=True)
    with pytest.raises(ember.exc.Unsupported) as info:
        compiled(x)
    line = breaks.__code__.co_firstlineno + 2
    assert f"{__file__}:{line}" in str(info.value)


def test_backend_failure_is_typed_and_can_be_suppressed(caplog):
    def broken(gm, example_inputs):
        raise ValueError("backend exploded")

    with pytest.raises(ember.exc.BackendCompilerFailed, match="backend exploded"):
        ember.compile(fn, backend=broken)(x)
    ember.reset()
    ember.config.suppress_errors = True
    try:
        with caplog.at_level(logging.WARNING):
            assert torch.equal(ember.compile(fn, backend=broken)(x), fn(x))
    finally:
        ember.config.suppress_errors = False


def test_backend_returning_non_callable_is_typed():
    with pytest.raises(ember.exc.BackendCompilerFailed, match="not a callable"):
        ember.compile(fn, backend=lambda gm, ex: 42)(x)


def test_reset_forgets_compiled_code():
    backend = RecordingBackend()
    compiled = ember.compile(fn, backend=backend)
    compiled(x)
    ember.reset()
    compiled(x)
    assert len(backend.graphs) == 2


def test_same_function_compiled_for_two_backends_uses_each():
    first, second = RecordingBackend(), RecordingBackend()
    a = ember.compile(fn, backend=first)
    b = ember.compile(fn, backend=second)
    a(x)
    b(x)
    a(x)
    assert len(first.graphs) == 1 and len(second.graphs) == 1


def _layer(a, w):
    return torch.tanh(a @ w) * 2 - a


@pytest.mark.parametrize("backend", ["inductor", "eager", "aot_eager"])
def test_two_compiles_of_one_function_share_code(backend):
    """torch.compile reuses a code object's entry for a second wrapper with the same backend;
    so does ember.compile: one compile, both equal to eager."""
    a, w = torch.randn(8, 8), torch.randn(8, 8)
    first, second = ember.compile(_layer, backend=backend), ember.compile(_layer, backend=backend)
    torch.testing.assert_close(first(a, w), _layer(a, w))
    torch.testing.assert_close(second(a, w), _layer(a, w))
    assert len(first._ember_compiler.records) == 1
    assert second._ember_compiler.records == [] and len(second._ember_compiler.reused) == 1
    other = ember.compile(_layer, backend="eager" if backend != "eager" else "inductor")
    torch.testing.assert_close(other(a, w), _layer(a, w))
    assert len(other._ember_compiler.records) == 1  # another backend compiles its own
    strict = ember.compile(_layer, backend=backend, fullgraph=True)
    torch.testing.assert_close(strict(a, w), _layer(a, w))
    assert len(strict._ember_compiler.records) == 1  # other options: its own too


def test_compiles_with_one_mode_share_code():
    """A named backend configured by mode/options is equal for equal settings (torch.compile's
    inductor wrapper compares by its configuration too); other settings compile their own."""
    a, w = torch.randn(8, 8), torch.randn(8, 8)
    first = ember.compile(_layer, mode="max-autotune-no-cudagraphs")
    second = ember.compile(_layer, mode="max-autotune-no-cudagraphs")
    torch.testing.assert_close(first(a, w), _layer(a, w))
    torch.testing.assert_close(second(a, w), _layer(a, w))
    assert len(first._ember_compiler.records) == 1 and second._ember_compiler.records == []
    plain = ember.compile(_layer)
    torch.testing.assert_close(plain(a, w), _layer(a, w))
    assert len(plain._ember_compiler.records) == 1
