"""A compiled graph as plain data and back (ember_codegen.artifact, the C++ half): the
payload is JSON-able once the caller has encoded the wrapper's constants, the rebuilt graph
computes what the original did, and what cannot be rebuilt raises NotRestorable (the
umbrella's cache then compiles afresh) instead of failing."""

from __future__ import annotations

import json

import pytest
import torch

from ember_codegen.artifact import NotRestorable, from_payload, to_payload
from ember_primops import prims


class _Refs:
    """An encoding that keeps each constant in a list and writes its position: a round trip
    within the process, whatever the wrapper holds."""

    def __init__(self) -> None:
        self.values: list = []

    def encode(self, value: object) -> list:
        self.values.append(value)
        return ["ref", len(self.values) - 1]

    def decode(self, data: list) -> object:
        return self.values[data[1]]


def _fn(a, b):
    return (prims.mul(prims.exp(prims.add(a, b)), b),)


@pytest.fixture
def compiled_graph(compile_prims, tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))  # where loads compile
    inputs = [torch.randn(4, 8), torch.randn(4, 8)]
    _, compiled = compile_prims(_fn, *inputs)
    return compiled, inputs


def test_a_cpp_graph_round_trips_through_plain_data(compiled_graph, tmp_path):
    compiled, inputs = compiled_graph
    assert compiled.target == "cpp" and compiled.source == compiled.cpp_source
    refs = _Refs()
    payload = json.loads(json.dumps(to_payload(compiled, refs.encode)))
    assert payload["target"] == "cpp" and payload["cpp_source"] == compiled.source
    rebuilt = from_payload(payload, refs.decode, str(tmp_path / "wrapper.py"))
    assert rebuilt.target == "cpp" and rebuilt.source == compiled.source
    assert rebuilt.wrapper_source == compiled.wrapper_source
    (want,) = _fn(*inputs)
    torch.testing.assert_close(rebuilt(inputs)[0], want)


def test_a_payload_without_a_target_is_a_cpp_one(compiled_graph, tmp_path):
    compiled, inputs = compiled_graph
    refs = _Refs()
    payload = to_payload(compiled, refs.encode)
    del payload["target"]  # entries written before the target was recorded
    rebuilt = from_payload(payload, refs.decode, str(tmp_path / "wrapper.py"))
    torch.testing.assert_close(rebuilt(inputs)[0], _fn(*inputs)[0])


def test_what_cannot_be_rebuilt_is_not_restorable(compiled_graph, tmp_path):
    compiled, _ = compiled_graph
    refs = _Refs()
    payload = to_payload(compiled, refs.encode)
    origin = str(tmp_path / "wrapper.py")
    with pytest.raises(NotRestorable, match="unknown target 'metal'"):
        from_payload({**payload, "target": "metal"}, refs.decode, origin)
    incomplete = {k: v for k, v in payload.items() if k != "kernels"}
    with pytest.raises(NotRestorable, match="without 'kernels'"):
        from_payload(incomplete, refs.decode, origin)
    with pytest.raises(NotRestorable, match="not a compiled graph"):
        to_payload(object(), refs.encode)
