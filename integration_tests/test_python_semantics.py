"""Python semantics kept under the default backend (issue 26): one `inductor` case per class
of packages/bytecode_tracer/tests/tracer/test_python_semantics.py, compared with eager and
checked to have run compiled."""

from __future__ import annotations

import collections
import functools

import pytest
import torch

import ember

pytestmark = pytest.mark.usefixtures("fresh_ember")


def _ran_compiled() -> None:
    assert ember.counters["inductor"]["forward_runs"] >= 1, dict(ember.counters["inductor"])


def test_dict_views_are_live_under_inductor():
    def fn(x):
        table = {"a": x}
        vals = table.values()
        table["b"] = x.sin()
        return sum(vals) * len(vals)

    x = torch.randn(4)
    torch.testing.assert_close(ember.compile(fn, fullgraph=True)(x), fn(x))
    _ran_compiled()


class _Scaled:
    def __get__(self, obj, owner=None):
        return self if obj is None else obj.__dict__["_scaled"]

    def __set__(self, obj, value):
        obj.__dict__["_scaled"] = value * 3


class _Box:
    scaled = _Scaled()


def test_data_descriptor_set_under_inductor():
    def fn(x, box):
        box.scaled = x.cos()
        return box.scaled + 1

    x = torch.randn(4)
    eager_box, compiled_box = _Box(), _Box()
    expected = fn(x, eager_box)
    torch.testing.assert_close(ember.compile(fn, fullgraph=True)(x, compiled_box), expected)
    torch.testing.assert_close(compiled_box._scaled, eager_box._scaled)
    _ran_compiled()


class _Measured(collections.namedtuple("_Measured", "value scale")):
    pass


def test_namedtuple_attribute_kept_under_inductor():
    def fn(x):
        out = _Measured(x.exp(), 2)
        out.extra = x * out.scale
        return out

    x = torch.randn(4)
    expected, got = fn(x), ember.compile(fn, fullgraph=True)(x)
    torch.testing.assert_close(got.value, expected.value)
    torch.testing.assert_close(got.extra, expected.extra)
    _ran_compiled()


def test_rejected_builtin_arguments_raise_under_inductor():
    def fn(x):
        y = x.relu()
        try:
            flag = isinstance(y, torch.Tensor, exact=True)
        except TypeError:
            flag = "raised"
        return y * 2, flag

    x = torch.randn(4)
    expected, got = fn(x), ember.compile(fn, fullgraph=True)(x)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] == expected[1] == "raised"
    _ran_compiled()


class _HalveInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        ctx.mark_dirty(t)
        return t.mul_(0.5)

    @staticmethod
    def backward(ctx, grad):
        return grad * 0.5


def test_dirty_input_of_a_function_under_inductor():
    def fn(a):
        b = a.sin()
        _HalveInPlace.apply(b)
        return (b * a).sum()

    grads = []
    for run in (fn, ember.compile(fn)):
        a = torch.linspace(-1.0, 1.0, 5, requires_grad=True)
        loss = run(a)
        loss.backward()
        grads.append((loss.detach(), a.grad))
    torch.testing.assert_close(grads[1], grads[0])
    _ran_compiled()


def test_scalar_type_dtype_argument_under_inductor():
    def fn(x):
        return x.mul(2).to(bool), x.to(float) * 3

    x = torch.randn(5)
    expected, got = fn(x), ember.compile(fn, fullgraph=True)(x)
    for e, g in zip(expected, got, strict=True):
        assert g.dtype == e.dtype
        torch.testing.assert_close(g, e)
    _ran_compiled()


class _Slotted:
    __slots__ = ("spare", "value")

    def __init__(self, value):
        self.value = value


def test_slotted_object_made_in_the_trace_under_inductor():
    def fn(x):
        s = _Slotted(x.cos())
        s.value = s.value * 2
        return s, s.value + 1, hasattr(s, "spare")

    x = torch.randn(4)
    (made, y, spare), (want, expected, want_spare) = ember.compile(fn, fullgraph=True)(x), fn(x)
    torch.testing.assert_close(y, expected)
    torch.testing.assert_close(made.value, want.value)
    assert spare is want_spare is False and not hasattr(made, "spare")
    _ran_compiled()


class _Recording:
    def __init__(self):
        object.__setattr__(self, "names", [])

    def __setattr__(self, name, value):
        self.names.append(name)
        super().__setattr__(name, value)

    def __getattr__(self, name):
        return 0.5

    def __delattr__(self, name):
        self.names.append("-" + name)
        super().__delattr__(name)


def test_user_attribute_hooks_under_inductor():
    def fn(x):
        r = _Recording()
        r.a = x.exp()
        r.b = x + 1
        del r.b
        return r, r.a * r.missing + r.b

    x = torch.randn(4)
    (made, y), (want, expected) = ember.compile(fn, fullgraph=True)(x), fn(x)
    torch.testing.assert_close(y, expected)
    assert made.names == want.names == ["a", "b", "-b"]
    torch.testing.assert_close(made.a, want.a)
    _ran_compiled()


def test_frame_local_class_and_weak_reference_under_inductor():
    import weakref

    def fn(x):
        class Acc:
            def __init__(self):
                self.total = 0

            def add(self, t):
                self.total = self.total + t
                return self

        acc = Acc().add(x).add(x.sin())
        ref = weakref.ref(acc)
        return ref().total * (ref() is acc)

    x = torch.randn(4)
    torch.testing.assert_close(ember.compile(fn, fullgraph=True)(x), fn(x))
    _ran_compiled()


def test_returned_exception_object_under_inductor():
    def fn(x):
        return RuntimeError("bad value", 3), x.relu() + 1

    x = torch.randn(4)
    (exc, y), (want, expected) = ember.compile(fn, fullgraph=True)(x), fn(x)
    torch.testing.assert_close(y, expected)
    assert type(exc) is RuntimeError and exc.args == want.args
    _ran_compiled()


def test_partial_attributes_under_inductor():
    def fn(x):
        part = functools.partial(torch.add, other=x.cos())
        if hasattr(part, "keywords") and not hasattr(part, "__name__"):
            return part(x) * len(part.keywords)
        return x

    x = torch.randn(4)
    torch.testing.assert_close(ember.compile(fn, fullgraph=True)(x), fn(x))
    _ran_compiled()


def test_defaultdict_with_a_lambda_factory_under_inductor():
    def fn(x):
        table = collections.defaultdict(lambda: x.sin())
        table["b"] = table["a"] * 2  # "a" made by the factory
        counts = collections.defaultdict.fromkeys("ab", 1)
        return table["a"] + table["b"] * counts["b"]

    x = torch.randn(4)
    torch.testing.assert_close(ember.compile(fn, fullgraph=True)(x), fn(x))
    _ran_compiled()


def test_identity_of_tensors_under_inductor():
    def fn(x):
        z = x.clone()
        y = z.add_(1)
        if y is z and 2 in [1, 2, z]:
            return y * 2
        return y - 1

    x = torch.randn(4)
    torch.testing.assert_close(ember.compile(fn, fullgraph=True)(x), fn(x))
    _ran_compiled()


def test_dict_copy_and_update_from_pairs_under_inductor():
    def fn(x):
        table = {"a": x.sin()}
        table.update([("b", x.cos())], c=x * 2)
        snapshot = table.copy()
        table["a"] = x
        return snapshot["a"] + snapshot["b"] * snapshot["c"] + table["a"]

    x = torch.randn(4)
    torch.testing.assert_close(ember.compile(fn, fullgraph=True)(x), fn(x))
    _ran_compiled()


def test_set_argument_changed_in_place_under_inductor():
    def fn(x, names):
        names.add("seen")
        return x.sin() * len(names) if names.isdisjoint({"skip"}) else x

    x, names = torch.randn(4), {"a"}
    torch.testing.assert_close(ember.compile(fn, fullgraph=True)(x, names), fn(x, {"a"}))
    assert names == {"a", "seen"}
    _ran_compiled()


def test_tensor_keys_under_inductor():
    weight = torch.nn.Parameter(torch.ones(4))

    def fn(x):
        table = {weight: x.sin(), "b": 2}
        table[x] = table[weight] * table["b"]
        return table[x] + table[weight] + (1 if x in table else 0)

    x = torch.randn(4)
    torch.testing.assert_close(ember.compile(fn, fullgraph=True)(x), fn(x))
    _ran_compiled()


def test_nonlocal_write_below_the_compiled_frame_under_inductor():
    def make():
        count = 0.5
        total = torch.zeros(4)

        def outer(x):
            def bump():
                nonlocal count, total
                count += 1
                total = total + x.cos()
                return total * count

            return bump()

        return outer, lambda: (count, total)

    (eager_fn, eager_state), (fn, state) = make(), make()
    compiled = ember.compile(fn, fullgraph=True)
    x = torch.randn(4)
    for _ in range(2):
        torch.testing.assert_close(compiled(x), eager_fn(x))
        torch.testing.assert_close(state(), eager_state())
    _ran_compiled()
