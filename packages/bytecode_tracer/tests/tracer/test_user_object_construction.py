"""How objects of user classes come to be inside the traced code (issue 26): a class's own
Python `__new__` runs inline as type.__call__ runs it (down to object.__new__, which makes
the tracked object), `__init__` only when `__new__` gave an instance of the class, and the
object is rebuilt after the graph without running `__new__` again. Each capture is one
graph and matches eager; integration_tests/test_user_objects_inductor.py runs the same
classes under the default backend."""

from __future__ import annotations

import collections
import dataclasses
import typing

import pytest
import torch

from conftest import Compiled, same
from ember_bytecode_tracer.exc import Unsupported


def _one_graph(fn, *args):
    compiled = Compiled(fn, fullgraph=True)
    got = compiled(*args)
    assert compiled.backend.graph_count == 1
    return got


# ---- a Python __new__ --------------------------------------------------------------------
class Shape:
    def __new__(cls, *args, **kwargs):
        return super(Shape, cls).__new__(cls)  # noqa: UP008 (the two-argument form)

    def __init__(self, width):
        self.width = width


class Square(Shape):
    def __new__(cls, *args, **kwargs):
        return super().__new__(cls)  # reaches Shape.__new__ through the class's __mro__

    def __init__(self, width, scale=2.0):
        super().__init__(width)
        self.scale = scale

    def area(self, x):
        return x * self.width * self.scale


def test_new_chain_through_super_then_init():
    def fn(x):
        return Square(3, scale=0.5).area(x)

    x = torch.randn(4)
    assert same(_one_graph(fn, x), fn(x))


class Counter:
    def __new__(cls):
        obj = object.__new__(cls)
        obj.count = 1  # set before __init__ runs
        return obj

    def __init__(self):
        self.count = self.count + 10


def test_new_sets_state_before_init_and_the_object_escapes():
    def fn(x):
        c = Counter()
        return c, x + c.count

    x = torch.randn(3)
    (made, y), (want, expected) = _one_graph(fn, x), fn(x)
    assert same(y, expected)
    assert type(made) is Counter and vars(made) == vars(want) == {"count": 11}


class Other:
    def __init__(self):
        self.tag = "other"

    def run(self, x):
        return x * self.weight


class Switcher:
    def __new__(cls, weight):
        obj = object.__new__(Other)  # not a Switcher: type.__call__ skips __init__
        obj.weight = weight
        return obj

    def __init__(self, weight):
        raise AssertionError("never called")


def test_new_returning_another_class_skips_init():
    def fn(x):
        o = Switcher(3.0)
        return o, o.run(x), hasattr(o, "tag")

    x = torch.randn(4)
    (made, y, tag), (_, expected, want_tag) = _one_graph(fn, x), fn(x)
    assert same(y, expected) and tag is want_tag is False
    assert type(made) is Other and vars(made) == {"weight": 3.0}


class TakesArgs:
    def __new__(cls, *args):
        return object.__new__(cls)  # object.__init__ accepts the extra arguments then


def test_new_with_object_init_accepts_arguments():
    def fn(x):
        return x * isinstance(TakesArgs(1, 2), TakesArgs)

    x = torch.randn(2)
    assert same(_one_graph(fn, x), fn(x))


class Left:
    def __new__(cls):
        return super().__new__(cls)

    def __init__(self):
        super().__init__()
        self.left = 2 if hasattr(self, "right") else -1


class Right:
    def __new__(cls):
        return super().__new__(cls)

    def __init__(self):
        super().__init__()
        self.right = 5


class Both(Left, Right):
    def __new__(cls):
        return super().__new__(cls)

    def __init__(self):
        super().__init__()
        self.both = 7


def test_new_and_init_follow_the_mro_of_multiple_bases():
    def fn(x):
        b = Both()
        return x * b.left * b.right * b.both

    x = torch.randn(4)
    assert same(_one_graph(fn, x), fn(x))


class BadNewArgs:
    def __new__(cls, a):
        return object.__new__(cls, a)  # eager: TypeError (object.__new__ takes one argument)


def test_object_new_with_extra_arguments_is_a_break_not_a_guess():
    def fn(x):
        BadNewArgs(1)
        return x + 1

    with pytest.raises(Unsupported):
        Compiled(fn, fullgraph=True)(torch.randn(2))
    with pytest.raises(TypeError):
        fn(torch.randn(2))


def test_a_changed_new_is_seen_on_the_next_call():
    class Holder:
        def __new__(cls):
            obj = object.__new__(cls)
            obj.k = 2
            return obj

    def fn(x):
        return x * Holder().k

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))
    original = Holder.__dict__["__new__"]

    def other_new(cls):
        obj = object.__new__(cls)
        obj.k = 5
        return obj

    Holder.__new__ = other_new  # a plain function set later: still called with the class
    try:
        assert same(compiled(x), x * 5)
        Holder.__new__ = staticmethod(other_new)
        assert same(compiled(x), x * 5)
    finally:
        Holder.__new__ = original


# ---- super() reaching a plain class attribute ----------------------------------------
class Base:
    factor = 4

    def add(self, x):
        return x + 10


class Middle(Base):
    factor = 100


class Leaf(Middle):
    factor = 1000

    def add(self, x):
        return super(Middle, self).add(x) * super().factor + super(Middle, self).factor


def test_super_reads_a_plain_class_attribute():
    def fn(x, obj):
        return obj.add(x)

    x = torch.randn(4)
    assert same(_one_graph(fn, x, Leaf()), fn(x, Leaf()))

    def made_here(x):
        return Leaf().add(x)

    assert same(_one_graph(made_here, x), made_here(x))


def test_a_replaced_init_or_method_is_seen_on_the_next_call():
    class Holder:
        def __init__(self):
            self.k = 2

        def get(self):
            return self.k

    def fn(x):
        return x * Holder().get()

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))
    init, get = Holder.__init__, Holder.get

    def other_init(self):
        self.k = 5

    Holder.__init__ = other_init
    try:
        assert same(compiled(x), x * 5)
        Holder.get = lambda self: -self.k
        assert same(compiled(x), x * -5)
    finally:
        Holder.__init__, Holder.get = init, get


# ---- dataclasses made in the trace ---------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Spot:
    row: int
    col: float


@dataclasses.dataclass(frozen=True)
class Region:
    corner: Spot
    name: str = "r"


def test_frozen_dataclass_of_constants_is_a_dict_key_by_value():
    def fn(x):
        key = Region(Spot(1, 2.5))
        local = {key: 3}
        local[Region(Spot(1, 2.5))] += 1  # an equal object finds the same entry
        return x * local[key] + key.corner.col, local, key

    x = torch.randn(4)
    (y, local, key), (want_y, want_local, _) = _one_graph(fn, x), fn(x)
    assert same(y, want_y) and local == want_local
    assert next(iter(local)) is key  # the dict holds the object the function made


@dataclasses.dataclass(frozen=True)
class Cell:
    value: torch.Tensor


def test_frozen_dataclass_holding_a_tensor_is_no_constant_key():
    def fn(x):
        return {Cell(x): 1}

    with pytest.raises(Unsupported):
        Compiled(fn, fullgraph=True)(torch.randn(2))


def test_frozen_dataclass_repr_in_a_format_string():
    def fn(x):
        where = (Spot(0, 1.5), Region(Spot(2, 0.5), "z"))
        return x + 1, f"at {where}"

    x = torch.randn(2)
    (y, text), (want_y, want_text) = _one_graph(fn, x), fn(x)
    assert same(y, want_y) and text == want_text


calls = []


def _fresh_list():
    calls.append("made")
    return [5]


@dataclasses.dataclass(frozen=True)
class WithFactories:
    a: torch.Tensor
    items: list = dataclasses.field(default_factory=list)
    more: list = dataclasses.field(default_factory=_fresh_list)


def test_default_factories_run_once_and_their_objects_are_kept():
    def fn(x):
        w = WithFactories(x)
        w.items.append(x.sum())
        return w, w.a * w.more[0]

    x = torch.randn(3)
    calls.clear()
    (made, y) = _one_graph(fn, x)
    assert calls == ["made"]  # the factory ran in the trace, not again when rebuilt
    want, want_y = fn(x)
    assert same(y, want_y) and made.more == [5] and len(made.items) == 1
    assert same(made.items[0], want.items[0])


@dataclasses.dataclass
class Plain:
    a: torch.Tensor
    b: int = 2


@dataclasses.dataclass(frozen=True)
class FrozenBox:
    a: torch.Tensor


def test_object_setattr_on_dataclasses_made_in_the_trace():
    def fn(x):
        p, f = Plain(x), FrozenBox(x)
        object.__setattr__(p, "a", x + 2)
        object.__setattr__(f, "a", p.a * 3)
        p.b = 7
        return p, f, f.a + p.b

    x = torch.randn(4)
    (p, f, y), (wp, wf, wy) = _one_graph(fn, x), fn(x)
    assert same(y, wy) and same(p.a, wp.a) and same(f.a, wf.a) and p.b == wp.b == 7


def test_hasattr_of_a_dataclass_made_in_the_trace():
    def fn(x):
        p = Plain(x + 1)
        return x * hasattr(p, "a") + hasattr(p, "b") * 2 + hasattr(p, "zzz") * 4

    x = torch.randn(4)
    assert same(_one_graph(fn, x), fn(x))


def test_assigning_a_frozen_field_stays_eager_s_error():
    def fn(x):
        f = FrozenBox(x)
        f.a = x  # FrozenInstanceError in eager
        return f

    with pytest.raises(Unsupported):
        Compiled(fn, fullgraph=True)(torch.randn(2))


# ---- object.__setattr__ on a real object is replayed past its __setattr__ -------------------
class Audited:
    def __init__(self):
        object.__setattr__(self, "log", [])

    def __setattr__(self, name, value):
        self.log.append(name)
        object.__setattr__(self, name, value)


def test_object_setattr_on_an_argument_is_replayed_without_its_hook():
    def fn(x, obj):
        obj.scale = x.sum()  # runs the hook (inlined): one log entry, as in eager
        object.__setattr__(obj, "raw", x * 2)  # no hook: no entry
        return x + 1

    x = torch.randn(3)
    got, want = Audited(), Audited()
    assert same(_one_graph(fn, x, got), fn(x, want))
    assert got.log == want.log == ["scale"]
    assert same(got.raw, want.raw) and same(got.scale, want.scale)


def test_frozen_dataclass_init_as_its_own_frame():
    def init_only(obj, x):
        object.__setattr__(obj, "a", x)  # a frozen dataclass's generated __init__ does this
        return x

    obj = object.__new__(FrozenBox)
    x = torch.randn(2)
    Compiled(init_only, fullgraph=True)(obj, x)
    assert obj.a is x


# ---- reading what every object has -----------------------------------------------------------
Pair2 = collections.namedtuple("Pair2", "first second")


@pytest.mark.parametrize("make", [list, tuple, lambda items: Pair2(*items)])
def test_class_of_a_container_rebuilds_the_same_kind(make):
    def fn(seq):
        doubled = [v * 2 for v in seq]
        kind = seq.__class__
        return kind(*doubled) if kind is Pair2 else kind(doubled)

    seq = make([torch.randn(2), torch.randn(2)])
    got, want = _one_graph(fn, seq), fn(seq)
    assert type(got) is type(want) and all(same(a, b) for a, b in zip(got, want, strict=True))


class Plainest:
    pass


def test_weakref_slot_of_a_new_object_is_none_until_a_reference_is_made():
    import weakref

    def fn(x):
        obj = Plainest()
        before = obj.__weakref__
        ref = weakref.ref(obj)
        return x.cos() if before is None else x.sin(), obj.__weakref__ is ref

    x = torch.randn(3)
    (y, same_ref), (want_y, want_same) = _one_graph(fn, x), fn(x)
    assert same(y, want_y) and same_ref is want_same is True


class Aliased:
    def __init__(self):
        object.__setattr__(self, "aliases", {"old": "new"})
        object.__setattr__(self, "new", 3)

    def __getattribute__(self, name):
        if name == "hidden":
            raise AttributeError(name)
        aliases = object.__getattribute__(self, "aliases")
        return object.__getattribute__(self, aliases.get(name, name))

    def __getattr__(self, name):
        return 0.5 if name == "hidden" else -1.0


def test_getattribute_raising_attribute_error_falls_back_to_getattr():
    def fn(x, obj):
        return x * obj.old * obj.hidden + obj.missing

    x = torch.randn(4)
    assert same(_one_graph(fn, x, Aliased()), fn(x, Aliased()))


# ---- objects hashed by identity as dict keys -------------------------------------------------
class Handler:
    pass


FIRST, SECOND = Handler(), Handler()
SHAPE_VAR = typing.TypeVar("SHAPE_VAR")


def test_an_argument_hashed_by_identity_is_a_dict_key():
    def fn(x, key, table):
        local = {key: x.sin()}
        local[FIRST] = x.cos()
        return local[key] + table[key] + (key in local) + (SECOND in local) * 100

    table = {FIRST: 1.0, SECOND: 2.0}
    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    for key in (FIRST, SECOND, FIRST):  # each object is guarded by identity
        assert same(compiled(x, key, table), fn(x, key, table))
    assert compiled.backend.graph_count == 2


def test_a_frame_dict_with_a_typing_key_is_read_by_that_key():
    def fn(d):
        return d[SHAPE_VAR] * 2

    d = {SHAPE_VAR: torch.randn(3), int: torch.randn(3)}
    assert same(_one_graph(fn, d), fn(d))


def test_reading_an_object_key_of_a_frame_dict_is_guarded():
    class Weighted:
        def __init__(self, weight):
            self.weight = weight

    def fn(x, table):
        return sum(x * k.weight * v for k, v in table.items())

    a, b = Weighted(2.0), Weighted(3.0)
    table = {a: 1.0, b: -1.0}
    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x, table), fn(x, table))
    a.weight = 10.0  # read from the key object: a guard sees the change
    assert same(compiled(x, table), fn(x, table))


# ---- attributes of a function made in the trace, and of a threading.local ----------------------
def test_a_function_made_in_the_trace_escapes_with_its_attributes():
    def make(k):
        def inner(t):
            return t * k

        return inner

    def fn(x):
        f = make(3)
        f.__wrapped__ = make
        f.__name__ = "renamed"
        f.tag = x.sum()
        return f(x), f

    x = torch.randn(3)
    (y, f), (want_y, want_f) = _one_graph(fn, x), fn(x)
    assert same(y, want_y) and same(f(x), want_f(x))
    assert f.__wrapped__ is make and f.__name__ == "renamed" and same(f.tag, want_f.tag)
    assert f.__qualname__ == want_f.__qualname__ and f.__dict__.keys() == want_f.__dict__.keys()


def test_thread_local_attribute_written_in_the_trace():
    import threading

    local = threading.local()
    local.base = 1.0
    seen_elsewhere = []

    def fn(x, loc):
        loc.value = x * 2
        loc.base = loc.base + 1
        return loc.value + loc.base

    x = torch.randn(3)
    compiled = Compiled(fn, fullgraph=True)
    y = compiled(x, local)
    assert compiled.backend.graph_count == 1
    assert same(y, x * 2 + 2.0) and same(local.value, x * 2) and local.base == 2.0
    worker = threading.Thread(target=lambda: seen_elsewhere.append(hasattr(local, "value")))
    worker.start()
    worker.join()
    assert seen_elsewhere == [False]  # written in the calling thread's dict only


# ---- dicts of the frame read as a whole ---------------------------------------------------------
class ReadOnlyConfig(collections.OrderedDict):
    def __delitem__(self, key):
        raise TypeError("read-only")

    def pop(self, *args):
        raise TypeError("read-only")


def test_dict_of_a_dict_subclass_with_c_lookups():
    config = ReadOnlyConfig(scale=2.0, shift=1.0)
    config.move_to_end("scale")  # OrderedDict's own order, not the dict's

    def fn(x):
        plain = dict(config)
        return x * plain["scale"] + plain["shift"], list(plain)

    x = torch.randn(3)
    (y, keys), (want_y, want_keys) = _one_graph(fn, x), fn(x)
    assert same(y, want_y) and keys == want_keys == ["shift", "scale"]


HANDLERS = {torch.add: 1, torch.Tensor.add: 2, torch.ops.aten.mul: 3, len: 4, same: 5}


def test_a_table_keyed_by_c_functions_and_operators():
    def fn(x):
        return x * len(HANDLERS) + HANDLERS[torch.ops.aten.mul] + HANDLERS[len]

    x = torch.randn(3)
    assert same(_one_graph(fn, x), fn(x))


@dataclasses.dataclass
class KeywordFirst:
    scale: float = dataclasses.field(kw_only=True, default=10.0)
    value: torch.Tensor = None


def test_positional_arguments_skip_keyword_only_fields():
    def fn(x):
        k = KeywordFirst(x)  # binds `value`, not the keyword-only `scale` declared first
        return k.value * k.scale, KeywordFirst(x, scale=0.5).scale

    x = torch.randn(3)
    (y, s), (want_y, want_s) = _one_graph(fn, x), fn(x)
    assert same(y, want_y) and s == want_s == 0.5
