"""Inputs named as dynamic (`dynamic_sources`, named_sources.py): symbolic from the first
compile under every `dynamic=` setting, by exact name, by regex, or one dim of a tensor."""

from __future__ import annotations

import pytest
import torch

from conftest import Compiled
from ember_bytecode_tracer.named_sources import NamedSources


def scale(x, n):
    return x * n + n


def placeholder_values(gm):
    return [n.meta["example_value"] for n in gm.graph.nodes if n.op == "placeholder"]


def test_parse_exact_names_regexes_and_dim_suffixes():
    named = NamedSources.parse(" L['x'] , L\\['w.*'\\]:1,,")
    assert named.entries == (("L['x']", None), ("L\\['w.*'\\]", 1))
    assert named.names("L['x']") and named.names("L['w2']") and not named.names("L['y']")
    assert named.dims("L['x']", 3) == {0, 1, 2}
    assert named.dims("L['weights']", 3) == {1}
    assert not NamedSources.parse("") and NamedSources.parse(None).dims("L['x']", 2) == set()
    with pytest.raises(ValueError, match="not a valid regex"):
        NamedSources.parse("L['x'")


@pytest.mark.parametrize("dynamic", [None, False])
def test_named_int_is_symbolic_from_the_first_call_even_at_0_and_1(dynamic):
    compiled = Compiled(scale, dynamic=dynamic, dynamic_sources="L['n']")
    x = torch.randn(5)
    for n in (1, 0, 7, -4):
        torch.testing.assert_close(compiled(x, n), scale(x, n))
    assert compiled.backend.graph_count == 1
    n_value = placeholder_values(compiled.backend.graphs[0])[1]
    assert isinstance(n_value, torch.SymInt)


def test_named_tensor_dims_follow_the_name_and_other_inputs_stay_static():
    def fn(x, y):
        return x.sum(-1) + y.sum()

    compiled = Compiled(fn, dynamic=False, dynamic_sources="L['x']:0")
    for b in (3, 4, 9):
        x, y = torch.randn(b, 6), torch.randn(b + 1)
        torch.testing.assert_close(compiled(x, y), fn(x, y))
    # x's dim 0 is symbolic from the start; y was not named: each size of y recompiles
    assert compiled.backend.graph_count == 3
    x_fake, y_fake = placeholder_values(compiled.backend.graphs[0])
    assert isinstance(x_fake.shape[0], torch.SymInt) and x_fake.shape[1] == 6
    assert all(isinstance(s, int) for s in y_fake.shape)


def test_regex_names_several_inputs():
    compiled = Compiled(scale, dynamic=False, dynamic_sources="L\\['[xn]'\\]")
    for b in (2, 3, 5):
        x = torch.randn(b)
        torch.testing.assert_close(compiled(x, b), scale(x, b))
    assert compiled.backend.graph_count == 1


def test_named_parameter_is_symbolic_despite_static_parameter_shapes():
    def fn(lin, x):
        return lin(x)

    compiled = Compiled(
        fn, static_parameter_shapes=True, dynamic_sources="L['lin'].weight:1, L['x']:1"
    )
    for d in (3, 4, 6):
        lin, x = torch.nn.Linear(d, 2), torch.randn(1, d)
        torch.testing.assert_close(compiled(lin, x), fn(lin, x))
    assert compiled.backend.graph_count == 1


def test_a_branch_on_a_named_size_is_guarded_not_wrong():
    def fn(x):
        if x.shape[0] > 4:
            return x * 2
        return x - 1

    compiled = Compiled(fn, dynamic=False, dynamic_sources="L['x']")
    for b in (2, 3, 8, 9, 3):
        x = torch.randn(b)
        torch.testing.assert_close(compiled(x), fn(x))
    assert compiled.backend.graph_count == 2  # one per side of the branch
