"""Iterators, builtins and exceptions in traced code (issue 26): each case runs under the
recording backend (one graph, no break, the same result as eager) and again through
`ember.compile(..., backend="inductor", fullgraph=True)`."""

from __future__ import annotations

import collections
import itertools
import operator

import pytest
import torch

import ember_frame_hook as fh
from conftest import Compiled, same

x = torch.randn(4)


def one_graph_like_eager(fn, *args, graphs: int = 1):
    expected = fn(*args)
    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(*args), expected)
    assert compiled.backend.graph_count == graphs
    assert not compiled.breaks
    return compiled


def inductor_like_eager(fn, *args):
    ember = pytest.importorskip("ember")
    ember.reset()
    try:
        expected = fn(*args)
        assert same(ember.compile(fn, backend="inductor", fullgraph=True)(*args), expected)
        assert ember.counters["inductor"]["forward_runs"] >= 1, dict(ember.counters["inductor"])
    finally:
        ember.reset()


def both(fn, *args):
    one_graph_like_eager(fn, *args)
    inductor_like_eager(fn, *args)


# ---- next() and `in` on iterators ------------------------------------------------------


def first_letter_check(t):
    word = "bc"
    letters = word.__iter__()
    return t * 2 if next(letters) == "b" else t


def range_iter_next(t):
    steps = range(5, 9).__iter__()
    next(steps)
    return t + next(steps)


def bytes_iter_next(t):
    codes = b"\x02\x05".__iter__()
    return t * next(codes)


def in_advances_the_iterator(t):
    names = iter(["w", "b", "w", "k"])
    found = "b" in names  # consumes "w" and "b"
    rest = list(names)
    return t + len(rest) + (10 if found else 0), rest


def in_misses_exhausts(t):
    names = iter(["a", "b"])
    missing = "z" in names
    return t - 1 if missing else t + 1, next(names, "done")


@pytest.mark.parametrize(
    "fn",
    [first_letter_check, range_iter_next, bytes_iter_next, in_advances_the_iterator,
     in_misses_exhausts],
    ids=lambda f: f.__name__,
)  # fmt: skip
def test_iterators_of_known_values(fn):
    both(fn, x)


# ---- StopIteration and bare raise ------------------------------------------------------


def _gen_stops_early():
    yield 3
    raise StopIteration("inside")


def pep479_runtime_error(t):
    gen = _gen_stops_early()
    try:
        first = next(gen)
        next(gen)
    except RuntimeError:
        return t * first
    except StopIteration:
        return t - 100
    return t


def exhausted_next_raises_stop(t):
    it = iter([1])
    next(it)
    try:
        next(it)
    except StopIteration:
        return t + 7
    return t


def _reraises():
    try:
        raise KeyError("k")
    except KeyError:
        raise  # the bare raise is the point


def _reraises_from_a_callee_handler():
    try:
        raise IndexError
    except IndexError:
        _bare_raise_in_callee()


def _bare_raise_in_callee():
    raise  # re-raises the handled exception of its caller, as CPython does


def bare_raise_caught_by_caller(t):
    try:
        _reraises()
    except KeyError:
        return t.sin()
    except Exception:
        return t.cos()
    return t


def bare_raise_in_a_callee(t):
    try:
        _reraises_from_a_callee_handler()
    except IndexError:
        return t + 1
    return t


@pytest.mark.parametrize(
    "fn",
    [pep479_runtime_error, exhausted_next_raises_stop, bare_raise_caught_by_caller,
     bare_raise_in_a_callee],
    ids=lambda f: f.__name__,
)  # fmt: skip
def test_exceptions_raised_and_caught_in_the_trace(fn):
    both(fn, x)


def test_bare_raise_outside_a_handler_stays_a_break():
    def fn(t):
        t = t + 1
        _bare_raise_in_callee()
        return t

    compiled = Compiled(fn)
    with pytest.raises(RuntimeError, match="No active exception"):
        compiled(x)
    assert compiled.breaks


# ---- comparisons -----------------------------------------------------------------------


class OnlyEq:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return self.v == other.v

    __hash__ = None


def ne_from_user_eq(t):
    a, b, c = OnlyEq(1), OnlyEq(1), OnlyEq(2)
    return t + 1, a != b, a != c


class Marker:
    pass


MARKERS = (Marker(), Marker())


def in_by_identity(t, probe):
    return t * 2 if probe in MARKERS else t - 1, int in (Marker, float)


def test_ne_falls_back_to_the_users_eq():
    both(ne_from_user_eq, x)


@pytest.mark.parametrize("which", [0, 1, None])
def test_in_over_objects_with_default_equality(which):
    probe = Marker() if which is None else MARKERS[which]
    both(in_by_identity, x, probe)


# ---- iterators made in the trace and returned ------------------------------------------

CALLS: list[int] = []


def _logged_scale(a, b):
    CALLS.append(1)  # runs when the caller pulls an item, as in eager
    return a * 0.5 + b


def _drain(out):
    """The returned iterators' items (and the rest of the result as it is)."""
    if isinstance(out, tuple):
        return tuple(_drain(o) for o in out)
    if hasattr(out, "__next__"):
        return [next(out) for _ in range(3)] if type(out) is itertools.count else list(out)
    return out


def accumulate_scaled(a, b, c):
    terms = [a, b, c]
    for i, t in enumerate(terms):
        terms[i] = t * 2
    return itertools.accumulate(terms)


def accumulate_with_op_and_initial(a, b, c):
    return itertools.accumulate([a, b, c], operator.sub, initial=a + 1)


def accumulate_started(a, b, c):
    running = itertools.accumulate([a, b, c], operator.mul)
    head = next(running)
    return head + 1, running


def accumulate_user_fn(a, b, c):
    return a.sin(), itertools.accumulate((a, b, c), _logged_scale)


def lazy_family(a, b, c):
    counter = itertools.count(5, 3)
    next(counter)
    plain = iter([a + 1, b, c])
    next(plain)
    return (map(torch.cos, [a, b]), filter(None, [0, 1, 2]), counter, plain, iter((c, a)),
            itertools.starmap(operator.add, [(a, b)]))  # fmt: skip


@pytest.mark.parametrize(
    "fn",
    [accumulate_scaled, accumulate_with_op_and_initial, accumulate_started, accumulate_user_fn,
     lazy_family],
    ids=lambda f: f.__name__,
)  # fmt: skip
@pytest.mark.parametrize("backend", ["recording", "inductor"])
def test_returned_iterators_are_rebuilt_in_their_state(fn, backend):
    args = (torch.randn(3), torch.randn(3), torch.randn(3))
    expected = _drain(fn(*args))
    if backend == "recording":
        compiled = Compiled(fn, fullgraph=True)
        got = compiled(*args)
        assert compiled.backend.graph_count == 1
    else:
        ember = pytest.importorskip("ember")
        ember.reset()
        got = ember.compile(fn, backend="inductor", fullgraph=True)(*args)
        assert ember.counters["inductor"]["forward_runs"] >= 1
        ember.reset()
    assert same(_drain(got), expected)


def test_a_returned_lazy_map_runs_the_users_function_when_pulled():
    CALLS.clear()
    compiled = Compiled(accumulate_user_fn, fullgraph=True)
    _, running = compiled(torch.ones(2), torch.ones(2), torch.ones(2))
    assert CALLS == []  # nothing pulled yet: as in eager, no call ran
    assert len(list(running)) == 3 and CALLS == [1, 1]


def test_an_iterator_of_unknown_kind_stays_a_break():
    def fn(a, b):
        # rebuilt as a list iterator it would change type: not rebuilt
        return zip([a + 1, b], [b, a], strict=True)

    args = (torch.randn(2), torch.randn(2))
    with pytest.raises(Exception, match="cannot rebuild"):
        Compiled(fn, fullgraph=True)(*args)
    fh.reset()
    got = Compiled(fn)(*args)
    assert type(got) is zip and same(list(got), list(fn(*args)))


# ---- builtins on values known at trace time --------------------------------------------

ALLOWED = frozenset("abc")


def frozenset_methods(t, word):
    fits = ALLOWED.issuperset(word)
    shared = ALLOWED.intersection("bcd")
    return t + 1 if fits else t - 1, len(shared), ALLOWED.isdisjoint(("z",))


def complex_numbers(t):
    parts = (0j, complex(2), complex(1, -3), complex(imag=2), complex("1+2j"),
             complex(3, 4).conjugate())  # fmt: skip
    return t * abs(parts[-1]), sum(parts)


class Shown:
    def __repr__(self):
        return "Shown(width=7)"


def repr_of_an_object(t, obj):
    return t * len(repr(obj)), repr((1, "a"))


@pytest.mark.parametrize("word", ["cab", "abz"])
def test_frozenset_methods_of_a_constant(word):
    both(frozenset_methods, x, word)


def test_complex_builtin_and_conjugate():
    both(complex_numbers, x)


def test_repr_runs_the_classes_python_repr():
    both(repr_of_an_object, x, Shown())


def test_a_patched_builtin_is_traced_and_guarded():
    import builtins

    original = builtins.isinstance

    def never_shown(obj, kinds):
        return False if original(obj, Shown) else original(obj, kinds)

    def fn(t, obj):
        return t + 1 if isinstance(obj, Shown) else t - 1

    compiled = Compiled(fn, fullgraph=True)
    builtins.isinstance = never_shown
    try:
        patched = compiled(x, Shown())
        expected_patched = fn(x, Shown())
    finally:
        builtins.isinstance = original
    assert same(patched, expected_patched) and same(patched, x - 1)
    assert same(compiled(x, Shown()), x + 1)  # unpatched: the guard fails, traced again
    assert compiled.backend.graph_count == 2


# ---- C descriptors called by hand, and a class's __dict__ ------------------------------

CLASS_DICT_OF = type.__dict__["__dict__"].__get__


class Settings:
    scale = 3.0
    shift = 2


def shape_through_the_descriptor(getter, t):
    return t.sin(), getter(t)


def read_a_class_dict(t):
    table = CLASS_DICT_OF(Settings)
    return t * table["scale"] + len(table), "shift" in table, table.get("missing", 5)


def test_a_getset_descriptors_get_is_the_attribute_read():
    both(shape_through_the_descriptor, torch.Tensor.shape.__get__, torch.ones(2, 3))


def test_a_descriptor_get_on_another_type_stays_a_break():
    def fn(getter, t, obj):
        return t + 1, getter(obj)

    with pytest.raises(Exception, match="another type"):
        Compiled(fn, fullgraph=True)(torch.Tensor.shape.__get__, x, Settings)


def test_a_class_dict_is_read_and_guarded():
    compiled = one_graph_like_eager(read_a_class_dict, x)
    inductor_like_eager(read_a_class_dict, x)
    Settings.scale = 5.0  # a guarded value: traced again
    try:
        assert same(compiled(x), read_a_class_dict(x))
        Settings.extra = 1  # the keys are guarded too
        assert same(compiled(x), read_a_class_dict(x))
        del Settings.extra
    finally:
        Settings.scale = 3.0
    assert compiled.backend.graph_count == 3


# ---- bounded deques, struct sequences, frozensets of objects ---------------------------


def bounded_deques(t):
    window = collections.deque([t, t + 1, t + 2], maxlen=2)
    window.append(t * 3)
    window.appendleft(t - 5)
    window.extend([t + 7])
    drained = collections.deque(map(torch.sin, [t, t]), maxlen=0)  # consumes the map
    rebuilt = collections.deque(list(window), maxlen=window.maxlen)
    return list(window), len(drained), rebuilt


def struct_sequence_from_items(t):
    values, indices = torch.max(t.view(2, 2), 0)
    again = torch.return_types.max((values + 1, indices))
    return again.values, again.indices, type(again) is torch.return_types.max


KNOWN_OPS = frozenset([torch.add, torch.mul, operator.neg, Marker])


def frozenset_of_objects(t, op):
    return t + 1 if op in KNOWN_OPS else t - 1, Marker in KNOWN_OPS


def _deque_parts(out):
    window, drained, rebuilt = out
    return window, drained, list(rebuilt), type(rebuilt), rebuilt.maxlen


def test_bounded_deques_drop_from_the_other_end():
    expected = _deque_parts(bounded_deques(x))
    compiled = Compiled(bounded_deques, fullgraph=True)
    assert same(_deque_parts(compiled(x)), expected)  # rebuilt with its maxlen
    assert compiled.backend.graph_count == 1
    inductor_like_eager(lambda t: bounded_deques(t)[:2], x)


def test_a_bounded_deque_grown_in_place_otherwise_stays_a_break():
    def fn(t):
        window = collections.deque([t], maxlen=1)
        window.insert(0, t + 1)  # eager: IndexError (full); not modelled
        return t

    with pytest.raises(Exception, match="insert with maxlen"):
        Compiled(fn, fullgraph=True)(x)


def test_a_struct_sequence_built_from_its_fields():
    both(struct_sequence_from_items, x)


@pytest.mark.parametrize("op", [torch.add, torch.sub])
def test_membership_in_a_frozenset_of_functions(op):
    both(frozenset_of_objects, x, op)


# ---- C iterators passed in -------------------------------------------------------------


def take_two(t, it):
    first = next(it)
    return t + first + next(it, 100), it


def loop_rest(t, it):
    for step in it:
        t = t * 2 + step
    return t


def test_a_range_iterator_passed_in_is_advanced_as_in_eager():
    compiled = Compiled(take_two, fullgraph=True)
    mine, theirs = iter(range(3, 9)), iter(range(3, 9))
    next(mine), next(theirs)
    got, same_it = compiled(x, mine)
    expected, _ = take_two(x, theirs)
    assert same(got, expected) and same_it is mine
    assert list(mine) == list(theirs) == [6, 7, 8]
    # the next position is another trace (guarded), then the same one is reused
    a, b = iter(range(3, 9)), iter(range(3, 9))
    next(a), next(b)
    assert same(compiled(x, a)[0], take_two(x, b)[0])
    assert compiled.backend.graph_count == 1
    inductor_like_eager(lambda t: take_two(t, iter(range(2)))[0], x)


def test_a_for_loop_over_a_str_iterator_passed_in_drains_it():
    compiled = Compiled(lambda t, it: loop_rest(t, map(len, it)), fullgraph=True)
    mine = iter("abc")
    next(mine)
    assert same(compiled(x, mine), loop_rest(x, map(len, "bc")))
    assert list(mine) == []


def test_a_count_from_outside_moves_on_each_call():
    counter = itertools.count(5)

    def fn(t):
        return t * next(counter)

    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(x), x * 5) and same(compiled(x), x * 6)
    assert next(counter) == 7
    assert compiled.backend.graph_count == 2  # its position is guarded


def cycles_over_sources(t):
    """Rounds over a list, an iterator, a finite repeat, an endless count and an empty one."""
    for source in ([1.0, 2.0], iter([t, t * 2]), itertools.repeat(0.5, 2), itertools.count(3), []):
        taken = 0
        for item in itertools.cycle(source):
            t = t + item
            taken += 1  # noqa: SIM113 (enumerate() over an endless iterator is not traced)
            if taken == 5:
                break
    return t


def cycle_zipped_with_tensors(a, b, c):
    signs = itertools.cycle([1, -1])
    return sum(s * v for s, v in zip(signs, [a, b, c], strict=False))


def cycle_returned_unstarted(a, b, c):
    return a + b, itertools.cycle([c, a])


@pytest.mark.parametrize("fn", [cycles_over_sources])
def test_itertools_cycle_in_the_trace(fn):
    both(fn, torch.randn(3))


def test_itertools_cycle_over_tensors():
    args = (torch.randn(3), torch.randn(3), torch.randn(3))
    both(cycle_zipped_with_tensors, *args)


def test_an_unstarted_cycle_leaves_the_trace_and_one_part_way_breaks():
    args = (torch.randn(3), torch.randn(3), torch.randn(3))
    compiled = Compiled(cycle_returned_unstarted, fullgraph=True)
    total, rounds = compiled(*args)
    assert same(total, args[0] + args[1])
    assert type(rounds) is itertools.cycle
    assert same([next(rounds) for _ in range(3)], [args[2], args[0], args[2]])

    def started(a):
        rounds = itertools.cycle([a, a * 2])
        next(rounds)
        return rounds

    compiled = Compiled(started)
    rounds = compiled(torch.ones(2))
    assert same(
        [next(rounds) for _ in range(3)], [torch.ones(2) * 2, torch.ones(2), torch.ones(2) * 2]
    )


def kind_scaled(t):
    if isinstance(t, torch.DoubleTensor):
        return t * 2
    if isinstance(t, (torch.LongTensor, torch.IntTensor)):
        return t + 1
    return t - 1


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int32])
def test_isinstance_of_a_legacy_tensor_type_follows_dtype(dtype):
    # torch.DoubleTensor and friends are instances by dtype and device (their metaclass's
    # check), which the tensor's guard pins
    t = torch.arange(4).to(dtype)
    one_graph_like_eager(kind_scaled, t)
    inductor_like_eager(kind_scaled, t)


def asserts_float(t):
    y = t.abs()
    assert isinstance(y, torch.FloatTensor)
    return y + 1


def test_an_assert_on_a_legacy_tensor_type_holds_or_fails_as_in_eager():
    compiled = Compiled(asserts_float)
    t = torch.randn(3)
    assert same(compiled(t), asserts_float(t))
    with pytest.raises(AssertionError):
        compiled(t.double())
    with pytest.raises(AssertionError):
        asserts_float(t.double())
