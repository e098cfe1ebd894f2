"""with-blocks over grad-mode switches; dataclasses and namedtuples built in a trace."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import NamedTuple

import torch

from conftest import Compiled, same

w = torch.randn(3, requires_grad=True)


def test_no_grad_block_is_in_the_graph():
    def fn(a, w):
        with torch.no_grad():
            frozen = a * w
        return frozen + a * w

    x = torch.randn(3)
    compiled = Compiled(fn)
    got = compiled(x, w)
    expected = fn(x, w)
    assert same(got, expected) and got.requires_grad
    assert compiled.backend.graph_count == 1
    assert "_set_grad_enabled" in compiled.backend.graphs[0].code
    assert torch.is_grad_enabled()
    got.sum().backward()
    assert torch.allclose(w.grad, x)
    w.grad = None


def test_enable_grad_inside_no_grad_and_set_grad_enabled():
    def fn(a, w):
        with torch.set_grad_enabled(False):
            b = a * w
            with torch.enable_grad():
                c = a * w
        return b.requires_grad, c.requires_grad, b + c

    x = torch.randn(3)
    compiled = Compiled(fn)
    got = compiled(x, w)
    assert got[:2] == (False, True) and same(got[2], fn(x, w)[2])
    assert torch.is_grad_enabled()


def test_trace_under_no_grad_is_guarded():
    compiled = Compiled(lambda a, w: a * w)
    x = torch.randn(3)
    assert compiled(x, w).requires_grad
    with torch.no_grad():
        assert not compiled(x, w).requires_grad
    assert compiled.backend.graph_count == 2


def test_nullcontext():
    def fn(a):
        with contextlib.nullcontext(a) as b:
            return b.sin()

    compiled = Compiled(fn)
    assert same(compiled(w.detach()), w.detach().sin())


class Pair(NamedTuple):
    first: torch.Tensor
    second: torch.Tensor


@dataclasses.dataclass
class Output:
    logits: torch.Tensor
    loss: torch.Tensor | None = None


def test_namedtuple_and_dataclass_built_and_returned():
    def fn(a):
        p = Pair(a + 1, a * 2)
        out = Output(logits=p.first + p[1])
        return out, p

    x = torch.randn(3)
    compiled = Compiled(fn)
    out, p = compiled(x)
    expected_out, expected_p = fn(x)
    assert isinstance(out, Output) and isinstance(p, Pair)
    assert same(out.logits, expected_out.logits) and out.loss is None
    assert same(tuple(p), tuple(expected_p))
    assert compiled.backend.graph_count == 1


def test_post_init_dataclass_is_read_only_after_a_break():
    @dataclasses.dataclass
    class Scaled:
        value: torch.Tensor

        def __post_init__(self):
            self.value = self.value * 10

    def fn(a):
        s = Scaled(a + 1)
        return s.value - 1

    x = torch.randn(3)
    assert same(Compiled(fn)(x), fn(x))


def test_namedtuple_input_is_indexed_and_unpacked():
    def fn(p):
        first, second = p
        return p[0] * p.second + first - second

    pair = Pair(torch.randn(3), torch.randn(3))
    compiled = Compiled(fn)
    assert same(compiled(pair), fn(pair))
    assert compiled.backend.graph_count == 1


def test_sets_of_constants():
    def fn(a, names):
        allowed = {"x", "y"}
        allowed.add("z")
        wanted = {n for n in names if n in allowed}
        return a * len(wanted)

    compiled = Compiled(fn)
    x = torch.randn(3)
    assert same(compiled(x, ["x", "z", "q"]), x * 2)
    assert compiled.backend.graph_count == 1
