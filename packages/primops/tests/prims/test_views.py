"""View prims return real views; everything else returns fresh tensors (checked per sample)."""

from __future__ import annotations

import pytest
import torch

from ember_primops import all_prims, prims

from .samples import samples

VIEW_CASES = [
    pytest.param(p.name, i, id=f"{p.name}-{i}")
    for p in all_prims()
    if p.is_view
    for i in range(len(samples(p.name)))
]


@pytest.mark.parametrize("name,index", VIEW_CASES)
def test_view_prims_alias_their_input(name, index):
    sample = samples(name)[index]
    a = sample.args[0]
    out = getattr(prims, name)(*sample.args, **sample.kwargs)
    assert out.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    # Writing through the view changes the input.
    if out.numel():
        a = a.clone()
        out = getattr(prims, name)(a, *sample.args[1:], **sample.kwargs)
        before = a.clone()
        out.fill_(3)
        assert not torch.equal(a, before)


def test_collapse_view_refuses_impossible_views():
    a = torch.randn(4, 3).t()
    with pytest.raises(ValueError, match=r"ember_prims\.collapse_view: .*use collapse"):
        prims.collapse_view(a, 0, 2)
    torch.testing.assert_close(prims.collapse(a, 0, 2), a.reshape(-1))


def test_broadcast_in_dim_has_zero_strides():
    out = prims.broadcast_in_dim(torch.randn(3), [2, 3, 5], [1])
    assert out.stride() == (0, 1, 0)
