"""graph_break() (Ember's, and Dynamo's once registered) and torch.compiler.disable honoured by
the trace (variables/compiler_directives.py): a graph break where the user asked for one, and
a disabled function run as it is (its frame not compiled)."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo

from conftest import Compiled, same
from ember_bytecode_tracer.directives import graph_break as ember_graph_break
from ember_bytecode_tracer.directives import register_graph_break
from ember_bytecode_tracer.exc import Unsupported

# Dynamo's directive, registered as the conformance harness does (Ember never names it)
register_graph_break(torch._dynamo.graph_break, "torch._dynamo.graph_break() was called")


def test_graph_break_call_splits_the_graph():
    def fn(x):
        y = x.sin()
        torch._dynamo.graph_break()
        return y.cos()

    x = torch.randn(4)
    compiled = Compiled(fn)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 2
    assert any("graph_break" in str(b) for b in compiled.breaks)


def test_embers_own_graph_break_splits_the_graph():
    def fn(x):
        y = x.sin()
        ember_graph_break()
        return y.cos()

    x = torch.randn(4)
    compiled = Compiled(fn)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 2


def test_register_graph_break_refuses_a_non_function():
    with pytest.raises(TypeError, match="takes a function"):
        register_graph_break(3)


def test_graph_break_call_refused_under_fullgraph():
    def fn(x):
        torch._dynamo.graph_break()
        return x + 1

    with pytest.raises(Unsupported, match="graph_break"):
        Compiled(fn, fullgraph=True)(torch.randn(2))


def graph_break():
    """A user's function that only looks like Dynamo's (same module and name): not a break."""


graph_break.__module__ = "torch._dynamo.decorators"


def test_a_look_alike_of_graph_break_is_traced_through():
    def fn(x):
        y = x.sin()
        graph_break()
        return y.cos()

    x = torch.randn(4)
    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1


@torch.compiler.disable
def _left_alone(x):
    return x * 5


def test_a_disabled_function_runs_as_it_is():
    def fn(x):
        y = x + 1
        y = _left_alone(y)
        return y - 1

    x = torch.randn(4)
    compiled = Compiled(fn)
    assert same(compiled(x), fn(x))
    # the graph before the call and the one after it; none for _left_alone's own frame
    assert compiled.backend.graph_count == 2
    assert [b for b in compiled.backend.ops(0)] == ["add"]
    assert all(r.code is not _left_alone._torchdynamo_orig_callable.__code__
               for r in compiled.compiler.records)  # fmt: skip


def test_a_registered_torch_function_is_a_break_not_a_graph_op():
    """Registered breaks are recognised before the torch-function rules (issue 26): a C
    function of torch registered as a break runs as Python between two graphs."""
    opaque_add = torch._C._dynamo.eval_frame.unsupported  # a + b, in C
    register_graph_break(opaque_add, "a registered break")

    def fn(x):
        y = x.sin()
        z = opaque_add(y, y)
        return z.cos()

    compiled = Compiled(fn)
    x = torch.randn(4)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 2
    assert all("unsupported" not in op for i in range(2) for op in compiled.backend.ops(i))


def _shift_by(amount):
    """A new disabled function per call, over the same code (a closure over `amount`)."""

    @torch.compiler.disable
    def shifted(x):
        return x + amount

    return shifted


def test_a_disabled_function_made_per_call_is_guarded_by_its_code_not_its_identity():
    def fn(x, shift):
        y = x.sin()
        y = shift(y)  # a break; after it, the rest resumes with `shift` on the stack
        return y.cos()

    compiled = Compiled(fn)
    x = torch.randn(4)
    for amount in (1.0, 2.0, 3.0):  # the closure's value is the call's own business
        shift = _shift_by(amount)
        assert same(compiled(x, shift), fn(x, shift))
    assert len(compiled.compiler.records) == 2  # fn up to the break, and its resume
    graphs = compiled.backend.graph_count

    # another code behind the wrapper, or no wrapper at all: the trace no longer holds
    other = torch.compiler.disable(lambda t: t * 10)
    assert same(compiled(x, other), fn(x, other))
    assert len(compiled.compiler.records) == 4  # fn and its resume, traced again

    def plain(t):  # not disabled: the trace goes through it (one graph for the whole)
        return t - 4

    before = compiled.backend.graph_count
    assert same(compiled(x, plain), fn(x, plain))
    assert compiled.backend.graph_count == before + 1
    assert graphs == 2
