"""User objects made in the traced code, under the default backend (issue 26): one `inductor`
case per class of packages/bytecode_tracer/tests/tracer/test_user_object_construction.py,
compared with eager and checked to have run compiled."""

from __future__ import annotations

import collections
import dataclasses

import pytest
import torch

import ember

pytestmark = pytest.mark.usefixtures("fresh_ember")


def _ran_compiled() -> None:
    assert ember.counters["inductor"]["forward_runs"] >= 1, dict(ember.counters["inductor"])


class _Base:
    offset = 0.25

    def __new__(cls, *args, **kwargs):
        obj = super().__new__(cls)
        obj.made_by_new = True
        return obj

    def __init__(self, scale):
        self.scale = scale


class _Scaled(_Base):
    def __new__(cls, *args, **kwargs):
        return super(_Scaled, cls).__new__(cls)  # noqa: UP008 (the two-argument form)

    def __init__(self, scale):
        super().__init__(scale)

    def run(self, x):
        return x.sin() * self.scale + super().offset


def test_python_new_chain_under_inductor():
    def fn(x):
        s = _Scaled(3.0)
        return s, s.run(x)

    x = torch.randn(8)
    (made, y), (want, expected) = ember.compile(fn, fullgraph=True)(x), fn(x)
    torch.testing.assert_close(y, expected)
    assert type(made) is _Scaled and vars(made) == vars(want)
    _ran_compiled()


@dataclasses.dataclass(frozen=True)
class _Spot:
    row: int
    col: float


@dataclasses.dataclass(frozen=True)
class _Frozen:
    a: torch.Tensor
    extra: list = dataclasses.field(default_factory=list)


def test_frozen_dataclasses_under_inductor():
    def fn(x):
        table = {_Spot(1, 0.5): 2.0}
        f = _Frozen(x.cos())
        f.extra.append(table[_Spot(1, 0.5)])
        object.__setattr__(f, "a", f.a * f.extra[0])
        return f, f.a + 1, f"{_Spot(0, 1.5)}"

    x = torch.randn(8)
    (made, y, text), (want, expected, want_text) = ember.compile(fn, fullgraph=True)(x), fn(x)
    torch.testing.assert_close(y, expected)
    torch.testing.assert_close(made.a, want.a)
    assert made.extra == want.extra and text == want_text
    _ran_compiled()


class _Key:
    pass


_KEY = _Key()


class _Fallback:
    def __getattribute__(self, name):
        if name == "gone":
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    def __getattr__(self, name):
        return 0.25


def test_object_protocols_under_inductor():
    def fn(seq, key, obj, table):
        made = _Key()
        out = seq.__class__(v.exp() for v in seq)
        return out, table[key] * out[0] * obj.gone + (made.__weakref__ is None)

    seq = (torch.randn(8), torch.randn(8))
    args = (seq, _KEY, _Fallback(), {_KEY: 3.0})
    (out, y), (want_out, expected) = ember.compile(fn, fullgraph=True)(*args), fn(*args)
    assert type(out) is tuple
    torch.testing.assert_close(y, expected)
    torch.testing.assert_close(out, want_out)
    _ran_compiled()


class _Config(collections.OrderedDict):
    def pop(self, *args):
        raise TypeError("read-only")


_CONFIG = _Config(scale=2.0)
_TABLE = {torch.sin: 1.0, torch.Tensor.cos: 2.0}


def test_frame_state_written_and_read_under_inductor():
    import threading

    local = threading.local()

    def make(k):
        def inner(t):
            return t * k

        return inner

    def fn(x, loc):
        loc.last = x.tanh()
        f = make(dict(_CONFIG)["scale"])
        f.__wrapped__ = make
        return f(loc.last) + len(_TABLE) + _TABLE[torch.sin], f

    x = torch.randn(8)
    y, f = ember.compile(fn, fullgraph=True)(x, local)
    expected, want_f = fn(x, threading.local())
    torch.testing.assert_close(y, expected)
    torch.testing.assert_close(local.last, x.tanh())
    assert f.__wrapped__ is make and want_f.__wrapped__ is make
    _ran_compiled()
