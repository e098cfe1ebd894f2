"""More Python semantics answered as CPython does (issue 26, classes of PyTorch's
test_functions.py): each compared with eager, in one graph."""

from __future__ import annotations

import collections
import collections.abc
import dataclasses
import enum
import functools
import math
import operator
import sys
import typing

import numpy as np
import pytest
import torch

from conftest import Compiled, same

_PARTIAL_NAMES = (
    "func", "args", "keywords", "__dict__", "__call__", "__repr__", "__reduce__",
    "__setstate__", "__class__", "__vectorcalloffset__", "__doc__",
    "__name__", "__qualname__", "__code__", "__defaults__", "__get__", "__wrapped__",
    "__globals__", "__closure__", "no_such_thing",
)  # fmt: skip


@pytest.mark.parametrize("name", _PARTIAL_NAMES)
def test_hasattr_of_a_partial_built_in_the_trace(name):
    def fn(x):
        scale = functools.partial(torch.mul, other=x)
        found = hasattr(scale, name)
        return (scale(x) if found else x - 1), found

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1


def test_attributes_of_a_partial_read_in_the_trace():
    def add3(a, b, c):
        return a + b * c

    def fn(x):
        part = functools.partial(add3, x, c=2)
        part.keywords["c"] = 5  # its own dict: the next call sees it
        return part.func(*part.args, 1, **part.keywords), part(x), len(part.args)

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1


def test_hasattr_of_a_partial_passed_in_keeps_its_own_attributes_apart():
    def fn(x, part):
        return part(x) + (1 if hasattr(part, "args") else 2) + (3 if hasattr(part, "tag") else 4)

    compiled = Compiled(fn)
    x = torch.randn(3)
    plain = functools.partial(torch.add, other=1.0)
    assert same(compiled(x, plain), fn(x, plain))
    tagged = functools.partial(torch.add, other=1.0)
    tagged.tag = 1
    assert same(compiled(x, tagged), fn(x, tagged))


def test_defaultdict_made_by_fromkeys_then_written():
    def fn(x):
        table = collections.defaultdict.fromkeys("pq", 0)
        table["p"] = 3
        table.setdefault("r", 7)
        table.setdefault("p", 100)
        table.setdefault("s")
        try:
            table["missing"]  # no factory: a KeyError, as a plain dict
        except KeyError:
            table["caught"] = 1
        return x * table["p"] + table["r"], table["s"] is None, sorted(table), table.default_factory

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1


def test_fromkeys_of_dict_types_share_one_value():
    def fn(x):
        names = dict.fromkeys(["a", "b"])
        moved = dict.fromkeys(names, x + 1)
        ordered = collections.OrderedDict.fromkeys(("u", "v"), [])
        ordered["u"].append(x)  # the same list under every key
        return moved["a"] * moved["b"], len(ordered["v"]), type(ordered), list(names)

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    for _ in range(2):  # the classmethod read again: no recompile
        assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1


def _make_list():
    return [1]


@pytest.mark.parametrize("kind", ["lambda", "closure", "dict", "list", "function"])
def test_defaultdict_built_with_a_factory_creates_missing_entries(kind):
    def fn(x):
        offset = 2

        def inner():
            return [offset]

        factory = {
            "lambda": lambda: {"v": x},
            "closure": inner,
            "dict": dict,
            "list": list,
            "function": _make_list,
        }[kind]
        table = collections.defaultdict(factory)
        table["given"] = x + 1
        first = table["absent"]  # made by the factory and stored
        return table["given"], first, "absent" in table, len(table)

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x)[0], fn(x)[0]) and same(compiled(x)[1:], fn(x)[1:])
    assert compiled.backend.graph_count == 1


def test_defaultdict_returned_keeps_its_factory():
    def fn(x):
        table = collections.defaultdict(list)
        table["a"].append(x * 2)
        return table

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    got, expected = compiled(x), fn(x)
    assert type(got) is collections.defaultdict and got.default_factory is list
    assert same(dict(got), dict(expected)) and got["new"] == []


def test_defaultdict_passed_in_is_written_back():
    table = collections.defaultdict(int)

    def fn(x):
        table["hits"] += 1
        table["scale"] = 3
        return x * table["scale"] + table["hits"]

    compiled = Compiled(fn, fullgraph=True)
    expected_table = collections.defaultdict(int)
    x = torch.randn(3)
    for _ in range(2):
        got = compiled(x)
        expected_table["hits"] += 1
        expected_table["scale"] = 3
        assert same(got, x * 3 + expected_table["hits"])
        assert dict(table) == dict(expected_table) and table.default_factory is int


def test_is_between_tensors_follows_the_objects():
    def fn(x, y):
        z = x.clone()
        same_inplace = z.mul_(2) is z  # in-place methods return the tensor itself
        noop = z.to(z.dtype) is z and z.contiguous() is z
        fresh = (z + 0) is z
        pair = x is y, x is not y
        return z * 3 if same_inplace else z - 3, noop, fresh, pair

    compiled = Compiled(fn, fullgraph=True)
    x, y = torch.randn(3), torch.randn(3)
    assert same(compiled(x, y), fn(x, y))
    assert same(compiled(x, x), fn(x, x))  # the same tensor twice: retraced, True
    assert same(compiled(x, y), fn(x, y))


def test_operator_is_and_is_not_on_tensors_and_numbers():
    def fn(x):
        y = x.add_(1)
        return operator.is_(x, y), operator.is_not(-4, x), operator.is_(None, None)

    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(torch.ones(2)), fn(torch.ones(2)))
    assert compiled.backend.graph_count == 1


def test_in_a_list_stops_at_the_first_match():
    def fn(x):
        items = [1, "a", x, 2.5]
        found = (1 in items, "a" in items, x in [x, 1], (x + 0) is items[2], 7 in [1, 2])
        return sum(v for v in items if not isinstance(v, str)), found

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1


def test_in_a_list_that_compares_a_number_with_a_tensor_breaks():
    def fn(x):
        return x + (1 if 5 in [0, x] else 2)

    compiled = Compiled(fn)
    for x in (torch.tensor(5.0), torch.tensor(4.0)):  # eager: x == 5 decides
        assert same(compiled(x), fn(x))


def test_unary_plus_on_tensors_and_numbers():
    def fn(x, n):
        return +x * +n, operator.pos(-n), +True

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    for n in (2, -1.5):
        assert same(compiled(x, n), fn(x, n))


def test_math_functions_fold_on_numbers():
    def fn(x, a):
        return x + math.radians(a) + math.degrees(0.5) + math.atan2(1.0, a) + math.hypot(3, a)

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x, 12), fn(x, 12))
    assert compiled.backend.graph_count == 1


def test_as_integer_ratio_of_numbers_and_symbolic_ints():
    def fn(x, n, f):
        num, den = n.as_integer_ratio()
        fnum, fden = f.as_integer_ratio()
        return x * num / den + fnum / fden + n.numerator + n.denominator + n.conjugate()

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    for n in (3, 4, 5):  # n becomes a symbolic int on a later call
        assert same(compiled(x, n, 0.75), fn(x, n, 0.75))


def test_zip_strict_of_equal_lengths_and_a_mismatch():
    def fn(x, names):
        total = x
        for name, scale in zip(names, [1, 2], strict=True):
            total = total + scale * len(name)
        return total

    whole = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(whole(x, ["a", "bb"]), fn(x, ["a", "bb"]))
    assert whole.backend.graph_count == 1
    compiled = Compiled(fn)
    for names in (["a"], ["a", "b", "c"]):  # eager raises: a break, then the same error
        with pytest.raises(ValueError):
            fn(x, names)
        with pytest.raises(ValueError):
            compiled(x, names)


def test_copies_of_dicts_and_deques_are_new_objects_of_their_type():
    def fn(x):
        plain = {"a": x, "b": x + 1}
        ordered = collections.OrderedDict(a=x)
        defaults = collections.defaultdict(list, a=[x])
        queue = collections.deque([x, 1])
        copies = plain.copy(), ordered.copy(), defaults.copy(), queue.copy()
        plain["a"] = x * 5  # the copies keep what they had
        copies[2]["new"].append(2)  # a copied defaultdict keeps its factory
        queue.append(3)
        return copies, [type(c) for c in copies], len(defaults), plain

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    got, expected = compiled(x), fn(x)
    assert same(got, expected)
    assert got[0][2].default_factory is list
    assert compiled.backend.graph_count == 1


def test_dict_update_from_pairs_zip_and_keywords():
    def fn(x, y):
        table = {"a": x}
        table.update([("b", y + 1), ["c", y]])
        table.update(zip("ad", [y * 2, x - 1], strict=True))
        table.update(e=x * 3)
        ordered = collections.OrderedDict(a=x)
        ordered.update((k, v * 2) for k, v in table.items())
        return table, ordered, list(ordered)

    compiled = Compiled(fn, fullgraph=True)
    x, y = torch.randn(3), torch.randn(3)
    assert same(compiled(x, y), fn(x, y))
    assert compiled.backend.graph_count == 1


_Pair = collections.namedtuple("_Pair", ["left", "right"])


@pytest.mark.parametrize("name", ["items", "keys", "_fields", "_asdict", "append", "left", "x"])
def test_hasattr_on_containers_sizes_and_namedtuples(name):
    def fn(x, table):
        values = [
            hasattr(table, name), hasattr(x.shape, name), hasattr([x], name), hasattr((x,), name),
            hasattr(_Pair(x, 1), name), hasattr(collections.OrderedDict(), name),
        ]  # fmt: skip
        return x + sum(values), values

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x, {"a": 1}), fn(x, {"a": 1}))
    assert compiled.backend.graph_count == 1


_SEEN_NAMES = {"a", "b"}


def test_set_from_a_global_is_changed_in_place_after_the_graph():
    _SEEN_NAMES.clear()
    _SEEN_NAMES.update(("a", "b"))

    def fn(x):
        _SEEN_NAMES.add("c")
        _SEEN_NAMES.discard("a")
        _SEEN_NAMES.update(["d"])
        return x * len(_SEEN_NAMES), "b" in _SEEN_NAMES

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    before = _SEEN_NAMES
    got = compiled(x)
    assert _SEEN_NAMES is before and {"b", "c", "d"} == _SEEN_NAMES
    assert same(got, (x * 3, True))


def test_set_argument_read_iterated_and_changed():
    def fn(x, names, other):
        total = x
        for name in sorted(names):  # its order, as guarded
            total = total + len(name)
        apart = names.isdisjoint(other)
        names |= {"zz"}  # in place: the caller's set
        names -= {"a"}
        return total, apart, len(names), [n for n in other]

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    for first in ({"a", "bb"}, {"a", "bb"}, {"ccc"}):
        eager_names, traced_names = set(first), set(first)
        expected = fn(x, eager_names, {"q", "a"})
        assert same(compiled(x, traced_names, {"q", "a"}), expected)
        assert traced_names == eager_names


class _Plain:
    pass


class _Named:
    def __init__(self, label):
        self.label = label

    def __str__(self):
        return f"named:{self.label}"


class _Shown:
    def __repr__(self):
        return "shown"


def test_equality_of_objects_without_eq_is_identity():
    def fn(x, given):
        made = _Plain()
        checks = (made == None, made != None, made == _Plain(), made == made, given == made)  # noqa: E711
        return x + sum(checks), checks

    compiled = Compiled(fn, fullgraph=True)
    x, given = torch.randn(3), _Plain()
    assert same(compiled(x, given), fn(x, given))
    assert compiled.backend.graph_count == 1


def test_str_of_objects_with_python_str_or_repr():
    def fn(x, given):
        return x * 2, str(_Named("in")), str(given), str(_Shown())

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    for label in ("a", "b"):
        given = _Named(label)
        assert same(compiled(x, given), fn(x, given))


def test_str_of_an_object_with_the_default_repr_breaks():
    def fn(x):
        text = str(_Plain())  # holds the address of an object made on this call
        return x + 1, text.split(" object at")[0]

    compiled = Compiled(fn)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))


def test_ordered_dict_passed_in_is_iterated_and_written_back():
    def fn(x, table):
        for key in table:
            x = x * table[key]
        table.move_to_end("a")
        table["z"] = 5
        return x, list(table)

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    eager_table = collections.OrderedDict(a=2, b=3)
    traced_table = collections.OrderedDict(a=2, b=3)
    assert same(compiled(x, traced_table), fn(x, eager_table))
    assert list(traced_table.items()) == list(eager_table.items())
    assert type(traced_table) is collections.OrderedDict


class _Registry(collections.abc.MutableMapping):
    """A user's mapping over a dict it holds (collections.abc supplies keys())."""

    def __init__(self, **entries):
        self._entries = dict(entries)

    def __getitem__(self, key):
        return self._entries[key]

    def __setitem__(self, key, value):
        self._entries[key] = value

    def __delitem__(self, key):
        del self._entries[key]

    def __iter__(self):
        return iter(self._entries)

    def __len__(self):
        return len(self._entries)


class _Columns:
    def __init__(self, *names):
        self.names = list(names)

    def keys(self):
        return reversed(self.names)

    def __getitem__(self, key):
        return len(key)


def _scaled(x, scale=1, shift=0):
    return x * scale + shift


def test_user_mappings_passed_in_are_merged_through_keys_and_getitem():
    def fn(x, registry, columns):
        merged = dict(registry)
        merged.update(columns)
        listed = [k for k in registry]
        return _scaled(x, **registry), merged, listed, dict(columns)

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    registry, columns = _Registry(scale=2, shift=x), _Columns("ab", "c")
    assert same(compiled(x, registry, columns), fn(x, registry, columns))
    assert compiled.backend.graph_count == 1


_WEIGHT = torch.nn.Parameter(torch.ones(3))
_BY_TENSOR = collections.defaultdict(list)


def test_tensors_as_dict_keys_by_identity():
    def fn(x, y):
        table = {"a": x, _WEIGHT: 3, y: "y"}
        table[x] = table[_WEIGHT] * 2
        found = (x in table, (x + 0) in table, y in table, table.get(x.view(3), "none"))
        keys = [k * 1 for k in table if isinstance(k, torch.Tensor)]
        return table, found, keys, table[_WEIGHT] * x

    compiled = Compiled(fn, fullgraph=True)
    x, y = torch.randn(3), torch.randn(3)
    got, expected = compiled(x, y), fn(x, y)
    assert same(got[1:], expected[1:])
    assert list(got[0]) == list(expected[0])  # the very tensors, in order
    assert [got[0][k] for k in got[0]] == [expected[0][k] for k in expected[0]]
    assert compiled.backend.graph_count == 1


def test_defaultdict_with_tensor_keys_from_a_global_is_written_back():
    _BY_TENSOR.clear()
    _BY_TENSOR[_WEIGHT].append(1)

    def fn(x):
        _BY_TENSOR[_WEIGHT].append(2)
        _BY_TENSOR["total"] = x.sum()
        return x * len(_BY_TENSOR[_WEIGHT])

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), x * 2)
    assert list(_BY_TENSOR) == [_WEIGHT, "total"] and _BY_TENSOR[_WEIGHT] == [1, 2]
    assert same(_BY_TENSOR["total"], x.sum())


def test_class_of_a_tensor_and_its_name():
    def fn(x, w):
        return x + 1, f"{x.__class__.__name__}/{w.__class__.__name__}", x.__class__ is torch.Tensor

    compiled = Compiled(fn, fullgraph=True)
    x, w = torch.randn(3), torch.nn.Parameter(torch.randn(3))
    assert same(compiled(x, w), fn(x, w))
    assert compiled.backend.graph_count == 1


def test_cache_keyed_by_shape_passed_in():
    def fn(x, cache):
        if x.shape not in cache:
            cache[x.shape] = x * 2
        return x + cache[x.shape]

    compiled = Compiled(fn, fullgraph=True)
    eager_cache, traced_cache = {}, {}
    for x in (torch.randn(2, 3), torch.randn(2, 3), torch.randn(4)):
        assert same(compiled(x, traced_cache), fn(x, eager_cache))
        assert list(traced_cache) == list(eager_cache)


class _Span(collections.namedtuple("_Span", ["start", "stop"])):
    @classmethod
    def unit(cls):
        return cls(0, 1)

    def width(self):
        return self.stop - self.start


def test_classmethod_of_a_namedtuple_built_in_the_trace():
    def fn(x):
        span = _Span(x, x * 3)
        return span.width(), span.unit().stop

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1


def test_tensors_made_from_one_array_are_distinct_objects():
    def fn(x):
        array = x.numpy() * 2
        first, second = torch.from_numpy(array), torch.as_tensor(array)
        second.add_(1)  # the same memory: first sees it
        return first is second, first * 1, {first: 1, second: 2}[first]

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    got, expected = compiled(x), fn(x)
    assert got[0] is expected[0] is False and got[2] == expected[2] == 1
    assert np.allclose(got[1].numpy(), expected[1].numpy())


def test_functions_made_in_the_trace_are_returned_as_new_functions():
    def fn(x):
        table = collections.defaultdict(lambda: [0])
        table["a"] = x + 1

        def scale(v, factor=2, *, shift=1):
            return v * factor + shift

        return table, scale, lambda: 7

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    got, expected = compiled(x), fn(x)
    assert same(dict(got[0]), dict(expected[0])) and got[0]["new"] == [0]
    assert got[1](3) == expected[1](3) == 7 and got[1].__qualname__ == expected[1].__qualname__
    assert got[2]() == 7 and compiled(x)[1] is not got[1]  # a new function on every call
    assert compiled.backend.graph_count == 1


class _Chained:
    def __init__(self, *parts):
        self.parts = parts

    def __iter__(self):
        for part in self.parts:
            yield from part
        yield "end"


@pytest.mark.skipif(
    sys.version_info >= (3, 12), reason="3.12's yield from (SEND) is still a graph break there"
)
def test_yield_from_in_a_users_iter():
    def fn(x, given):
        made = _Chained([1, 2], (3,))
        return x * sum(v for v in made if v != "end"), list(given), set(given)

    compiled = Compiled(fn, fullgraph=True)
    x, given = torch.randn(3), _Chained(["a"], [], ("b", "c"))
    assert same(compiled(x, given), fn(x, given))
    assert compiled.backend.graph_count == 1


def _same_arrays(got, expected):
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        g, e = np.asarray(g), np.asarray(e)
        assert g.dtype == e.dtype and g.shape == e.shape and np.allclose(g, e), (g, e)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_numpy_shift_norm_meshgrid_and_parts(dtype):
    def fn(x, y):
        a, b = x.numpy(), y.numpy()
        return (
            np.fft.fftshift(a), np.fft.ifftshift(a, axes=1), np.fft.fftshift(b),
            np.linalg.norm(a, axis=0), np.linalg.norm(a, axis=(0, 1), keepdims=True),
            *np.meshgrid(b, a[0]), *np.meshgrid(b, b * 2, indexing="ij"),
            a.real, a.imag, a.strides, a.T.copy(),
        )  # fmt: skip

    compiled = Compiled(fn, fullgraph=True)
    x, y = torch.randn(3, 4, dtype=dtype), torch.randn(5, dtype=dtype)
    got, expected = compiled(x, y), fn(x, y)
    assert got[-2] == expected[-2]  # the strides, in bytes
    _same_arrays(got[:-2] + got[-1:], expected[:-2] + expected[-1:])
    assert compiled.backend.graph_count == 1


def test_numpy_strides_of_a_computed_array_break():
    def fn(x):
        return x + 1, (x.numpy().T * 2).strides

    compiled = Compiled(fn)
    x = torch.randn(2, 3)
    got, expected = compiled(x), fn(x)
    assert same(got[0], expected[0]) and got[1] == expected[1]


def _sparse_set():
    """A set whose order is not its copy's (its table kept the size of 100 elements)."""
    made = set(range(100))
    for i in range(95):
        made.discard(i)
    made.update((200, 7))
    return made


def test_set_passed_in_iterates_in_its_own_order():
    def fn(x, numbers):
        return x + 1, [n for n in numbers], list(numbers)

    compiled = Compiled(fn, fullgraph=True)
    numbers = _sparse_set()
    assert list(numbers) != list(set(numbers))  # what the test depends on
    assert same(compiled(torch.randn(2), numbers)[1:], fn(torch.randn(2), numbers)[1:])


# ---- enum lookups by value and TypedDict calls ------------------------------------------
class _Mode(enum.Enum):
    FAST = "fast"
    SLOW = "slow"


class _Level(enum.IntEnum):
    LOW = 1
    HIGH = 3


class _Options(typing.TypedDict, total=False):
    mode: str
    factor: float


def test_enum_members_by_value_and_typed_dicts_are_one_graph():
    def fn(a, name):
        options = _Options(mode=name, factor=2.0)
        mode = _Mode(options["mode"])
        level = _Level(3)
        scale = options["factor"] * (level.value if mode is _Mode.SLOW else 1)
        return a * scale, mode.name, type(options) is dict, _Level(True) is _Level.LOW

    a = torch.randn(3)
    for name in ("fast", "slow"):
        compiled = Compiled(fn, fullgraph=True)
        assert same(compiled(a, name), fn(a, name))
        assert compiled.backend.graph_count == 1


def test_an_enum_value_not_in_the_class_raises_as_eager():
    def fn(a):
        try:
            return a * _Level(2).value
        except ValueError:
            return a - 1

    compiled = Compiled(fn)
    a = torch.randn(3)
    assert same(compiled(a), fn(a))


# ---- generic aliases, identity-keyed tables, dataclasses with __post_init__ -------------
def test_builtin_generic_aliases_in_annotations_and_values():
    def fn(a):
        def inner(y: list[int], z: torch.Tensor | None = None) -> dict[str, tuple[int, ...]]:
            return y

        alias = list[int]
        return a + 1, alias, alias == list[int], None | torch.Tensor

    compiled = Compiled(fn, fullgraph=True)
    a = torch.randn(3)
    assert same(compiled(a), fn(a))
    assert compiled.backend.graph_count == 1


def _as_pair(v):
    return (v, v)


def _as_neg(v):
    return -v


HANDLERS_BY_FUNCTION = {_as_pair: "pair", _as_neg: "neg", tuple: "tuple"}


def test_a_table_keyed_by_functions_is_read_by_identity():
    def fn(a):
        out = []
        for handler, name in HANDLERS_BY_FUNCTION.items():
            if name != "tuple":
                out.append(handler(a))
        return out, HANDLERS_BY_FUNCTION.get(_as_neg), _as_pair in HANDLERS_BY_FUNCTION

    compiled = Compiled(fn, fullgraph=True)
    a = torch.randn(3)
    assert same(compiled(a), fn(a))
    HANDLERS_BY_FUNCTION[_as_neg] = "negated"
    try:
        assert same(compiled(a), fn(a))  # the entries are guarded
    finally:
        HANDLERS_BY_FUNCTION[_as_neg] = "neg"


@dataclasses.dataclass(frozen=True)
class _Spec:
    kind: str
    children: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "count", 1 + sum(c.count for c in self.children))

    def is_leaf(self):
        return not self.children


def test_a_dataclass_with_post_init_built_in_the_trace_is_traced_through():
    def fn(a):
        spec = _Spec("root", (_Spec("leaf"), _Spec("leaf")))
        return a * spec.count, spec.is_leaf(), spec.children[0].is_leaf(), spec

    compiled = Compiled(fn, fullgraph=True)
    a = torch.randn(3)
    got, want = compiled(a), fn(a)
    assert same(got[:3], want[:3]) and got[3] == want[3] and got[3].count == 3
    assert compiled.backend.graph_count == 1


# ---- truth of objects passed in ---------------------------------------------------------
class _Plain:
    pass


class _Flagged:
    def __init__(self, on):
        self.on = on

    def __bool__(self):
        return self.on


class _Sized:
    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)


class _BadBool:
    def __bool__(self):
        return 1.5


def test_truth_of_objects_passed_in_runs_their_bool_or_len():
    def fn(a, obj):
        return a + 1 if obj else a - 1

    a = torch.randn(3)
    compiled = Compiled(fn, fullgraph=True)
    for obj in (_Plain(), _Flagged(True), _Flagged(False), _Sized([1]), _Sized([])):
        assert same(compiled(a, obj), fn(a, obj))
    assert not compiled.breaks


def test_a_bool_hook_returning_a_non_bool_raises_as_eager():
    def fn(a, obj):
        return a + 1 if obj else a - 1

    with pytest.raises(TypeError, match="should return bool"):
        Compiled(fn)(torch.randn(3), _BadBool())


def test_objects_made_in_the_trace_keep_eagers_truth_rules():
    def fn(a):
        weak = _Plain().__weakref__  # None in eager: a C descriptor's value, not itself
        try:
            bool(_BadBool())
            raised = False
        except TypeError:
            raised = True
        return (a.cos() if weak else a.sin()), raised

    a = torch.randn(3)
    assert same(Compiled(fn)(a), fn(a))
