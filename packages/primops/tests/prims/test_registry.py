"""The registry, the ``prims`` namespace and tracing prims with FX and fake tensors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import ember_primops
from ember_primops import CATEGORIES, all_prims, get_prim, is_prim, prims


def test_namespace_attributes_are_the_overloads():
    assert prims.add is torch.ops.ember_prims.add.default
    assert prims.convert_element_type is torch.ops.ember_prims.convert_element_type.default
    assert set(dir(prims)) == {p.name for p in all_prims()}
    with pytest.raises(AttributeError, match="no prim named 'not_a_prim'"):
        prims.not_a_prim  # noqa: B018


def test_lookup_helpers():
    assert get_prim("add") is get_prim(prims.add) is get_prim(torch.ops.ember_prims.add)
    assert get_prim("ember_prims::mul").name == "mul"
    assert is_prim(prims.add) and is_prim(torch.ops.ember_prims.add)
    assert not is_prim(torch.ops.aten.add.Tensor) and not is_prim("add") and not is_prim(None)
    with pytest.raises(KeyError):
        get_prim(torch.ops.aten.add.Tensor)


def test_records_are_consistent():
    names = [p.name for p in all_prims()]
    assert len(names) == len(set(names))
    for p in all_prims():
        assert p.category in CATEGORIES
        assert p.overload._schema.name == f"ember_prims::{p.name}"
        assert (p.category == "view" or p.name == "view_element_type") == p.is_view
        aliasing = any(a.alias_info is not None for a in p.overload._schema.arguments)
        assert aliasing == p.is_view, p.name
        assert not p.overload._schema.is_mutable, p.name


def test_only_next_seed_is_impure():
    impure = [p.name for p in all_prims() if "impure" in p.tags]
    assert impure == ["next_seed"]
    assert torch.Tag.nondeterministic_seeded in prims.next_seed.tags


def test_decomposition_table_is_lazy():
    # Importing the package must not import the decompositions (they are loaded on first call).
    code = "import sys, ember_primops; sys.exit('ember_primops.decompositions' in sys.modules)"
    src = str(Path(ember_primops.__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": src}
    assert subprocess.run([sys.executable, "-c", code], env=env, check=False).returncode == 0
    assert callable(ember_primops.decomposition_table)


def _graph(x, y, seed):
    z = prims.mul(x, prims.broadcast_in_dim(y, [3, 4], [1]))
    s = prims.sum(prims.exp(z), [1])
    noise = prims.uniform([3], seed, 0, dtype=torch.float32, device=torch.device("cpu"))
    return prims.add(prims.expand_dims(s, [1]), prims.expand_dims(noise, [1])), prims.argmax(z, 0)


def test_symbolic_trace_records_call_function_nodes_and_runs_on_fake_tensors():
    gm = torch.fx.symbolic_trace(_graph)
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets[:4] == [prims.broadcast_in_dim, prims.mul, prims.exp, prims.sum]
    assert all(is_prim(t) for t in targets)
    x, y, seed = torch.randn(3, 4), torch.randn(4), torch.tensor(7)
    eager = _graph(x, y, seed)
    for got, want in zip(gm(x, y, seed), eager, strict=False):
        torch.testing.assert_close(got, want)
    with FakeTensorMode() as mode:
        fake = gm(*(mode.from_tensor(t) for t in (x, y, seed)))
    assert [tuple(t.shape) for t in fake] == [(3, 1), (4,)]
    assert [t.dtype for t in fake] == [torch.float32, torch.int64]


def test_meta_tensors_propagate_through_a_graph():
    out = _graph(
        torch.empty(3, 4, device="meta"),
        torch.empty(4, device="meta"),
        torch.empty((), dtype=torch.int64, device="meta"),
    )
    assert out[0].device.type == "meta" and out[0].shape == (3, 1)


def test_dynamo_traces_prims_with_fake_tensors():
    seen = []

    def backend(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    def fn(x, y):
        return prims.sin(prims.add(x, y))

    compiled = torch.compile(fn, backend=backend, fullgraph=True)
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    torch.testing.assert_close(compiled(x, y), torch.sin(x + y))
    (gm,) = seen
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    assert [n.target for n in nodes] == [prims.add, prims.sin]
    assert nodes[-1].meta["example_value"].shape == (2, 3)
