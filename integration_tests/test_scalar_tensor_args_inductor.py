"""A 0-d tensor where an op takes a Scalar, under the default backend (issue 26): the
inductor twin of packages/bytecode_tracer/tests/tracer/test_scalar_tensor_args.py."""

from __future__ import annotations

import pytest
import torch

import ember

pytestmark = pytest.mark.usefixtures("fresh_ember")


def test_tensor_scalars_in_pointwise_and_foreach_ops_under_inductor():
    def fn(params, grads, acc, lr, weight):
        acc.addcmul_(grads[0], grads[0], value=lr)
        torch._foreach_lerp_(params, grads, weight)
        return torch._foreach_pow(weight, params)

    torch.manual_seed(0)
    grads = [torch.randn(8), torch.randn(4, 4)]
    params = [torch.randn(8), torch.randn(4, 4)]
    eager_state = ([p.clone() for p in params], torch.zeros(8))
    compiled_state = ([p.clone() for p in params], torch.zeros(8))
    compiled = ember.compile(fn, backend="inductor", fullgraph=True)
    for lr, weight in ((0.1, 0.5), (0.01, 0.25)):
        expected = fn(
            *eager_state[:1], grads, eager_state[1], torch.tensor(lr), torch.tensor(weight)
        )
        got = compiled(
            *compiled_state[:1], grads, compiled_state[1], torch.tensor(lr), torch.tensor(weight)
        )
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(compiled_state, eager_state)
    assert ember.counters["inductor"]["forward_runs"] >= 2, dict(ember.counters["inductor"])
    assert ember.counters["inductor"]["forward_graphs"] == 1
