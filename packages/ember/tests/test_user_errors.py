"""What users read when Ember refuses something: their line, why, a hint, no internal names."""

from __future__ import annotations

import traceback

import pytest
import torch

import ember
from ember.env_settings import check_environment
from ember.exc import ConfigurationError, EmberError, Unsupported

BACKENDS = ["eager", "inductor"]


def _branchy(x):
    y = x * 2
    if x.sum() > 0:  # the data-dependent branch
        return y + 1
    return y - 1


def _reads_item(x):
    v = x.sum().item()
    return x * v


@pytest.mark.parametrize("backend", BACKENDS)
def test_fullgraph_branch_shows_line_why_and_hint(backend, monkeypatch):
    monkeypatch.delenv("EMBER_LOGS", raising=False)
    with pytest.raises(Unsupported) as info:
        ember.compile(_branchy, fullgraph=True, backend=backend)(torch.randn(4))
    message = str(info.value)
    line = _branchy.__code__.co_firstlineno + 2
    assert f'File "{__file__}", line {line}, in _branchy' in message
    assert "if x.sum() > 0:  # the data-dependent branch" in message
    assert "Why: the branch taken depends on a tensor's values" in message
    assert "torch.where" in message and "drop fullgraph=True" in message
    # the traceback stops where the user called the compiled function
    frames = traceback.extract_tb(info.value.__traceback__)
    assert len(frames) <= 2, frames
    assert not any("bytecode_tracer" in f.filename or "progress" in f.filename for f in frames)


def test_full_chain_under_ember_logs_plus_all(monkeypatch):
    monkeypatch.setenv("EMBER_LOGS", "+all")
    with pytest.raises(Unsupported) as info:
        ember.compile(_branchy, fullgraph=True, backend="eager")(torch.randn(4))
    frames = traceback.extract_tb(info.value.__traceback__)
    assert any("convert_frame" in f.filename for f in frames)


def test_fullgraph_item_hint():
    with pytest.raises(Unsupported) as info:
        ember.compile(_reads_item, fullgraph=True, backend="eager")(torch.randn(4))
    message = str(info.value)
    assert "v = x.sum().item()" in message
    assert "reads a tensor's data into a Python value" in message
    assert "keep the value a tensor" in message


def test_hints_are_a_table_keyed_by_kind():
    from ember_bytecode_tracer.exc import Unsupported as TracerUnsupported
    from ember_bytecode_tracer.user_errors import HINTS, kind_of

    assert {"data_dependent_branch", "tensor_value_read", "side_effect_builtin"} <= set(HINTS)
    assert kind_of(TracerUnsupported("call to builtin print()")) == "side_effect_builtin"
    assert kind_of(TracerUnsupported("Tensor.tolist() reads tensor data into Python")) == (
        "tensor_value_read"
    )
    assert kind_of(TracerUnsupported("anything", kind="data_dependent_branch")) == (
        "data_dependent_branch"
    )


def _no_internal_names(text: str) -> None:
    for name in ("___ember_stack", "__resume_at", "staged_backend"):
        assert name not in text, text


@pytest.mark.parametrize("backend", BACKENDS)
def test_item_break_recompile_reason_and_resume_names(backend):
    compiled = ember.compile(_reads_item, backend=backend)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), _reads_item(x))
    y = torch.randn(4) + 3
    torch.testing.assert_close(compiled(y), _reads_item(y))
    records = compiled._ember_compiler.records
    assert len(records) == 3  # g, its resume function, the resume again for the new value
    line = _reads_item.__code__.co_firstlineno + 1
    assert records[1].code.co_name == f"resume_in__reads_item_at_{line}"
    reason = records[2].recompile_reason
    assert f"graph break into {__file__}:{line}" in reason
    text = "\n".join([reason] + [
        g.describe() for g in records[2].guards.guards
    ])  # fmt: skip
    _no_internal_names(text)
    explained = str(ember.explain(_reads_item, backend="eager")(x))
    _no_internal_names(explained)


def test_backend_failure_names_the_users_backend():
    def my_backend(gm, example_inputs):
        raise RuntimeError("boom")

    with pytest.raises(ember.exc.BackendCompilerFailed) as info:
        ember.compile(lambda x: x.sin() + 1, backend=my_backend)(torch.randn(3))
    assert "backend 'my_backend' failed" in str(info.value)
    _no_internal_names(str(info.value))


def test_cache_dir_that_is_a_file_names_the_setting(tmp_path, monkeypatch):
    path = tmp_path / "afile"
    path.write_text("")
    monkeypatch.setenv("EMBER_CACHE_DIR", str(path))
    with pytest.raises(ConfigurationError) as info:
        ember.compile(lambda x: x.sin() + 1)(torch.randn(3))
    assert isinstance(info.value, EmberError)
    assert str(info.value) == (
        f"EMBER_CACHE_DIR={path} is a file, not a directory: set it to a directory or unset it"
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("EMBER_COMPILE_WORKERS", "many"),
        ("EMBER_CPU_POOL_MB", "-3"),
        ("EMBER_NATIVE_GUARDS", "yes"),
        ("EMBER_CHANNELS_LAST", "maybe"),
        ("EMBER_TRITON_MATMUL", "fast"),
    ],
)
def test_malformed_settings_name_themselves(name, value):
    with pytest.raises(ConfigurationError, match=f"^{name}='{value}' .*unset it"):
        check_environment({name: value})


def test_ember_logs_typo_is_a_configuration_error(monkeypatch):
    monkeypatch.setenv("EMBER_LOGS", "graphs")
    with pytest.raises(ConfigurationError, match="EMBER_LOGS"):
        ember.compile(lambda x: x + 1)


def _helper(x):
    return x.sin() * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_generator_function_runs(backend):
    ember.reset()

    def gen(x):
        yield x + 1
        got = yield _helper(x)
        yield x * 2 if got is None else x * got
        return "done"

    compiled = ember.compile(gen, backend=backend)
    x = torch.randn(3)
    for a, b in zip(compiled(x), gen(x), strict=True):
        torch.testing.assert_close(a, b)
    # send and return values pass through
    it = compiled(x)
    next(it), next(it)
    torch.testing.assert_close(it.send(3.0), x * 3.0)
    with pytest.raises(StopIteration) as stop:
        next(it)
    assert stop.value.value == "done"
    # the functions it calls are compiled
    assert any(r.code is _helper.__code__ for r in compiled._ember_compiler.records)
