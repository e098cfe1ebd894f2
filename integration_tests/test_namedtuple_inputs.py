"""A namedtuple argument whose class replaces tuple's `__getitem__`: guards and graph inputs
read its fields as `p.a` does (the field's own descriptor), never through the user's
`__getitem__`, which returns something else (here a sliced copy)."""

from __future__ import annotations

import typing

import pytest
import torch

import ember
import ember_frame_hook as fh


class Sliced(typing.NamedTuple):
    first: torch.Tensor
    second: torch.Tensor

    def __getitem__(self, index):
        return Sliced(self.first[index], self.second[index])


def fields_combined(s):
    return s.first * 3 - s.second


class Recording:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, gm, example_inputs):
        self.count += 1
        return gm.forward


@pytest.mark.parametrize("backend", ["recording", "inductor"])
def test_fields_of_a_namedtuple_with_its_own_getitem(backend):
    ember.reset()
    recording = Recording()
    compiled = ember.compile(
        fields_combined, backend=recording if backend == "recording" else backend, fullgraph=True
    )
    s = Sliced(torch.randn(2, 3), torch.randn(2, 3))
    for _ in range(2):  # the second call runs the guards
        torch.testing.assert_close(compiled(s), fields_combined(s))
    other = Sliced(torch.randn(2, 3), torch.randn(2, 3))
    torch.testing.assert_close(compiled(other), fields_combined(other))
    # a field of another shape fails the guard: recompiled, still right
    wide = Sliced(torch.randn(4, 5), torch.randn(4, 5))
    torch.testing.assert_close(compiled(wide), fields_combined(wide))
    assert len(fh.cache_entries(fields_combined.__code__)) >= 1
    # the user's __getitem__ never ran as part of a guard or an input load
    assert not fh.cache_entries(Sliced.__getitem__.__code__)
    if backend == "recording":
        assert recording.count >= 1
