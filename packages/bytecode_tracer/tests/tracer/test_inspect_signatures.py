"""`inspect.signature` of known functions and classes in traced code (issue 26): the
Signature and its Parameters are constants read at trace time (defaults, kinds, `empty`),
`bind()` binds trackers as eager binds values, and a BoundArguments built in the trace is
rebuilt after the graph, all in one graph and matching eager; integration_tests/
test_library_constants_inductor.py runs a binding under the default backend."""

import inspect

import torch

from conftest import Compiled, same


def scale(t: torch.Tensor, factor=2.0, *extra, shift=0.5, **options) -> torch.Tensor:
    return t * factor + shift


class Layer:
    def __init__(self, width, depth=3, *, bias=True):
        self.width = width


def test_parameter_defaults_kinds_and_empty_are_read_now():
    def fn(x, callback):
        parameters = inspect.signature(callback).parameters
        first = parameters["t"]
        n = sum(p.default is not inspect.Parameter.empty for p in parameters.values())
        positional = [
            p.name for p in parameters.values() if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        ]
        if first.annotation is torch.Tensor and first.default is inspect.Parameter.empty:
            return x * parameters["factor"].default + n + len(positional)
        return x

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x, scale), fn(x, scale))
    assert compiled.backend.graph_count == 1 and not compiled.breaks


def test_bind_and_mutate_and_apply_defaults_match_eager():
    def fn(x, fill):
        signature = inspect.signature(scale)
        bound = signature.bind(x, 3.0, 7, 8, mode="fast")
        bound.arguments["shift"] = 1.5
        if fill:
            bound.apply_defaults()
        out = scale(*bound.args, **bound.kwargs)
        return out, bound, bound.arguments, bound.args[2:], bound.kwargs, signature

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    for fill in (True, False):
        got, want = compiled(x, fill), fn(x, fill)
        assert same(got[0], want[0])
        assert got[1].arguments.keys() == want[1].arguments.keys()
        assert got[2] is got[1].arguments  # the same dict, as in eager
        assert got[3:] == want[3:]
        assert got[1].signature == want[1].signature
    assert not compiled.breaks


def test_signature_of_a_class_binds_its_constructor_arguments():
    def fn(x):
        bound = inspect.signature(Layer).bind(4, bias=False)
        return x + bound.arguments["width"], bound

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    got, want = compiled(x), fn(x)
    assert same(got[0], want[0]) and got[1] == want[1]
    assert not compiled.breaks


def test_a_binding_error_raises_as_eager():
    def fn(x):
        try:
            inspect.signature(Layer).bind(1, 2, 3)
        except TypeError:
            return x + 1
        return x

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))


def test_a_default_of_a_function_made_in_the_trace_is_only_read_when_known():
    def fn(x, y):
        def known(a, b=2):
            return a

        def unknown(a, b=y * 2):
            return a

        n = inspect.signature(known).parameters["b"].default
        return x + n, inspect.signature(unknown).parameters["b"].default

    compiled = Compiled(fn)
    x, y = torch.randn(3), torch.randn(3)
    got, want = compiled(x, y), fn(x, y)
    assert same(got[0], want[0]) and same(got[1], want[1])
    # the tensor default is not a constant: a break (here the whole frame), not a None
    assert compiled.breaks or compiled.compiler.skipped
