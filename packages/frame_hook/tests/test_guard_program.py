"""GuardProgram: each instruction answers as its Python expression does, exceptions included."""

from __future__ import annotations

import gc
import sys
import weakref
from collections import OrderedDict

import pytest

import ember_frame_hook as fh

L, G, B = 0, 1, 2


def program(*code, nregs=8, f_globals=None, f_builtins=None):
    f_globals = {} if f_globals is None else f_globals
    f_builtins = {} if f_builtins is None else f_builtins
    return fh.GuardProgram(tuple(code), nregs, f_globals, f_builtins)


def local(name, reg=3):
    return ("LOAD_ITEM", reg, L, name)


class Obj:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class Boom:
    """Attributes that raise: ValueError for `bad`, KeyboardInterrupt for `stop`."""

    def __getattr__(self, name):
        if name == "stop":
            raise KeyboardInterrupt
        if name == "bad":
            raise ValueError("bad")
        raise AttributeError(name)


def test_opnames_cover_the_interpreter():
    names = fh.GuardProgram.opnames()
    assert "CHECK_TYPE" in names and "LOAD_ATTR" in names and len(set(names)) == len(names)


def test_loads_and_type_checks():
    p = program(local("x"), ("LOAD_ATTR", 4, 3, "a"), ("CHECK_TYPE", 0, 4, int))
    assert p({"x": Obj(a=1)}) is True
    assert p({"x": Obj(a="1")}) is False
    assert p({"x": Obj()}) is False  # AttributeError: the guard fails
    assert p({}) is False  # missing local: fails


def test_items_of_dicts_lists_tuples_and_others():
    p = program(local("x"), ("LOAD_ITEM", 4, 3, -1), ("CHECK_IS", 0, 4, None))
    assert p({"x": [1, None]}) and p({"x": (None,)}) and p({"x": {-1: None}})
    assert not p({"x": []}) and not p({"x": {}}) and not p({"x": [None, 1]})
    assert p({"x": OrderedDict({-1: None})})  # generic __getitem__
    q = program(local("x"), ("LOAD_ITEM", 4, 3, True), ("CHECK_IS", 0, 4, None))
    assert q({"x": [1, None]})  # x[True] is x[1], as in Python


def test_globals_builtins_and_const():
    g = {"f": len}
    p = program(
        ("LOAD_ITEM", 3, G, "f"),
        ("CHECK_IS", 0, 3, len),
        ("CHECK_NOT_IN", 0, G, "missing"),
        ("LOAD_ITEM", 4, B, "len"),
        ("CHECK_SAME", 0, 3, 4),
        f_globals=g,
        f_builtins={"len": len},
    )
    assert p({})
    g["missing"] = 1
    assert not p({})


def test_call_and_methods():
    p = program(
        ("LOAD_CONST", 3, -1, sys),
        ("LOAD_ATTR", 4, 3, "getrecursionlimit"),
        ("CALL", 5, 4, ()),
        ("CHECK_EQ", 0, 5, sys.getrecursionlimit()),
        local("x", 6),
        ("CALL_METHOD", 7, 6, "upper"),
        ("CHECK_EQ", 0, 7, "AB"),
    )
    assert p({"x": "ab"}) and not p({"x": "ac"}) and not p({"x": 1})


def test_equality_truth_and_length():
    p = program(
        local("x"),
        ("CHECK_TYPE", 0, 3, tuple),
        ("CHECK_EQ", 0, 3, (1, 2)),
        ("CHECK_ITEM_TYPES", 0, 3, (int, int)),
        ("CHECK_LEN", 0, 3, 2),
        ("CHECK_TRUE", 0, 3),
    )
    assert p({"x": (1, 2)})
    assert not p({"x": (True, 2)})  # equal, but not of the same item types
    assert not p({"x": [1, 2]})
    f = program(local("x"), ("CHECK_FALSE", 0, 3))
    assert f({"x": 0}) and f({"x": []}) and not f({"x": 3})


def test_floats_bit_for_bit():
    zero = program(local("x"), ("CHECK_FLOAT", 0, 3, 0.0))
    assert zero({"x": 0.0}) and not zero({"x": -0.0}) and not zero({"x": 0}) and not zero({})
    nan = program(local("x"), ("CHECK_FLOAT", 0, 3, float("nan")))
    assert nan({"x": float("nan")}) and not nan({"x": 1.5})
    with pytest.raises(ValueError, match="CHECK_FLOAT"):
        program(("CHECK_FLOAT", 0, L, 1))


def test_dict_keys_in_order():
    p = program(local("x"), ("CHECK_KEYS", 0, 3, ["a", "b"]))
    assert p({"x": {"a": 1, "b": 2}})
    assert not p({"x": {"b": 2, "a": 1}}) and not p({"x": {"a": 1}})
    assert p({"x": OrderedDict(a=1, b=2)})  # not an exact dict: iterated
    moved = OrderedDict(a=1, b=2)
    moved.move_to_end("a")  # the dict's own order is unchanged, the iteration's is not
    assert not p({"x": moved})
    empty = program(local("x"), ("CHECK_KEYS", 0, 3, []))  # a module's hook dicts
    assert empty({"x": OrderedDict()}) and empty({"x": {}})
    assert not empty({"x": OrderedDict(h=print)}) and not empty({"x": {"h": 1}})

    class Listed(OrderedDict):  # a subclass may iterate as it likes: still iterated
        def __iter__(self):
            return iter(["ghost"])

    assert not empty({"x": Listed()})
    t = program(local("x"), ("CHECK_KEYS", 0, 3, [1]), ("CHECK_ITEM_TYPES", 0, 3, (int,)))
    assert t({"x": {1: 0}}) and not t({"x": {True: 0}})


def test_dims_static_dynamic_and_strides():
    static = program(local("x"), ("CHECK_DIMS", 0, 3, ((2, 3), None)))
    assert static({"x": (2, 3)}) and not static({"x": (2, 4)}) and not static({"x": (2,)})
    assert static({"x": [2, 3]}) is False  # a list never equals a tuple
    big = program(local("x"), ("CHECK_DIMS", 0, 3, ((2**40, 7), None)))
    assert big({"x": (2**40, 7)}) and not big({"x": (2**70, 7)})
    dynamic = program(local("x"), ("CHECK_DIMS", 0, 3, ((None, 3), 2)))
    assert dynamic({"x": (5, 3)}) and not dynamic({"x": (1, 3)}) and not dynamic({"x": (5,)})
    strides = program(local("x"), ("CHECK_DIMS", 0, 3, ((None, 1), None)))
    assert strides({"x": (0, 1)}) and not strides({"x": (7, 2)})


def test_absent_attributes_and_keys():
    p = program(local("x"), ("CHECK_NO_ATTR", 0, 3, "a"), ("CHECK_NOT_IN", 0, L, "y"))
    assert p({"x": Obj()}) and not p({"x": Obj(a=1)}) and not p({"x": Obj(), "y": 1})
    assert not program(local("x"), ("CHECK_NO_ATTR", 0, 3, "bad"))({"x": Boom()})


class _Hiding:
    """A Python __getattribute__ that hides `a` and fakes `b`."""

    def __init__(self) -> None:
        self.a = 1

    def __getattribute__(self, name):
        if name == "a":
            raise AttributeError(name)
        if name == "b":
            return "fake"
        return super().__getattribute__(name)


def test_generic_attribute_loads_read_past_a_python_getattribute():
    p = program(local("x"), ("LOAD_GENERIC_ATTR", 4, 3, "a"), ("CHECK_EQ", 0, 4, 1))
    obj = _Hiding()
    assert p({"x": obj})  # object.__getattribute__(obj, "a") == 1
    assert not program(local("x"), ("LOAD_ATTR", 4, 3, "a"))({"x": obj})
    q = program(local("x"), ("LOAD_GENERIC_ATTR", 4, 3, "b"))
    assert not q({"x": obj})  # no `b` for object's lookup: AttributeError fails the guard
    d = program(local("x"), ("LOAD_GENERIC_ATTR", 4, 3, "__dict__"), ("CHECK_KEYS", 0, 4, ["a"]))
    assert d({"x": obj})
    object.__setattr__(obj, "a", 2)
    assert not p({"x": obj})
    with pytest.raises(ValueError, match="str"):
        program(local("x"), ("LOAD_GENERIC_ATTR", 4, 3, 1))


class _RaisingDescriptor:
    def __get__(self, obj, owner=None):
        raise AttributeError("only on instances")


class _Meta(type):
    def __getattr__(cls, name):
        return name  # every attribute exists through the metaclass


def test_absent_class_attributes_answer_as_hasattr():
    # classes of metaclass `type` are answered from the type lookup (no getattr, issue 15);
    # every case must still agree with `not hasattr(cls, name)`
    class Base:
        inherited = 1

    class Child(Base):
        hidden = _RaisingDescriptor()

    p = program(local("x"), ("CHECK_NO_ATTR", 0, 3, "a"))
    q = program(local("x"), ("CHECK_NO_ATTR", 0, 3, "inherited"))
    r = program(local("x"), ("CHECK_NO_ATTR", 0, 3, "mro"))  # on `type` itself
    h = program(local("x"), ("CHECK_NO_ATTR", 0, 3, "hidden"))
    for cls in (Base, Child, _Meta("WithMeta", (), {}), int):
        for check, name in ((p, "a"), (q, "inherited"), (r, "mro"), (h, "hidden")):
            assert check({"x": cls}) is (not hasattr(cls, name)), (cls, name)
    Base.a = 2  # set later: seen at once (the type lookup's cache is invalidated)
    assert not p({"x": Child})
    del Base.a
    assert p({"x": Child})


def test_distinct_pairwise_and_sorted():
    for n in (3, 20):
        code = [local(f"x{i}", 3 + i) for i in range(n)]
        code.append(("CHECK_DISTINCT", 0, -1, tuple(range(3, 3 + n))))
        p = program(*code, nregs=3 + n)
        objs = [object() for _ in range(n)]
        assert p({f"x{i}": o for i, o in enumerate(objs)})
        objs[-1] = objs[0]
        assert not p({f"x{i}": o for i, o in enumerate(objs)})


def test_escape_hatch_gets_the_value_and_extra_arguments():
    seen = []

    def check(value, extra):
        seen.append((value, extra))
        return value == extra

    p = program(local("x"), ("CHECK_CALL", 0, 3, (check, (5,))))
    assert p({"x": 5}) and not p({"x": 6})
    assert seen == [(5, 5), (6, 5)]


def test_a_raising_call_fails_or_propagates_as_asked():
    def boom(value):
        raise ValueError("boom")

    assert program(("CHECK_CALL", 0, L, (boom, ())))({}) is False
    assert program(("CHECK_CALL", 0, L, (boom, (), False)))({}) is False
    with pytest.raises(ValueError, match="boom"):
        program(("CHECK_CALL", 0, L, (boom, (), True)))({})


def test_exceptions_fail_the_guard_but_base_exceptions_propagate():
    assert program(local("x"), ("LOAD_ATTR", 4, 3, "bad"))({"x": Boom()}) is False
    with pytest.raises(KeyboardInterrupt):
        program(local("x"), ("LOAD_ATTR", 4, 3, "stop"))({"x": Boom()})


def test_first_failure_stops_the_program():
    calls = []
    p = program(("CHECK_IS", 0, L, None), ("CHECK_CALL", 0, L, (calls.append, ())))
    assert not p({}) and calls == []


def test_owner_is_the_threads_setting_or_run_only():
    owner = object()
    p = program(("CHECK_OWNER", 0, -1, owner))
    assert not p({})  # hook off
    fh.set_eval_frame(False)
    assert p({})
    fh.set_eval_frame(lambda frame, cache: None)
    assert not p({})
    fh.set_eval_frame(None)


@pytest.mark.parametrize(
    "code, message",
    [
        (("NOPE", 3, 0, None), "unknown opname"),
        (("LOAD_ATTR", 1, 0, "a"), "free register"),
        (("LOAD_ATTR", 3, 9, "a"), "src must be"),
        (("LOAD_ATTR", 3, 0, 1), "str"),
        (("CHECK_TYPE", 0, 0, 1), "type"),
        (("CHECK_DIMS", 0, 0, ((1, "a"), None)), "CHECK_DIMS"),
        (("CHECK_CALL", 0, 0, (1, ())), "CHECK_CALL"),
        (("CHECK_DISTINCT", 0, -1, (0, 99)), "registers"),
        (("LOAD_ATTR", 3), "expected"),
    ],
)
def test_malformed_programs_are_rejected(code, message):
    with pytest.raises(ValueError, match=message):
        program(code, nregs=4)


def test_reading_an_unset_register_is_an_error_not_a_crash():
    p = program(("CHECK_IS", 0, 5, None))
    with pytest.raises(SystemError, match="register 5"):
        p({})


def test_many_registers():
    n = 300
    code = [local(f"x{i}", 3 + i) for i in range(n)] + [("CHECK_IS", 0, 3 + n - 1, None)]
    assert program(*code, nregs=3 + n)({f"x{i}": None for i in range(n)})


def substituting(original, code, guard):
    """A callback that caches `code` under `guard` for frames of `original` only."""

    def callback(frame, cache):
        return fh.GuardedCode(code, guard) if frame.f_code is original.__code__ else None

    return callback


def test_runs_from_the_cache_without_a_python_call():
    def f(x):
        return "original"

    def g(x):
        return "substitute"

    p = program(local("x"), ("CHECK_TYPE", 0, 3, int))
    sub = g.__code__.replace(co_name="f")
    fh.set_eval_frame(substituting(f, sub, p))
    try:
        assert f(1) == "substitute"
        assert f(1) == "substitute"
        assert fh.stats()["hits"] == 1
        assert f("s") == "substitute"  # a miss: the callback makes a second entry
        assert len(fh.cache_entries(f.__code__)) == 2
    finally:
        fh.set_eval_frame(None)


def test_a_raising_guard_program_is_a_guard_error():
    def f(x):
        return x

    p = program(local("x"), ("LOAD_ATTR", 4, 3, "stop"))
    fh.set_eval_frame(substituting(f, f.__code__, p))
    try:
        assert f(0) == 0  # the guard fails (int has no `stop`): a second entry is made
        with pytest.raises(fh.GuardError) as info:
            f(Boom())
        assert isinstance(info.value.__cause__, KeyboardInterrupt)
    finally:
        fh.set_eval_frame(None)


def test_programs_free_their_constants_and_join_cycles():
    class Payload:
        pass

    payload = Payload()
    ref = weakref.ref(payload)
    p = program(("CHECK_IS", 0, L, payload))
    payload.program = p  # a cycle through the program's constant
    del payload, p
    gc.collect()
    assert ref() is None


def test_no_reference_leak_per_call():
    value = object()
    p = program(local("x"), ("LOAD_ATTR", 4, 3, "__class__"), ("CHECK_IS", 0, 3, value))
    f_locals = {"x": value}
    for _ in range(10):
        p(f_locals)
    before = sys.getrefcount(value)
    for _ in range(1000):
        assert p(f_locals)
    assert sys.getrefcount(value) == before


def native_capsule(check):
    """A CHECK_NATIVE capsule around a Python function, through ctypes (tests only)."""
    import ctypes

    proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.py_object)
    function = proto(check)
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    capsule = new(ctypes.cast(function, ctypes.c_void_p), b"ember_frame_hook.native_check", None)
    return capsule, function  # keep the ctypes function alive with the capsule


def test_native_check_plug_in():
    seen = []

    def check(value, data):
        seen.append((value, data))
        return 1 if value == data else 0

    capsule, keep = native_capsule(check)
    p = program(local("x"), ("CHECK_NATIVE", 0, 3, (capsule, 5)))
    assert p({"x": 5}) and not p({"x": 6})
    assert seen == [(5, 5), (6, 5)]
    with pytest.raises(ValueError, match="CHECK_NATIVE"):
        program(("CHECK_NATIVE", 0, L, (object(), 5)))
    del keep


def test_entries_share_the_instructions_they_have_in_common():
    """A later entry's program starts where it differs from the one that just failed."""
    calls = []

    def counted(value):
        calls.append(value)
        return True

    def f(x, n):
        return "original"

    namespaces = {"f_globals": {}, "f_builtins": {}}  # one function's: shared by its entries

    def entry(n_expected, dims):
        return program(
            local("x"),
            ("CHECK_CALL", 0, 3, (counted, ())),  # the shared prefix: runs once per call
            local("n", 4),
            ("CHECK_EQ", 0, 4, n_expected),
            ("LOAD_ATTR", 5, 3, "shape"),
            ("CHECK_DIMS", 0, 5, (dims, None)),
            **namespaces,
        )

    class T:
        def __init__(self, shape):
            self.shape = shape

    first, second, third = entry(1, (2,)), entry(1, (3,)), entry(2, (3,))
    table = iter([first, second, third])

    def callback(frame, cache):
        if frame.f_code is not f.__code__:
            return None
        return fh.GuardedCode(f.__code__, next(table))

    fh.set_eval_frame(callback)
    try:
        f(T((2,)), 1)  # compiles `first`
        f(T((3,)), 1)  # first fails at CHECK_DIMS: compiles `second`
        f(T((3,)), 2)  # both fail: compiles `third`
        calls.clear()
        f(T((2,)), 1)  # third fails at CHECK_EQ; second repeats that: skipped; first shares
        assert len(calls) == 1
        assert fh.cache_entries(f.__code__)[0].guard is first
        calls.clear()
        f(T((3,)), 2)  # first fails at CHECK_EQ; third starts there and passes
        assert len(calls) == 1
        assert fh.cache_entries(f.__code__)[0].guard is third
        assert len(fh.cache_entries(f.__code__)) == 3  # no recompile
    finally:
        fh.set_eval_frame(None)


def test_a_shared_prefix_reloads_a_scratch_register_the_last_entry_overwrote():
    """Builders reuse one scratch register for successive reads (`dtype`, then
    `requires_grad`). An entry that resumes after the shared prefix must not read what the
    previous entry's later instructions left in that register (CPython 3.12 CI: a tensor
    guard without the native check recompiled a frame whose dynamic entry matched)."""

    def f(x):
        return "original"

    namespaces = {"f_globals": {}, "f_builtins": {}}

    def entry(kind, flag):
        return program(
            local("x"),
            ("LOAD_ATTR", 4, 3, "kind"),  # scratch register 4: first the kind...
            ("CHECK_EQ", 0, 4, kind),
            ("LOAD_ATTR", 4, 3, "flag"),  # ...then the flag, in the same register
            ("CHECK_EQ", 0, 4, flag),
            **namespaces,
        )

    a_flagged, b_plain, a_plain = entry("a", True), entry("b", False), entry("a", False)
    table = iter([a_plain, b_plain, a_flagged])

    def callback(frame, cache):
        if frame.f_code is not f.__code__:
            return None
        return fh.GuardedCode(f.__code__, next(table))

    fh.set_eval_frame(callback)
    try:
        f(Obj(kind="a", flag=False))  # compiles a_plain
        f(Obj(kind="b", flag=False))  # compiles b_plain
        f(Obj(kind="a", flag=True))  # compiles a_flagged; entries: a_flagged, b_plain, a_plain
        # a_flagged fails at its flag check with register 4 holding False (the flag); b_plain
        # shares the `kind` load but must reload it, fail on "b", and a_plain must reload it
        # too and pass, instead of comparing the stale flag with "a".
        assert f(Obj(kind="a", flag=False)) == "original"
        entries = fh.cache_entries(f.__code__)
        assert len(entries) == 3  # a hit, no fourth compile
        assert entries[0].guard is a_plain and entries[0].hits == 1
    finally:
        fh.set_eval_frame(None)


def test_float_constants_are_shared_bit_for_bit_only():
    def f(x):
        return x

    g, b = {}, {}
    zero, minus_zero = (
        program(local("x"), ("CHECK_FLOAT", 0, 3, 0.0), f_globals=g, f_builtins=b),
        program(local("x"), ("CHECK_FLOAT", 0, 3, -0.0), f_globals=g, f_builtins=b),
    )
    table = iter([zero, minus_zero])

    def callback(frame, cache):
        if frame.f_code is not f.__code__:
            return None
        return fh.GuardedCode(f.__code__, next(table))

    fh.set_eval_frame(callback)
    try:
        f(0.0)
        f(-0.0)  # zero fails: -0.0 must not be skipped as "the same instruction"
        assert len(fh.cache_entries(f.__code__)) == 2
        f(0.0)  # minus_zero (most recent) fails, zero passes
        f(-0.0)
        assert len(fh.cache_entries(f.__code__)) == 2
        assert sorted(e.hits for e in fh.cache_entries(f.__code__)) == [1, 1]
    finally:
        fh.set_eval_frame(None)
