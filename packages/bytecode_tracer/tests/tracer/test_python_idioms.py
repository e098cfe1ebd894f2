"""Python idioms users write, traced in one graph and compared with eager (tracer only;
integration_tests/test_python_idioms.py runs the larger corpus through ember.compile)."""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import operator

import pytest
import torch

from conftest import Compiled, same


def test_keyword_arguments_to_folded_torch_functions():
    def fn(y):
        if torch.is_floating_point(input=y) and not torch.is_complex(input=y):
            return y * torch.numel(input=y)
        return y

    compiled = Compiled(fn, fullgraph=True)
    for y in (torch.randn(3), torch.arange(3)):
        assert same(compiled(y), fn(y))
    assert compiled.backend.graph_count == 1  # the int input needs no graph op


def test_bad_keyword_to_a_folded_function_raises_as_eager():
    def fn(y):
        return torch.is_tensor(obj=y)

    with pytest.raises(TypeError):
        fn(torch.ones(1))
    with pytest.raises(TypeError):
        Compiled(fn)(torch.ones(1))


def test_map_is_lazy_like_cpython():
    log = []

    def double(v):
        log.append(len(log))  # a list append: a side effect replayed after the graph
        return v * 2

    def fn(a):
        m = map(double, [a, a + 1, a + 2])
        first = next(m)
        log.append("between")
        return first + sum(m)

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    expected = fn(x)
    eager_log = list(log)
    log.clear()
    assert same(compiled(x), expected)
    assert log == eager_log == [0, "between", 2, 3]
    assert compiled.backend.graph_count == 1


def test_infinite_iterators_through_zip_and_islice():
    def fn(a):
        scaled = [a * i for i, _ in zip(itertools.count(1, 2), range(3))]
        firsts = list(itertools.islice(itertools.repeat(a), 2))
        evens = list(itertools.islice(itertools.count(), 0, 6, 2))
        return sum(scaled) + sum(firsts) * evens[-1]

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1


@pytest.mark.parametrize("pick", [max, min])
def test_max_min_over_one_element_tensors_match_python_with_nan(pick):
    def fn(a, b, c):
        return pick(a, b, c) * 2

    compiled = Compiled(fn, fullgraph=True)
    nan = float("nan")
    for values in [(1.0, 3.0, 2.0), (nan, 1.0, 2.0), (1.0, nan, 5.0), (2.0, 2.0, -1.0)]:
        args = [torch.tensor(v) for v in values]
        assert same(compiled(*args), fn(*args))
    assert compiled.backend.graph_count == 1


def test_max_over_tensors_of_several_elements_breaks_and_raises_as_eager():
    compiled = Compiled(lambda a, b: max(a, b))
    with pytest.raises(RuntimeError):
        compiled(torch.randn(3), torch.randn(3))


def test_reduce_partial_filter_sorted_key():
    def fn(a):
        scale = functools.partial(torch.mul, other=2.0)
        terms = [scale(a + i) for i in filter(lambda i: i % 2 == 0, range(6))]
        ordered = sorted(zip([3, 1, 2], terms, strict=False), key=lambda p: p[0])
        return functools.reduce(operator.sub, [t for _, t in ordered])

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1


def test_getattr_default_on_a_tensor():
    def fn(a):
        return a * getattr(a, "no_such_attribute", 3)

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))


def test_ordered_dict_and_defaultdict_built_in_the_trace():
    def fn(a):
        d = collections.OrderedDict(first=a)
        d["second"] = a * 2
        d.move_to_end("first")
        key, value = d.popitem(last=False)
        groups = collections.defaultdict(list)
        for i in range(4):
            groups[i % 2].append(a + i)
        counts = collections.defaultdict(int)
        for ch in "abca":
            counts[ch] += 1
        return key, value, d, sum(groups[0]) * counts["a"] + len(groups)

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    got, expected = compiled(x), fn(x)
    assert same(list(got[2].items()), list(expected[2].items()))
    assert type(got[2]) is collections.OrderedDict
    assert same((got[0], got[1], got[3]), (expected[0], expected[1], expected[3]))
    assert compiled.backend.graph_count == 1


Pair = collections.namedtuple("Pair", ["left", "right"])


@dataclasses.dataclass
class Affine:
    scale: float
    shift: float = 1.0

    @property
    def doubled(self):
        return self.scale * 2

    def apply(self, a):
        return a * self.doubled + self.shift


def test_namedtuple_replace_asdict_and_dataclass_methods():
    def fn(a):
        p = Pair(a, a + 1)._replace(right=a * 3)
        fields = p._asdict()
        return Affine(0.5).apply(fields["right"]) + p.left, Pair._fields

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1


def test_tensor_type_string_and_list_sort():
    def fn(a):
        order = [3, 1, 2]
        order.sort(reverse=True)
        pairs = [(2, a), (1, a * 2)]
        pairs.sort(key=lambda p: p[0])
        if a.type() == "torch.FloatTensor":
            return pairs[0][1] * order[0]
        return a

    compiled = Compiled(fn, fullgraph=True)
    for t in (torch.randn(3), torch.randn(3).double()):
        assert same(compiled(t), fn(t))


def test_deque_built_in_the_trace():
    def fn(a):
        q = collections.deque([a, a + 1])
        q.append(a * 2)
        q.appendleft(a - 1)
        q.extendleft([a * 5])
        first, last = q.popleft(), q.pop()
        q.rotate(2)
        return first + last + q[0], len(q), q

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    got, expected = compiled(x), fn(x)
    assert type(got[2]) is collections.deque
    assert same((got[0], got[1], list(got[2])), (expected[0], expected[1], list(expected[2])))
    assert compiled.backend.graph_count == 1


def test_autocast_block_is_in_the_graph_and_state_is_restored():
    def fn(a, b):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            c = torch.mm(a, b)
        return c.float() + 1, c.dtype, torch.mm(a, b)

    compiled = Compiled(fn, fullgraph=True)
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    assert same(compiled(a, b), fn(a, b))
    assert not torch.is_autocast_enabled("cpu")
    assert (
        "_enter_autocast" in compiled.backend.ops() and "_exit_autocast" in compiled.backend.ops()
    )


def test_autocast_state_is_left_after_a_trace_stopped_inside_the_block():
    def fn(a, b):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            c = torch.mm(a, b)
            print("inside")  # a graph break inside the block: the frame runs as it is
            d = torch.mm(c, b)
        return d.float()

    compiled = Compiled(fn)
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    assert same(compiled(a, b), fn(a, b))
    assert not torch.is_autocast_enabled("cpu")


# --- graph breaks inside with/try blocks: the break runs under the block, the rest resumes ---


def _no_grad_break(a):
    b = a * 2
    with torch.no_grad():
        c = b + 1
        print("inside no_grad")
        d = c * 3
    return d + b, d.requires_grad, torch.is_grad_enabled()


def _nested_grad_break(a):
    with torch.no_grad():
        b = a * 2
        with torch.enable_grad():
            c = a * b
            print("inside enable_grad")
            d = c.sum()
        e = b + 1
    return d, e, d.requires_grad, e.requires_grad


def _try_break(a):
    b = a * 2
    try:
        print("inside try")
        c = b * 3
    except ValueError:
        c = b
    return c + b


def _try_break_raising(a):
    b = a * 2
    try:
        int("not a number")  # the replayed call raises: the except clause must see it
        c = b * 3
    except ValueError:
        c = b - 100
    return c + b


def _with_break_raising(a):
    b = a * 2
    try:
        with torch.no_grad():
            c = b + 1
            int("bad")
    except ValueError:
        c = b
    return c * 2, torch.is_grad_enabled()


@pytest.mark.parametrize(
    "fn", [_no_grad_break, _nested_grad_break, _try_break, _try_break_raising, _with_break_raising]
)
def test_graph_break_inside_a_block_resumes_with_the_block_restored(fn, capsys):
    compiled = Compiled(fn)
    x = torch.randn(4, requires_grad=True)
    expected = fn(x)
    for _ in range(2):
        got = compiled(x)
        assert same(got, expected)
        flat = got if isinstance(got, tuple) else (got,)
        want = expected if isinstance(expected, tuple) else (expected,)
        for g, e in zip(flat, want, strict=True):
            if isinstance(e, torch.Tensor):
                assert g.requires_grad == e.requires_grad
        assert torch.is_grad_enabled()
    assert compiled.breaks and compiled.backend.graph_count >= 1
    assert not any("try/with" in reason for _, reason in compiled.compiler.skipped)


class _ScaledSquare(torch.autograd.Function):
    """x * x * k with a deliberately different backward: a re-derived gradient would differ."""

    @staticmethod
    def forward(ctx, a, k):
        ctx.save_for_backward(a)
        ctx.k = k
        return a * a * k

    @staticmethod
    def backward(ctx, grad):
        (a,) = ctx.saved_tensors
        return 10 * a * grad * ctx.k, None


def test_custom_autograd_function_is_one_node_with_its_own_backward():
    def fn(a):
        return _ScaledSquare.apply(a.sin(), 3).sum()

    compiled = Compiled(fn, fullgraph=True)
    a = torch.randn(5, requires_grad=True)
    expected = fn(a)
    (expected_grad,) = torch.autograd.grad(expected, a)
    got = compiled(a)
    (got_grad,) = torch.autograd.grad(got, a)
    assert same(got, expected) and same(got_grad, expected_grad)
    assert compiled.backend.graph_count == 1
    assert "_ScaledSquare_apply" in compiled.backend.ops()


@pytest.mark.parametrize("validate", [False, True])  # True: checked after the graph
def test_distribution_built_in_the_trace(validate):
    def fn(loc):
        d = torch.distributions.Normal(loc, torch.ones_like(loc), validate_args=validate)
        return d.log_prob(loc + 0.5), d.sample(), d.mean

    compiled = Compiled(fn, fullgraph=True)
    loc = torch.randn(3)
    torch.manual_seed(0)
    expected = fn(loc)
    torch.manual_seed(0)
    assert same(compiled(loc), expected)
    assert compiled.backend.graph_count == 1


def _break_in_handler(a):
    b = a * 2
    try:
        raise ValueError("boom")
    except ValueError:
        print("handling")
        c = b + 1
    return c


def _break_in_finally(a):
    b = a * 2
    try:
        c = b + 1
    finally:
        print("finally")
        d = b * 3
    return c + d


def _break_before_bare_reraise(a):
    b = a * 2
    try:
        try:
            int("bad")
        except ValueError:
            print("inner handler")
            raise
    except ValueError as exc:
        b = b + len(str(exc))
    return b


def _break_in_try_inside_no_grad(a):
    b = a * 2
    with torch.no_grad():
        try:
            print("in try in no_grad")
            c = b * 3
        finally:
            d = b + 1
    return c + d + b, c.requires_grad


@pytest.mark.parametrize(
    "fn",
    [
        _break_in_handler,
        _break_in_finally,
        _break_before_bare_reraise,
        _break_in_try_inside_no_grad,
    ],
)
def test_graph_break_in_handlers_and_finally_blocks_matches_eager(fn, capsys):
    compiled = Compiled(fn)
    x = torch.randn(3, requires_grad=True)
    expected = fn(x)
    for _ in range(2):
        assert same(compiled(x), expected)
        assert torch.is_grad_enabled()


class _ShiftedWindows(torch.nn.Module):
    """torchvision's Swin blocks copy a module's list attribute, then write the copy."""

    def __init__(self) -> None:
        super().__init__()
        self.shift = [2, 3]

    def forward(self, x):
        shift = self.shift.copy()
        if x.shape[0] <= shift[0]:
            shift[0] = 0
        return torch.roll(x, shifts=(-shift[0], -shift[1]), dims=(0, 1))


def test_list_copy_is_one_graph_and_leaves_the_original_alone():
    module = _ShiftedWindows()
    compiled = Compiled(module, fullgraph=True)
    for x in (torch.randn(4, 5), torch.randn(2, 5)):
        assert same(compiled(x), module(x))
    assert module.shift == [2, 3]
    assert compiled.backend.graph_count == 2  # one per value of the shape test
