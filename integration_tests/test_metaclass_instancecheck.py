"""isinstance() against a class whose metaclass answers for itself (`__instancecheck__`
written in Python): the trace asks it, as eager does, instead of reading the class
hierarchy; the class itself still matches its own instances without asking."""

from __future__ import annotations

import pytest
import torch

import ember


class AcceptsAll(type):
    def __instancecheck__(cls, instance):
        return True


class RejectsAll(type):
    def __instancecheck__(cls, instance):
        return False


class Anything(metaclass=AcceptsAll):
    pass


class Nothing(metaclass=RejectsAll):
    pass


class HasScale(type):
    def __instancecheck__(cls, instance):
        return getattr(instance, "scale", 0) > 1


class Scaled(metaclass=HasScale):
    pass


class Plain:
    def __init__(self, scale):
        self.scale = scale


def pick(x, obj):
    out = x + 1 if isinstance(obj, Anything) else x - 1
    out = out * 2 if isinstance(obj, (int, Nothing)) else out * 3
    if isinstance(obj, Scaled):
        out = out + obj.scale
    return out


class Recording:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, gm, example_inputs):
        self.count += 1
        return gm.forward


@pytest.mark.parametrize("backend", ["recording", "inductor"])
def test_metaclass_instancecheck_decides(backend):
    ember.reset()
    recording = Recording()
    compiled = ember.compile(
        pick, backend=recording if backend == "recording" else backend, fullgraph=True
    )
    x = torch.randn(3)
    for obj in (Plain(0.5), Plain(3.0), 7, Nothing(), Plain(0.5)):
        torch.testing.assert_close(compiled(x, obj), pick(x, obj))
    if backend == "recording":
        assert recording.count >= 1
