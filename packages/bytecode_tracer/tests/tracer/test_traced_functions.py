"""Functions as values in the trace: attributes of functions made in the trace
(functools.wraps), super() in classmethods, lru_cache'd functions, str methods on
constants, aten overloads reached by attribute, scripted functions. Each is compared with
eager and must be one graph."""

from __future__ import annotations

import functools

import pytest
import torch

from conftest import Compiled, same


def _one_graph(fn, *args):
    compiled = Compiled(fn, fullgraph=True)
    got = compiled(*args)
    assert same(got, fn(*args))
    assert compiled.backend.graph_count == 1
    return got


# ---- functools.wraps and attributes of nested functions ---------------------------------
def test_wraps_copies_the_metadata_of_an_inner_function():
    def fn(x):
        def scale(y: torch.Tensor) -> torch.Tensor:
            """Doubles."""
            return y * 2

        @functools.wraps(scale)
        def logged(y):
            return scale(y) + 1

        meta = (logged.__name__, logged.__qualname__, logged.__doc__, logged.__module__)
        return logged(x), meta, logged.__wrapped__ is scale, list(logged.__annotations__)

    _one_graph(fn, torch.randn(3))


def test_a_decorator_made_in_the_trace_with_wraps():
    def fn(x):
        def twice(f):
            @functools.wraps(f)
            def run(*args):
                return f(f(*args))

            return run

        @twice
        def step(y):
            return y.sin()

        return step(x), step.__name__, step.__wrapped__(x)

    _one_graph(fn, torch.randn(4))


def test_function_attributes_written_and_read_back():
    def fn(x):
        def g(y, k=2):
            return y * k

        g.tag = "scaled"
        g.__doc__ = "changed"
        g.__defaults__ = (3,)
        seen = (g.tag, g.__dict__["tag"], hasattr(g, "missing"), getattr(g, "other", 5))
        return g(x), seen, g.__doc__, g.__defaults__, g.__kwdefaults__

    _one_graph(fn, torch.randn(3))


def test_wraps_a_global_function():
    def fn(x):
        @functools.wraps(torch_free_helper)
        def wrapper(y):
            return torch_free_helper(y) - 1

        return wrapper(x), wrapper.__name__, wrapper.__doc__, wrapper.__dict__

    _one_graph(fn, torch.randn(3))


def torch_free_helper(y):
    """A helper with a docstring."""
    return y + 1


def test_a_function_made_in_the_trace_that_escapes_still_breaks():
    # Not rebuilt after the graph: a graph break with eager's result, never a function
    # without the attributes the trace gave it.
    def fn(x):
        def g(y):
            return y + 1

        g.tag = 1
        return x + 1, g

    compiled = Compiled(fn)
    got, g = compiled(torch.ones(2))
    assert same(got, torch.ones(2) + 1)
    assert g.tag == 1 and same(g(torch.ones(1)), torch.ones(1) + 1)


# ---- super() in classmethods and staticmethods -------------------------------------------
class _Base:
    factor = 2

    @classmethod
    def scale(cls, x):
        return x * cls.factor

    @staticmethod
    def shift(x):
        return x + 1

    def plain(self, x):
        return x - self.factor


class _Child(_Base):
    factor = 5

    @classmethod
    def scale(cls, x):
        return super().scale(x) + 1  # bound to _Child: cls.factor is 5

    @staticmethod
    def shift(x):
        return super(_Child, _Child).shift(x) * 3

    @staticmethod
    def scale_of(cls, x):
        return super(_Child, cls).scale(x)  # noqa: UP008 (the explicit form)

    @classmethod
    def unbound_plain(cls, x):
        return super().plain(_Child(), x)  # a plain function on a class stays unbound

    def from_instance(self, x):
        return super().scale(x), super().shift(x)


class _GrandChild(_Child):
    factor = 7


def test_super_in_a_classmethod_binds_to_the_class():
    def fn(x):
        return _Child.scale(x), _GrandChild.scale(x), _GrandChild().scale(x)

    _one_graph(fn, torch.randn(3))


def test_super_with_explicit_class_in_staticmethods():
    def fn(x):
        return _Child.shift(x), _Child.scale_of(_GrandChild, x), _Child.scale_of(_Child, x)

    _one_graph(fn, torch.randn(3))


def test_super_reaching_classmethods_staticmethods_and_plain_functions():
    child = _GrandChild()

    def fn(x):
        return child.from_instance(x), _Child.unbound_plain(x)

    _one_graph(fn, torch.randn(3))


# ---- functools.lru_cache / functools.cache -----------------------------------------------
@functools.lru_cache(maxsize=16)
def _cached_scale(n):
    return n * 2 + 1


@functools.cache
def _cached_on_tensors(x, k=1):
    return x.cos() * k


def test_lru_cached_functions_are_traced_through_what_they_wrap(caplog):
    def fn(x):
        return x * _cached_scale(3), _cached_on_tensors(x, k=2), _cached_scale.__wrapped__(4)

    with caplog.at_level("WARNING", logger="ember.tracer"):
        _one_graph(fn, torch.randn(3))
    assert "lru_cache-wrapped" in caplog.text  # as torch.compile, the cache is bypassed


def test_an_unhashable_argument_to_a_cached_function_raises_as_eager():
    def fn(x):
        return x * _cached_scale([1])

    with pytest.raises(TypeError, match="unhashable"):
        Compiled(fn)(torch.randn(3))


# ---- str methods and os.fspath on constants ----------------------------------------------
def test_str_methods_on_constants_fold_at_trace_time():
    def fn(x, name="conv1.weight"):
        parts = name.split(".")
        parts.append("grad")
        checks = ("ab1".isalnum(), "12".isdigit(), name.startswith("conv"), " a ".strip())
        text = "{}-{n}".format(len(parts), n=name.upper().replace("CONV", "c"))
        if name.endswith("weight") and "x_y".isidentifier():
            x = x * 2
        return x + len(text), parts, ".".join(parts), checks, text.lower(), name.partition(".")

    _one_graph(fn, torch.randn(3))
    _one_graph(fn, torch.randn(3), "bn.bias")


def test_a_str_argument_is_guarded_by_value():
    def fn(x, mode):
        return x + 1 if mode.isalpha() else x - 1

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x, "relu"), x + 1)
    assert same(compiled(x, "relu6"), x - 1)  # a new string: a new trace


def test_a_str_method_that_raises_is_caught_as_in_eager():
    def fn(x, text="abc"):
        try:
            where = text.index("z")
        except ValueError:
            where = -1
        return x * where

    _one_graph(fn, torch.randn(3))


def test_os_fspath_of_constants():
    import os

    def fn(x, path="runs/a", raw=b"ab"):
        return x + len(os.fspath(path)) + len(os.fspath(raw)), os.fspath(path)

    _one_graph(fn, torch.randn(3))


# ---- aten overloads reached by attribute -------------------------------------------------
def test_aten_overloads_reached_by_attribute_are_graph_calls():
    aten = torch.ops.aten

    def fn(x, y):
        a = torch.ops.aten.relu.default(x)
        b = aten.add.Tensor(a, y, alpha=2)
        return aten.sum.dim_IntList(b, [0]), aten.mul.Scalar(b, 3)

    compiled = Compiled(fn, fullgraph=True)
    x, y = torch.randn(3, 2), torch.randn(3, 2)
    assert same(compiled(x, y), fn(x, y))
    assert compiled.backend.graph_count == 1
    targets = [n.target for n in compiled.backend.graphs[0].graph.nodes if n.op == "call_function"]
    assert torch.ops.aten.relu.default in targets and torch.ops.aten.add.Tensor in targets


def test_an_unknown_overload_name_still_breaks():
    def fn(x):
        return torch.ops.aten.relu.no_such_overload(x)

    with pytest.raises(Exception, match="no_such_overload"):
        Compiled(fn)(torch.randn(3))


# ---- torch.jit.script'ed functions --------------------------------------------------------
@torch.jit.script
def _scripted_bucket(pos: torch.Tensor, buckets: int) -> torch.Tensor:
    sign = torch.sign(pos)
    mid = buckets // 2
    return torch.where(pos.abs() < mid, pos, sign * mid)


@torch.jit.script
def _scripted_outer(x: torch.Tensor) -> torch.Tensor:
    return _scripted_bucket(x * 4, 6) + 1


def test_scripted_functions_are_traced_through_their_python_source():
    def fn(x):
        return _scripted_outer(x), _scripted_bucket(x, buckets=4)

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(8)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1
    assert "where" in compiled.backend.ops()  # the function's ops, not an opaque call


def test_a_scripted_function_without_its_python_source_breaks():
    scripted = torch.jit.script(lambda_free_double)
    del scripted._torchdynamo_inline

    def fn(x):
        return scripted(x) + 1

    compiled = Compiled(fn)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1 and compiled.breaks


def lambda_free_double(a: torch.Tensor) -> torch.Tensor:
    return a * 2


# ---- closures made before the trace, passing their cells on -----------------------------
def _only_known_keywords(known_names, bias):
    allowed = tuple(known_names)  # a cell of the closure, read by the nested code below

    def call(a, **options):
        kept = {k: v for k, v in options.items() if k in allowed}
        shifts = [bias * i for i in range(len(allowed))]
        add = lambda t: t + bias  # noqa: E731
        return add(a * kept.get("scale", 1.0)) + sum(shifts)

    return call


def test_nested_code_of_an_outside_closure_reads_its_cells():
    call = _only_known_keywords(["scale"], 2.0)

    def fn(a):
        return call(a, scale=3.0, other=5)

    _one_graph(fn, torch.randn(3))


def test_a_changed_cell_of_an_outside_closure_recompiles():
    call = _only_known_keywords(["scale"], 2.0)
    compiled = Compiled(lambda a: call(a, scale=3.0), fullgraph=True)
    a = torch.randn(3)
    assert same(compiled(a), call(a, scale=3.0))
    call.__closure__[0].cell_contents = ()  # `allowed`: now no keyword is kept
    assert same(compiled(a), call(a, scale=3.0))
    assert same(compiled(a), a + 2.0)


def _combine(*parts, weight, shift=0.0):
    return sum(parts) * weight + shift


def _mixed(first, *rest, weight, **extra):
    return (first + sum(rest)) * weight + len(extra)


def test_keyword_only_parameters_after_star_args_bind_by_name():
    def fn(a):
        return (
            _combine(a, a.cos(), weight=2.0),
            _combine(a, a, a, weight=0.5, shift=1.0),
            _mixed(a, a.sin(), weight=3.0, other=1),
        )

    _one_graph(fn, torch.randn(3))


def test_a_function_compiled_on_its_own_is_traced_into_the_callers_graph():
    # what ember.compile returns: a wrapper that sets the frame hook around the function it
    # compiled (registered with the tracer); reached from a trace, that function is traced
    from ember_bytecode_tracer.directives import register_compiled

    def inner(y):
        return y.tanh() * 2

    def wrapper(*args, **kwargs):
        raise AssertionError("the wrapper is not traced")

    register_compiled(wrapper, inner)

    def fn(a):
        return wrapper(a) + 1

    compiled = Compiled(fn, fullgraph=True)
    a = torch.randn(3)
    assert same(compiled(a), inner(a) + 1)
    assert compiled.backend.graph_count == 1


def _accumulator(start):
    total = start
    calls = 0

    def add(value):
        nonlocal total, calls
        total = total + value
        calls += 1
        return total

    def peek():
        return total, calls

    return add, peek


def test_a_closure_made_outside_writes_its_cells_as_eager():
    def fn(add, peek, a):
        first = add(a)
        second = add(a.sin())
        return first, second, peek()

    a = torch.randn(3)
    eager_add, eager_peek = _accumulator(torch.zeros(3))
    want = fn(eager_add, eager_peek, a)
    add, peek = _accumulator(torch.zeros(3))
    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(add, peek, a), want)
    assert same(peek(), eager_peek())  # the cells hold what eager left there
    assert compiled.backend.graph_count == 1
    assert same(compiled(add, peek, a)[2], fn(eager_add, eager_peek, a)[2])  # and again


def test_a_closure_over_tensors_passed_alone_is_traced_where_called():
    add, _ = _accumulator(torch.ones(2))
    eager_add, _ = _accumulator(torch.ones(2))

    def fn(step):
        return step(torch.full((2,), 2.0)) * 3

    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(add), fn(eager_add))
    assert compiled.backend.graph_count == 1
