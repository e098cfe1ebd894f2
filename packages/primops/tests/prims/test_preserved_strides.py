"""The clone/convert metas allocate with eager's `empty_like` (preserve_format) strides."""

from __future__ import annotations

import random

import torch

from ember_primops._checks import preserved_strides


def _views(count: int):
    rng = random.Random(26)
    for _ in range(count):
        ndim = rng.randint(1, 4)
        shape = [rng.choice([0, 1, 1, 2, 3, 5]) for _ in range(ndim)]
        t = torch.empty([2 * s + 1 for s in shape])
        t = t[tuple(slice(0, s * rng.choice([1, 2]), rng.choice([1, 2])) for s in shape)]
        t = t.permute(*rng.sample(range(ndim), ndim))
        if t.numel() and rng.random() < 0.4:
            d = rng.randrange(ndim)
            t = t.narrow(d, 0, 1).expand([rng.randint(1, 3) if i == d else -1 for i in range(ndim)])
        yield t


def test_matches_eagers_clone_and_to_on_many_views():
    for t in _views(1500):
        want = list(t.clone().stride())
        assert preserved_strides(t) == want, (t.shape, t.stride(), want)
        assert list(t.to(torch.float64).stride()) == want


def test_clone_prim_meta_and_run_agree_with_eager():
    x = torch.randn(6, 8).t()[::2, ::2]
    meta = torch.ops.ember_prims.clone(x.to("meta"))
    assert meta.stride() == x.clone().stride() == torch.ops.ember_prims.clone(x).stride()
