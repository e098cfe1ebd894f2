"""Random ops under a fixed seed: `aot_eager` draws eager's numbers from torch's generator
(values, dropout masks reused by backward, the generator's state afterwards); `inductor` draws
from its own stream (same distributions, other numbers), as torch.compile's inductor does."""

from __future__ import annotations

import pytest
import torch

import ember

pytestmark = pytest.mark.usefixtures("private_kernel_cache")


def _seeded(fn, *args, seed=7):
    """fn(*args) under manual_seed(seed), then the next numbers the generator gives."""
    torch.manual_seed(seed)
    out = fn(*args)
    return out, torch.rand(4)


def _assert_same(compiled_result, eager_result):
    (out, after), (expected, expected_after) = compiled_result, eager_result
    for got, want in zip(out, expected, strict=True):
        assert torch.equal(got, want), (got, want)
    assert torch.equal(after, expected_after), "the generator ends elsewhere than eager's"


def _shuffle_rows(x):
    noise = torch.rand(x.shape)
    return (torch.argsort(noise + x, dim=-1), noise)


def _like_draws(x):
    return (torch.randn_like(x) * 2, torch.rand_like(x), torch.randint(0, 10, (3, 5)))


def _bernoulli_draws(x):
    probs = torch.sigmoid(x)
    return (torch.bernoulli(probs), torch.bernoulli(x, 0.3), torch.normal(x, 2.0))


def _in_place_draws(x):
    y = torch.empty_like(x).uniform_(-1, 1)
    z = torch.empty_like(x).normal_()
    return (x + y, z.exponential_())


@pytest.mark.parametrize("fn", [_shuffle_rows, _like_draws, _bernoulli_draws, _in_place_draws])
def test_aot_eager_draws_eagers_numbers(fn):
    x = torch.randn(6, 5)
    compiled = ember.compile(fn, backend="aot_eager")
    for seed in (0, 1):  # the second call reuses the graph and still follows the seed
        _assert_same(_seeded(compiled, x, seed=seed), _seeded(fn, x, seed=seed))
    stats = ember.counters["aot_eager"]
    assert stats["forward_graphs"] == 1 and stats["forward_runs"] == 2
    kept = [_op(name) for name in ember.counters["aten_fallbacks"]]
    assert kept and all(torch.Tag.nondeterministic_seeded in op.tags for op in kept), kept


def _op(name: str):
    namespace, packet, overload = name.split(".")
    return getattr(getattr(getattr(torch.ops, namespace), packet), overload)


def test_aot_eager_keeps_two_identical_draws_apart_and_an_unused_one():
    def fn(x):
        torch.rand(3)  # unused: eager still advances the generator
        a = torch.rand(x.shape)
        b = torch.rand(x.shape)  # same op, same arguments: another draw, never merged
        return (a + x, b + x)

    x = torch.randn(2, 3)
    compiled = ember.compile(fn, backend="aot_eager")
    _assert_same(_seeded(compiled, x), _seeded(fn, x))
    assert ember.counters["aot_eager"]["forward_graphs"] == 1


class Dropper(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.drop = torch.nn.Dropout(0.4)
        self.fc2 = torch.nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


def _step(model, x):
    model.zero_grad()
    loss = model(x).square().mean()
    loss.backward()
    return (loss.detach(), *(p.grad.clone() for p in model.parameters()))


def test_aot_eager_dropout_training_step_equals_eager():
    torch.manual_seed(0)
    model, x = Dropper(), torch.randn(5, 8)
    twin = Dropper()
    twin.load_state_dict(model.state_dict())
    compiled = ember.compile(twin, backend="aot_eager")
    for seed in (3, 4):
        _assert_same(_seeded(_step, compiled, x, seed=seed), _seeded(_step, model, x, seed=seed))
    stats = ember.counters["aot_eager"]
    assert stats["forward_graphs"] == 1 and stats["backward_graphs"] == 1
    assert stats["forward_runs"] == 2 and stats["backward_runs"] == 2


def test_inductor_draws_its_own_stream_consistently():
    """Not eager's numbers (documented), but one mask for forward and backward, and a
    fresh draw per call."""

    def fn(x):
        return torch.nn.functional.dropout(x, 0.5, training=True)

    x = torch.ones(64, 32, requires_grad=True)
    compiled = ember.compile(fn, backend="inductor")
    out = compiled(x)
    out.sum().backward()
    kept = out.detach() != 0
    assert torch.equal(out.detach(), kept.float() * 2)
    assert torch.equal(x.grad, kept.float() * 2)  # backward saw forward's mask
    assert 0.3 < kept.float().mean().item() < 0.7
    assert not torch.equal(compiled(x).detach() != 0, kept)
    stats = ember.counters["inductor"]
    assert stats["forward_graphs"] == 1 and stats["backward_graphs"] == 1


def test_inductor_compiles_in_place_draws():
    """normal_ has no plain out-of-place twin (normal_functional is one): compiled, not
    sent back to eager."""

    def fn(x):
        return x + torch.empty_like(x).normal_(3.0, 0.5)

    out = ember.compile(fn, backend="inductor")(torch.zeros(256, 64))
    assert abs(out.mean().item() - 3.0) < 0.05 and abs(out.std().item() - 0.5) < 0.05
    assert ember.counters["inductor"]["forward_graphs"] == 1
    assert not ember.counters["graph_fallbacks"]
