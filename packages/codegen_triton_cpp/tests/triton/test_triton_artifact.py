"""A compiled Triton graph as plain data and back through ember_codegen.artifact (the Triton
half), in the CPU interpreter: the rebuilt graph computes what the original did."""

from __future__ import annotations

import json

import torch

from ember_codegen.artifact import from_payload, to_payload
from ember_primops import prims


def _fn(a, b):
    return (prims.sum(prims.mul(prims.exp(a), b), [1]),)


def test_a_triton_graph_round_trips_through_plain_data(compile_prims, tmp_path):
    inputs = [torch.randn(4, 8), torch.randn(4, 8)]
    _, compiled = compile_prims(_fn, *inputs)
    assert compiled.target == "triton" and compiled.source == compiled.triton_source
    kept: list = []

    def encode(value: object) -> list:
        kept.append(value)
        return ["ref", len(kept) - 1]

    payload = json.loads(json.dumps(to_payload(compiled, encode)))
    assert payload["target"] == "triton"
    rebuilt = from_payload(payload, lambda data: kept[data[1]], str(tmp_path / "wrapper.py"))
    assert rebuilt.target == "triton" and rebuilt.source == compiled.source
    torch.testing.assert_close(rebuilt(inputs)[0], _fn(*inputs)[0])
