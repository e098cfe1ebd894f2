"""The `aot_eager` and `inductor` backends: results equal to eager, training included, work
really done by each stage (ember.counters), and both usable under torch.compile."""

from __future__ import annotations

import pytest
import torch

import ember

BACKENDS = ["aot_eager", "inductor"]


pytestmark = pytest.mark.usefixtures("private_kernel_cache")


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.norm(self.fc1(x)))).softmax(-1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_inference_matches_eager_without_a_backward_trace(backend):
    torch.manual_seed(0)
    model, x = Block(), torch.randn(5, 8)
    compiled = ember.compile(model, backend=backend)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    stats = ember.counters[backend]
    assert stats["forward_graphs"] == 1 and stats["forward_runs"] == 1
    assert stats["backward_graphs"] == 0
    assert not ember.counters["aten_fallbacks"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_training_step_matches_eager(backend):
    torch.manual_seed(0)
    model, x = Block(), torch.randn(5, 8)
    twin = Block()
    twin.load_state_dict(model.state_dict())
    compiled = ember.compile(twin, backend=backend)
    for _ in range(2):  # the second step reuses the compiled graphs
        model.zero_grad()
        twin.zero_grad()
        expected = model(x).square().sum()
        expected.backward()
        loss = compiled(x).square().sum()
        loss.backward()
        torch.testing.assert_close(loss, expected)
        for (name, p), q in zip(model.named_parameters(), twin.parameters(), strict=True):
            torch.testing.assert_close(q.grad, p.grad, msg=name, rtol=1e-4, atol=1e-6)
    stats = ember.counters[backend]
    assert stats["forward_graphs"] == 1 and stats["backward_graphs"] == 1
    assert stats["forward_runs"] == 2 and stats["backward_runs"] == 2


def test_inductor_fuses_into_few_kernels():
    def fn(x):
        for _ in range(10):
            x = torch.sin(x) * 1.5 + 0.25
        return x

    x = torch.randn(64, 64)
    with torch.no_grad():
        torch.testing.assert_close(ember.compile(fn, backend="inductor")(x), fn(x))
    assert ember.counters["inductor"]["kernels"] == 1


def test_an_input_mutation_is_copied_back():
    def fn(x, y):
        x.add_(y)
        return (x * 2).sum()

    a, b = torch.randn(6), torch.randn(6)
    a2 = a.clone()
    with torch.no_grad():
        got = ember.compile(fn, backend="inductor")(a2, b)
        expected = fn(a, b)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(a2, a)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ember_backend_under_torch_compile(backend):
    import torch._dynamo  # the oracle's tracer (tests may use it)

    torch._dynamo.reset()
    torch.manual_seed(0)
    model, x = Block(), torch.randn(5, 8)
    compiled = torch.compile(model, backend=ember.lookup_backend(backend))
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    assert ember.counters[backend]["forward_runs"] == 1
    torch._dynamo.reset()


def _grads(model):
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    return grads


def test_inductor_trains_under_torch_compile():
    """Dynamo's graph through our aot stage: forward and backward graphs compiled and run."""
    import torch._dynamo

    torch._dynamo.reset()
    torch.manual_seed(0)
    model, x = Block(), torch.randn(5, 8)
    compiled = torch.compile(model, backend=ember.lookup_backend("inductor"))
    compiled(x).square().sum().backward()
    got = _grads(model)
    model(x).square().sum().backward()
    for g, e in zip(got, _grads(model), strict=True):
        torch.testing.assert_close(g, e)
    stats = ember.counters["inductor"]
    assert (stats["forward_runs"], stats["backward_runs"]) == (1, 1)
    torch._dynamo.reset()


def test_inductor_takes_dynamo_symbolic_sizes():
    """Dynamo marks a size dynamic after it changed and passes SymInts of its own shape env:
    compiled once per concrete size (counted), every size equal to eager, training too."""
    import torch._dynamo

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = Block()
    compiled = torch.compile(model, backend=ember.lookup_backend("inductor"))
    for rows in (3, 5, 7, 5):
        x = torch.randn(rows, 8)
        torch.testing.assert_close(compiled(x), model(x))
        compiled(x).sum().backward()
        got = _grads(model)
        model(x).sum().backward()
        for g, e in zip(got, _grads(model), strict=True):
            torch.testing.assert_close(g, e)
    stats = ember.counters["inductor"]
    assert stats["static_specializations"] == 2  # sizes 5 and 7; 3 was the static compile
    assert stats["backward_runs"] == 4
    torch._dynamo.reset()


@pytest.mark.parametrize("exponent", [2.0, 3.0, -1.0])
def test_pow_by_small_constants_is_bit_equal_to_eager(exponent):
    """Eager's CPU pow special-cases these exponents as products; so does the C++ target
    (a vectorizable loop instead of a scalar std::pow per element)."""
    x = torch.rand(10000) + 0.5
    ember.reset()
    compiled = ember.compile(lambda t: torch.pow(t, exponent), backend="inductor")
    torch.testing.assert_close(compiled(x), torch.pow(x, exponent), rtol=0, atol=0)
    assert ember.counters["inductor"]["kernels"] == 1
