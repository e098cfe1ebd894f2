"""How many frames and graphs a compile makes for common shapes of user code: functions that
receive their tensors inside user objects, containers or closures, and user classes with
Python operator methods. Each program is compared with eager and its graph and op counts are
asserted, under a recording backend and under inductor, so a silent fallback to eager (a
frame left uncompiled, an avoidable break) fails."""

from __future__ import annotations

import collections
import dataclasses

import pytest
import torch

import ember

BACKENDS = ["eager", "inductor"]


@pytest.fixture(autouse=True)
def _fresh(fresh_ember):
    yield


# ---- frames whose tensors sit inside objects and containers ------------------------------
class Holder:
    def __init__(self, a, b):
        self.a = a
        self.b = b


@dataclasses.dataclass
class Fields:
    first: torch.Tensor
    rest: list


class Rows:
    def __init__(self, rows):
        self.rows = rows

    def __iter__(self):
        return iter(self.rows)


def _update_holder(h):
    h.c = h.a * h.b + 1
    h.a = h.c - h.b
    return h


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensors_held_by_a_user_object_are_compiled(backend, counted_compile):
    compiled = counted_compile(_update_holder, backend)
    x, y = torch.randn(5), torch.randn(5)
    got, want = compiled(Holder(x, y)), _update_holder(Holder(x, y))
    torch.testing.assert_close((got.a, got.b, got.c), (want.a, want.b, want.c))
    assert len(compiled.graphs) == 1
    assert compiled.ops == ["mul", "add", "sub"]


def _sum_fields(obj):
    total = obj.first
    for extra in obj.rest:
        total = total + extra
    return total


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensors_in_a_dataclass_list_field_are_compiled(backend, counted_compile):
    compiled = counted_compile(_sum_fields, backend, fullgraph=True)
    obj = Fields(torch.randn(3), [torch.randn(3), torch.randn(3)])
    torch.testing.assert_close(compiled(obj), _sum_fields(obj))
    assert len(compiled.graphs) == 1
    assert len(compiled.ops) == 2


def _bump_rows(rows):
    return [r * 2 for r in rows]


@pytest.mark.parametrize("backend", BACKENDS)
def test_iterating_a_user_object_of_tensors_is_compiled(backend, counted_compile):
    compiled = counted_compile(_bump_rows, backend, fullgraph=True)
    rows = Rows([torch.randn(2), torch.randn(2)])
    torch.testing.assert_close(compiled(rows), _bump_rows(rows))
    assert len(compiled.graphs) == 1


def _shuffle_queue(queue, x):
    last = queue.pop()
    queue.appendleft(last * x)
    first = queue.popleft()
    queue.append(first + 1)
    return queue[1] - queue[-1]


def _queues(x):
    return collections.deque(["tag", x + 1, x * 2]), collections.deque(["tag", x + 1, x * 2])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_deque_passed_in_is_traced_and_written_back(backend, counted_compile):
    compiled = counted_compile(_shuffle_queue, backend, fullgraph=True)
    x = torch.randn(4)
    mine, theirs = _queues(x)
    torch.testing.assert_close(compiled(mine, x), _shuffle_queue(theirs, x))
    assert len(mine) == len(theirs) and mine[0] == theirs[0] == "tag"
    torch.testing.assert_close(list(mine)[1:], list(theirs)[1:])
    assert len(compiled.graphs) == 1
    # a longer deque, or one with a maxlen, is not the deque the code was made for
    longer, longer_eager = collections.deque([*mine, x]), collections.deque([*theirs, x])
    torch.testing.assert_close(compiled(longer, x), _shuffle_queue(longer_eager, x))
    torch.testing.assert_close(list(longer)[1:], list(longer_eager)[1:])
    bounded = collections.deque([x, x + 1, x], maxlen=3)
    bounded_eager = collections.deque([x, x + 1, x], maxlen=3)
    torch.testing.assert_close(
        ember.compile(_shuffle_queue, backend=backend)(bounded, x),
        _shuffle_queue(bounded_eager, x),
    )
    torch.testing.assert_close(list(bounded), list(bounded_eager))


def test_a_getattr_hook_is_not_run_to_decide_whether_to_compile():
    seen = []

    class Loud:
        __slots__ = ()

        def __getattr__(self, name):
            seen.append(name)
            raise AttributeError(name)

    def fn(obj):
        return obj is not None

    assert ember.compile(fn, backend="eager")(Loud()) is True
    assert seen == []


# ---- user classes' Python operator methods -----------------------------------------------
class Vec:
    def __init__(self, t):
        self.t = t

    def __add__(self, other):
        return Vec(self.t + (other.t if isinstance(other, Vec) else other))

    def __radd__(self, other):
        return Vec(other * 2 + self.t)

    def __iadd__(self, other):
        self.t = self.t - other
        return self

    def __lt__(self, other):
        return NotImplemented


class ScaledVec(Vec):
    def __radd__(self, other):  # a subclass's reflected method goes first
        return ScaledVec(self.t * 3)

    def __gt__(self, other):
        return self.t.sum() > 0


def _vector_arithmetic(a, b, x):
    plain = a + b
    number_first = 1 + a
    tensor_first = x + a
    subclass = a + ScaledVec(x)
    a += x
    reflected_comparison = a < ScaledVec(x)
    return plain.t, number_first.t, tensor_first.t, subclass.t, a.t, reflected_comparison


@pytest.mark.parametrize("backend", BACKENDS)
def test_python_operator_methods_of_user_classes_are_inlined(backend, counted_compile):
    x = torch.randn(3)

    def args():
        return Vec(x), Vec(x + 1), x

    compiled = counted_compile(_vector_arithmetic, backend, fullgraph=True)
    got, want = compiled(*args()), _vector_arithmetic(*args())
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(torch.as_tensor(g), torch.as_tensor(w))
    assert len(compiled.graphs) == 1
    assert compiled.ops == ["add", "add", "mul", "add", "mul", "sub", "sum", "gt"]


def test_an_operator_no_class_defines_still_breaks():
    def fn(a, b):
        return a - b

    with pytest.raises(ember.exc.Unsupported, match="operator sub"):
        ember.compile(fn, backend="eager", fullgraph=True)(Vec(torch.ones(1)), Vec(torch.ones(1)))


def test_operator_methods_that_all_return_not_implemented_break():
    class Shy:
        def __init__(self, t):
            self.t = t

        def __mul__(self, other):
            return NotImplemented

    def fn(a, b):
        return a * b

    with pytest.raises(ember.exc.Unsupported, match="NotImplemented"):
        ember.compile(fn, backend="eager", fullgraph=True)(Shy(torch.ones(1)), Shy(torch.ones(1)))
    with pytest.raises(TypeError):
        ember.compile(fn, backend="eager")(Shy(torch.ones(1)), Shy(torch.ones(1)))


# ---- classes with a Python __getattr__ ---------------------------------------------------
class Options(dict):
    def __getattr__(self, name):
        return self[name]


class Defaults:
    scale = 2

    def __init__(self):
        self.shift = 3

    def __getattr__(self, name):
        return len(name)


def _use_options(opts, x):
    return x * opts.scale + opts.shift


def _use_defaults(cfg, x):
    return x * cfg.scale - cfg.shift + cfg.missing


@pytest.mark.parametrize("backend", BACKENDS)
def test_getattr_of_a_dict_subclass_reads_its_items(backend, counted_compile):
    compiled = counted_compile(_use_options, backend, fullgraph=True)
    x = torch.randn(6)
    torch.testing.assert_close(compiled(Options(scale=2, shift=1), x), x * 2 + 1)
    assert compiled.ops == ["mul", "add"]
    # a key appearing as an instance attribute takes over from __getattr__: a new trace
    opts = Options(scale=2, shift=1)
    opts.__dict__["shift"] = 10
    torch.testing.assert_close(compiled(opts, x), x * 2 + 10)
    assert len(compiled.graphs) == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_getattr_hook_answers_only_missing_attributes(backend, counted_compile):
    compiled = counted_compile(_use_defaults, backend, fullgraph=True)
    x = torch.randn(6)
    torch.testing.assert_close(compiled(Defaults(), x), _use_defaults(Defaults(), x))
    assert compiled.ops == ["mul", "sub", "add"]
    cfg = Defaults()
    cfg.missing = 100  # now found in the instance dict: __getattr__ no longer runs
    torch.testing.assert_close(compiled(cfg, x), _use_defaults(cfg, x))
    assert len(compiled.graphs) == 2


def test_a_missing_attribute_of_a_list_subclass_is_an_attribute_error(counted_compile):
    class Rows(list):
        pass

    def fn(rows, x):
        return x + 1 if hasattr(rows, "extra") else x - 1

    compiled = counted_compile(fn, "eager", fullgraph=True)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(Rows([1]), x), x - 1)
    rows = Rows([1])
    rows.extra = True
    torch.testing.assert_close(compiled(rows, x), x + 1)
    assert len(compiled.graphs) == 2


# ---- grad-mode switches that undo each other ---------------------------------------------
def _toggle_then_update(param, step):
    before = torch.is_grad_enabled()
    try:
        torch.set_grad_enabled(False)
        torch.set_grad_enabled(True)  # undone at once: neither switch reaches the graph
        torch.set_grad_enabled(False)
        param.add_(step)
        with torch.enable_grad():
            pass  # nothing traced inside: no switch either
        doubled = param * 2
    finally:
        torch.set_grad_enabled(before)
    return doubled, torch.is_grad_enabled()


@pytest.mark.parametrize("backend", BACKENDS)
def test_back_to_back_grad_mode_switches_cancel(backend, counted_compile):
    compiled = counted_compile(_toggle_then_update, backend, fullgraph=True)
    mine, theirs = torch.nn.Parameter(torch.randn(4)), torch.nn.Parameter(torch.randn(4))
    with torch.no_grad():
        theirs.copy_(mine)
    step = torch.randn(4)
    got, want = compiled(mine, step), _toggle_then_update(theirs, step)
    torch.testing.assert_close(got[0], want[0])
    assert got[0].requires_grad == want[0].requires_grad and got[1] == want[1]
    torch.testing.assert_close(mine.detach(), theirs.detach())
    assert torch.is_grad_enabled()
    assert compiled.ops == ["_set_grad_enabled", "add_", "mul", "_set_grad_enabled"]


# ---- tensors meeting NumPy arrays --------------------------------------------------------
def _tensor_with_array(t, a):
    total = t + a  # NumPy computes it (Tensor defers to the array): NumPy's dtype rules
    t *= a  # not in place: rebinds t to a new tensor
    return total, t


@pytest.mark.filterwarnings("ignore:__array_wrap__:DeprecationWarning")  # eager's own
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tensor_and_an_array_combine_as_eager(backend, counted_compile):
    import numpy as np

    compiled = counted_compile(_tensor_with_array, backend, fullgraph=True)
    for dtype in (np.float32, np.float64, np.int64):
        t, a = torch.randn(5), (np.arange(5) + 1).astype(dtype)
        before = t.clone()
        got, want = compiled(t, a), _tensor_with_array(t.clone(), a)
        for g, w in zip(got, want, strict=True):
            assert type(g) is torch.Tensor and g.dtype == w.dtype
            torch.testing.assert_close(g, w)
        torch.testing.assert_close(t, before)  # the argument was not written
    assert len(compiled.graphs) == 3  # one per dtype


def _as_array(x, force):
    return x.numpy(force=force) * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_numpy_with_force(backend, counted_compile):
    import numpy as np

    compiled = counted_compile(_as_array, backend, fullgraph=True)
    x = torch.randn(3)
    got = compiled(x, False)
    assert type(got) is np.ndarray
    np.testing.assert_allclose(got, x.numpy() * 2)
    leaf = torch.randn(3, requires_grad=True)
    got = compiled(leaf, True)
    assert type(got) is np.ndarray
    np.testing.assert_allclose(got, leaf.detach().numpy() * 2)
    assert len(compiled.graphs) == 2


# ---- compiled functions inside compiled functions -----------------------------------------
def _wave(x):
    return torch.relu(torch.cos(x) + torch.sin(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiling_a_compiled_function_compiles_its_function(backend, counted_compile):
    inner = counted_compile(_wave, backend, fullgraph=True)
    outer = counted_compile(inner.compiled, backend, fullgraph=True)
    x = torch.randn(4)
    torch.testing.assert_close(outer(x), _wave(x))
    assert len(outer.graphs) == 1 and inner.graphs == []  # the outer compile decides


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_compiled_function_called_in_a_trace_joins_its_graph(backend, counted_compile):
    inner = counted_compile(_wave, backend, fullgraph=True)

    def caller(x):
        return inner.compiled(x * 2) - 1

    outer = counted_compile(caller, backend, fullgraph=True)
    x = torch.randn(4)
    torch.testing.assert_close(outer(x), _wave(x * 2) - 1)
    assert outer.ops == ["mul", "cos", "sin", "add", "relu", "sub"]
    assert inner.graphs == []
    torch.testing.assert_close(inner(x), _wave(x))  # called on its own it compiles as before
    assert len(inner.graphs) == 1


# ---- functions returned with the cells they close over -----------------------------------
def _make_scaler(a, b):
    total = a + b
    offset = a * 2

    def scaled(k: float = 3.0) -> torch.Tensor:
        return total * k - offset

    return scaled


def _make_counter(x):
    count = x.sum()

    def bump():
        nonlocal count
        count = count + 1
        return count

    def peek():
        return count

    return bump, peek


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_returned_closure_keeps_its_traced_cells(backend, counted_compile):
    compiled = counted_compile(_make_scaler, backend)
    a, b = torch.randn(3), torch.randn(3)
    got, want = compiled(a, b), _make_scaler(a, b)
    assert len(compiled.graphs) == 1 and compiled.ops == ["add", "mul"]
    torch.testing.assert_close(got(), want())
    torch.testing.assert_close(got(0.5), want(0.5))
    assert got.__annotations__ == want.__annotations__ and got.__defaults__ == (3.0,)
    assert got.__qualname__ == want.__qualname__


@pytest.mark.parametrize("backend", BACKENDS)
def test_returned_closures_share_their_cells(backend, counted_compile):
    compiled = counted_compile(_make_counter, backend)
    x = torch.randn(4)
    bump, peek = compiled(x)
    assert len(compiled.graphs) == 1
    bump()
    bump()
    torch.testing.assert_close(peek(), x.sum() + 2)  # one cell, seen by both


def test_a_closure_holding_itself_still_runs(counted_compile):
    def make(x):
        def again(n):
            return x if n == 0 else again(n - 1) + 1

        return again

    compiled = counted_compile(make, "eager")
    x = torch.randn(2)
    torch.testing.assert_close(compiled(x)(2), x + 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_run_only_mode_compiles_nothing_new_even_through_a_compiled_function(
    backend, counted_compile
):
    compiled = counted_compile(_wave, backend, fullgraph=True)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), _wave(x))
    assert len(compiled.graphs) == 1
    with ember.run():
        torch.testing.assert_close(compiled(x), _wave(x))  # compiled earlier: runs
        bigger = torch.randn(4, 4)
        torch.testing.assert_close(compiled(bigger), _wave(bigger))  # new: runs as is
    assert len(compiled.graphs) == 1
    torch.testing.assert_close(compiled(bigger), _wave(bigger))  # outside: compiles
    assert len(compiled.graphs) == 2


def _mask_with_array(t, a, op):
    return op(t, a)


@pytest.mark.filterwarnings("ignore:__array_wrap__:DeprecationWarning")  # eager's own
@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_array_operators_through_operator_functions(backend, counted_compile):
    import operator

    import numpy as np

    compiled = counted_compile(_mask_with_array, backend)
    t, a = torch.tensor([True, False, True]), np.array([True, True, False])
    for op in (operator.and_, operator.ixor, operator.add):  # bools come back as uint8
        got, want = compiled(t.clone(), a, op), _mask_with_array(t.clone(), a, op)
        assert got.dtype == want.dtype == torch.uint8
        torch.testing.assert_close(got, want)
    x, b = torch.arange(1.0, 4.0), np.array([2.0, 4.0, 8.0])
    for op in (operator.ipow, operator.itruediv, operator.imod):
        got, want = compiled(x.clone(), b, op), _mask_with_array(x.clone(), b, op)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want)
    assert len(compiled.graphs) == 6  # one per operator function (each guarded by identity)
