"""torch.utils.checkpoint.checkpoint inside a traced function (variables/checkpoint.py): the
checkpointed function is traced inline into the one graph, its nodes marked
`meta["recompute"]`; what an inline trace would do differently from eager is a break.
The test backend runs graphs as they are (random ops draw from torch's generator as in
eager), so values compare exactly; integration_tests/test_activation_checkpointing.py runs
the same under inductor."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.utils.checkpoint import checkpoint

from conftest import Compiled, same, skip_reasons
from ember_bytecode_tracer.exc import Unsupported


def block(x, w):
    return torch.relu(x @ w).sin() * 2


def noisy_block(x, w):
    return torch.nn.functional.dropout(torch.tanh(x @ w), 0.3, training=True) + x


def inputs(n=6):
    x = torch.randn(n, n, requires_grad=True)
    w = torch.randn(n, n, requires_grad=True)
    return x, w


def grads_of(fn, x, w, seed=0):
    x.grad = w.grad = None
    torch.manual_seed(seed)
    out = fn(x, w)
    out.sum().backward()
    return out.detach(), x.grad.clone(), w.grad.clone()


def region_ids(compiled, index=0):
    nodes = compiled.backend.graphs[index].graph.nodes
    return {n.name: n.meta.get("recompute") for n in nodes if n.op.startswith("call")}


@pytest.mark.parametrize("reentrant", [False, True])
def test_one_graph_equal_to_eager_with_grads(reentrant):
    def fn(x, w):
        h = checkpoint(block, x, w, use_reentrant=reentrant)
        return checkpoint(block, h, w, use_reentrant=reentrant).cos()

    x, w = inputs()
    expected = grads_of(fn, x, w)
    compiled = Compiled(fn, fullgraph=True)
    got = grads_of(compiled, x, w)
    assert same(got, expected)
    assert compiled.backend.graph_count == 1 and not compiled.breaks


def test_region_nodes_are_marked_by_region():
    def fn(x, w):
        h = checkpoint(block, x, w, use_reentrant=False)
        return checkpoint(block, h, w, use_reentrant=False).cos()

    compiled = Compiled(fn, fullgraph=True)
    compiled(*inputs())
    ids = region_ids(compiled)
    marked = [i for i in ids.values() if i is not None]
    assert len(marked) == 8  # matmul, relu, sin, mul in each region
    assert len(set(marked)) == 2  # one id per checkpoint call
    assert [name for name, i in ids.items() if i is None] == ["cos"]


def test_dropout_under_a_fixed_seed_matches_eager():
    def fn(x, w):
        return checkpoint(noisy_block, x, w, use_reentrant=False) * 3

    x, w = inputs(16)
    expected = grads_of(fn, x, w, seed=3)
    plain = grads_of(lambda x, w: noisy_block(x, w) * 3, x, w, seed=3)
    assert same(expected, plain)  # eager's rerun restores the RNG: same as no checkpoint
    compiled = Compiled(fn, fullgraph=True)
    got = grads_of(compiled, x, w, seed=3)
    assert same(got, expected) and compiled.backend.graph_count == 1


def test_keywords_and_module_calls_go_to_the_function():
    layer = torch.nn.Linear(6, 6)

    def fn(x, scale):
        return checkpoint(lambda t, s=1.0: layer(t) * s, x, s=scale, use_reentrant=False)

    x = torch.randn(3, 6, requires_grad=True)
    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(x, 0.5), fn(x, 0.5))
    assert compiled.backend.graph_count == 1


def test_default_variant_warns_like_eager_and_traces():
    def fn(x, w):
        return checkpoint(block, x, w)

    x, w = inputs()
    compiled = Compiled(fn, fullgraph=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = compiled(x, w)
    assert any("use_reentrant" in str(c.message) for c in caught)
    assert same(got, block(x, w)) and compiled.backend.graph_count == 1


WEIGHT = torch.randn(6, 6, requires_grad=True)


def block_of_global(t):
    return block(t, WEIGHT)


def test_reentrant_without_grad_inputs_is_a_break():
    def fn(x):  # the weight is a global: no argument requires grad
        return checkpoint(block_of_global, x, use_reentrant=True)

    x = torch.randn(6, 6)
    compiled = Compiled(fn)
    got = compiled(x)
    assert not got.requires_grad and not fn(x).requires_grad  # as eager
    reasons = [b.reason for b in compiled.breaks] + skip_reasons(compiled)
    assert any("no tensor argument requires grad" in r for r in reasons)
    with pytest.raises(Unsupported):
        Compiled(fn, fullgraph=True)(x)


@pytest.mark.parametrize(
    "body, why",
    [
        (lambda x, w, box: box.append(1) or block(x, w), "side effects"),
        (lambda x, w, box: x.mul_(2) @ w, "in-place write"),
    ],
)
def test_what_eager_repeats_on_recompute_is_a_break(body, why):
    box: list = []
    x = torch.randn(6, 6)
    w = torch.randn(6, 6, requires_grad=True)
    compiled = Compiled(lambda x, w: checkpoint(body, x, w, box, use_reentrant=False) + 1)
    compiled(x.clone(), w)
    assert any(why in r for r in [b.reason for b in compiled.breaks] + skip_reasons(compiled))


def test_preserve_rng_state_false_around_dropout_is_a_break():
    def fn(x, w):
        return checkpoint(noisy_block, x, w, use_reentrant=False, preserve_rng_state=False)

    compiled = Compiled(fn)
    compiled(*inputs())
    reasons = [b.reason for b in compiled.breaks] + skip_reasons(compiled)
    assert any("preserve_rng_state=False" in r for r in reasons)
    # without random ops there is nothing to preserve: one graph
    quiet = Compiled(
        lambda x, w: checkpoint(block, x, w, use_reentrant=False, preserve_rng_state=False),
        fullgraph=True,
    )
    quiet(*inputs())
    assert quiet.backend.graph_count == 1


def test_selective_checkpoint_policies_are_a_break():
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    def context():
        return create_selective_checkpoint_contexts([torch.ops.aten.mm.default])

    compiled = Compiled(
        lambda x, w: checkpoint(block, x, w, use_reentrant=False, context_fn=context)
    )
    x, w = inputs()
    assert same(compiled(x, w), block(x, w))
    reasons = [b.reason for b in compiled.breaks] + skip_reasons(compiled)
    assert any("selective checkpointing" in r for r in reasons)
