"""The graphs handed to a backend read as the user's code (issue 26): inputs named after the
expression that reached them as Dynamo spells it (`L['x']` -> `L_x_`, the stack carried
into a resume function -> `L_stack0_`), a tensor named after the first local it is stored
in, each node's user stack in `node.stack_trace`, `torch.set_default_dtype` kept as the call
the user wrote. These are what explain/report and a backend's printout show."""

from __future__ import annotations

import contextlib

import pytest
import torch

from conftest import Compiled, same
from ember_bytecode_tracer.directives import graph_break


def _inputs(gm: torch.fx.GraphModule) -> list[str]:
    return [n.target for n in gm.graph.nodes if n.op == "placeholder"]


def _calls(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op.startswith("call")]


def test_inputs_are_named_after_their_source_as_dynamo_spells_them():
    class Holder:
        def __init__(self) -> None:
            self.weight = torch.randn(3)

    holder = Holder()

    def fn(x, h):
        return x.sin() + h.weight

    x = torch.randn(3)
    compiled = Compiled(fn)
    assert same(compiled(x, holder), fn(x, holder))
    (gm,) = compiled.backend.graphs
    assert _inputs(gm) == ["L_x_", "L_h_weight"]
    assert "def forward(self, L_x_" in gm.print_readable(False)


def test_the_stack_carried_into_a_resume_function_reads_as_stack_n():
    def fn(x):
        return x.sin() + (graph_break() or x.cos()) + x.tan()

    x = torch.randn(4)
    compiled = Compiled(fn)
    assert same(compiled(x), fn(x))
    first, resumed = compiled.backend.graphs
    assert _inputs(first) == ["L_x_"]
    assert _inputs(resumed)[0] == "L_stack0_" and "L_x_" in _inputs(resumed)


def test_a_tensor_takes_the_name_of_the_first_local_it_is_stored_in():
    def fn(x):
        doubled = x * 2
        alias = doubled  # a second name does not rename it
        return alias + x.cos()

    x = torch.randn(4)
    compiled = Compiled(fn)
    assert same(compiled(x), fn(x))
    names = [n.name for n in _calls(compiled.backend.graphs[0])]
    assert names == ["doubled", "cos", "add"]
    # inputs keep their own names
    assert next(n.name for n in compiled.backend.graphs[0].graph.nodes) == "l_x_"


def test_nodes_carry_the_users_stack():
    def helper(t):
        return t.exp()

    def fn(x):
        y = x.sin()
        return helper(y)

    x = torch.randn(4)
    compiled = Compiled(fn)
    assert same(compiled(x), fn(x))
    sin, exp = _calls(compiled.backend.graphs[0])
    assert "in fn" in sin.stack_trace and "y = x.sin()" in sin.stack_trace
    # the inlined call: its own line, innermost last, under the caller's
    lines = exp.stack_trace.strip().splitlines()
    assert "in helper" in lines[-2] and "return t.exp()" in lines[-1]
    assert any("in fn" in line for line in lines[:-2])
    text = compiled.backend.graphs[0].print_readable(False)
    assert "code: y = x.sin()" in text and "No stacktrace" not in text


@contextlib.contextmanager
def _default_dtype(dtype):
    previous = torch.get_default_dtype()
    try:
        torch.set_default_dtype(dtype)
        yield
    finally:
        torch.set_default_dtype(previous)


def test_set_default_dtype_stays_the_call_the_user_wrote():
    def fn():
        with _default_dtype(torch.float64):
            made = torch.tensor([1.0, 2.0])
        return made

    compiled = Compiled(fn, fullgraph=True)
    got = compiled()
    assert got.dtype == torch.float64 and same(got, fn())
    assert torch.get_default_dtype() == torch.float32
    targets = [n.target for n in _calls(compiled.backend.graphs[0])]
    assert targets == [torch.set_default_dtype, torch.tensor, torch.set_default_dtype]


def test_set_default_dtype_refused_by_eager_raises_the_same_error():
    def fn(x):
        torch.set_default_dtype(torch.int64)
        return x + 1

    x = torch.randn(2)
    with pytest.raises(TypeError) as eager:
        fn(x)
    with pytest.raises(TypeError) as compiled:
        Compiled(fn)(x)
    assert str(compiled.value) == str(eager.value)
    assert torch.get_default_dtype() == torch.float32
