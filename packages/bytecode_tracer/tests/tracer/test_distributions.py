"""torch.distributions objects built in the trace with argument validation on (the default):
one graph, results equal to eager, and invalid arguments raise ValueError as eager does
(variables/validation_checks.py: the check runs right after the graph)."""

from __future__ import annotations

import pytest
import torch
from torch.distributions import Categorical, Normal

from conftest import Compiled, same


@pytest.fixture(autouse=True)
def _validation_on():
    previous = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(True)
    yield
    torch.distributions.Distribution.set_default_validate_args(previous)


def normal_fn(x, scale):
    d = Normal(x, scale)
    return d.log_prob(x + 0.5), d.mean, d.stddev, d.entropy()


def test_normal_validated_one_graph_and_equal():
    compiled = Compiled(normal_fn, fullgraph=True)
    x, scale = torch.randn(4), torch.rand(4) + 0.5
    assert same(compiled(x, scale), normal_fn(x, scale))
    assert compiled.backend.graph_count == 1
    assert "all" in compiled.backend.ops()  # the validation check is a graph output
    assert same(compiled(x * 2, scale * 3), normal_fn(x * 2, scale * 3))  # no recompile
    assert compiled.backend.graph_count == 1


def test_normal_invalid_scale_raises_value_error_like_eager():
    compiled = Compiled(normal_fn, fullgraph=True)
    x = torch.randn(3)
    compiled(x, torch.ones(3))
    bad = torch.tensor([1.0, -1.0, 1.0])
    with pytest.raises(ValueError, match="scale"):
        normal_fn(x, bad)
    with pytest.raises(ValueError, match="parameter scale of distribution Normal"):
        compiled(x, bad)
    assert compiled.backend.graph_count == 1  # the same graph caught it


def test_normal_sample_with_manual_seed():
    def fn(x):
        d = Normal(x, 1.0)
        return d.sample(), d.rsample((2,))

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    torch.manual_seed(7)
    expected = fn(x)
    torch.manual_seed(7)
    assert same(compiled(x), expected)
    assert compiled.backend.graph_count == 1


def test_log_prob_outside_support_raises():
    def fn(logits, value):
        return Categorical(logits=logits).log_prob(value)

    compiled = Compiled(fn, fullgraph=True)
    logits = torch.randn(4, 5)
    good = torch.tensor([0.0, 1.0, 2.0, 3.0])
    assert same(compiled(logits, good), fn(logits, good))
    # not an integer (an index past the end would make gather fail inside the graph first,
    # a RuntimeError instead of eager's ValueError: see validation_checks.py)
    bad = torch.tensor([0.0, 1.5, 2.0, 3.0])
    with pytest.raises(ValueError):
        fn(logits, bad)
    with pytest.raises(ValueError, match="support of the distribution Categorical"):
        compiled(logits, bad)
    assert compiled.backend.graph_count == 1


def test_categorical_lazy_properties_and_entropy():
    def fn(x):
        d = Categorical(logits=x)
        return d.log_prob(torch.tensor([0, 1, 2, 3])), d.entropy(), d.probs, d.logits

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(4, 5)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1


def test_categorical_sample_and_invalid_probs():
    def fn(p):
        d = Categorical(probs=p)
        return d.sample((3,)), d.entropy()

    compiled = Compiled(fn, fullgraph=True)
    p = torch.rand(2, 4)
    torch.manual_seed(3)
    expected = fn(p)
    torch.manual_seed(3)
    assert same(compiled(p), expected)
    assert compiled.backend.graph_count == 1


def test_categorical_invalid_probs_raise_value_error():
    def fn(p):
        return Categorical(probs=p).entropy()

    compiled = Compiled(fn, fullgraph=True)
    p = torch.rand(2, 4)
    assert same(compiled(p), fn(p))
    bad = p.clone()
    bad[0, 1] = -0.5
    with pytest.raises(ValueError):
        fn(bad)
    # (sampling from them in the same graph would fail first inside the graph, a RuntimeError)
    with pytest.raises(ValueError, match="probs"):
        compiled(bad)
