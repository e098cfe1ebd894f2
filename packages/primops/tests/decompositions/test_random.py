"""Random decompositions draw their seed when they run (never a trace-time constant)."""

from __future__ import annotations

import torch

from ember_primops.decompose_mode import DecomposeMode


def _draw():
    with DecomposeMode():
        return torch.rand(1000), torch.nn.functional.dropout(torch.ones(1000), 0.25)


def test_seeded_by_torch_generator_and_fresh_per_call():
    torch.manual_seed(0)
    first = _draw()
    torch.manual_seed(0)
    again = _draw()
    later = _draw()
    torch.testing.assert_close(first, again)
    assert not torch.equal(first[0], later[0])


def test_distributions():
    torch.manual_seed(1)
    with DecomposeMode():
        u = torch.rand(20000)
        n = torch.randn(20000)
        b = torch.bernoulli(torch.full((20000,), 0.3))
        d = torch.nn.functional.dropout(torch.ones(20000), 0.25)
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.02
    assert abs(n.mean()) < 0.05 and abs(n.std() - 1) < 0.05
    assert abs(b.mean() - 0.3) < 0.02
    kept = d != 0
    assert abs(kept.float().mean() - 0.75) < 0.02
    torch.testing.assert_close(d[kept], torch.full_like(d[kept], 1 / 0.75))
