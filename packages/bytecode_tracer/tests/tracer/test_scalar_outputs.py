"""Tensor.item() / .tolist() kept in the graph under capture_scalar_outputs=True: an unbacked
symbolic scalar (variables/scalar_outputs.py). Off (the default) they stay a graph break."""

from __future__ import annotations

import pytest
import torch

from conftest import Compiled, same


def _scaled(x, w):
    k = w.item()
    return x * k + k, k * 2


@pytest.mark.parametrize(
    "w0, w1", [(torch.tensor(1.5), torch.tensor(-0.25)), (torch.tensor(3), torch.tensor(-7))]
)
def test_item_is_one_graph_and_follows_the_value(w0, w1):
    compiled = Compiled(_scaled, fullgraph=True, capture_scalar_outputs=True)
    x = torch.randn(5)
    for w in (w0, w1):  # a new value is read at run time, not baked in
        assert same(compiled(x, w), _scaled(x, w))
    assert compiled.backend.graph_count == 1
    assert "item" in compiled.backend.ops(0)


def test_item_is_a_graph_break_by_default():
    compiled = Compiled(_scaled)
    x, w = torch.randn(5), torch.tensor(2.0)
    assert same(compiled(x, w), _scaled(x, w))
    assert any("item" in b.reason for b in compiled.breaks)


def test_item_as_a_size():
    def fn(x, n):
        k = n.item()
        return torch.zeros(k) + x.sum(), torch.arange(k) * 2

    compiled = Compiled(fn, fullgraph=True, capture_scalar_outputs=True)
    x = torch.randn(3)
    for n in (torch.tensor(4), torch.tensor(6)):
        assert same(compiled(x, n), fn(x, n))
    assert compiled.backend.graph_count == 1


def test_torch_check_on_an_item_does_not_break():
    def fn(x, n):
        k = n.item()
        torch._check(k >= 0)
        torch._check(k < 100)
        return x + k

    compiled = Compiled(fn, fullgraph=True, capture_scalar_outputs=True)
    x = torch.randn(3)
    assert same(compiled(x, torch.tensor(9)), fn(x, torch.tensor(9)))
    assert compiled.backend.graph_count == 1


def test_branch_on_an_item_is_a_graph_break_with_eager_results():
    def fn(x, n):
        k = n.item()
        if k > 0:
            return x + 1
        return x - 1

    compiled = Compiled(fn, capture_scalar_outputs=True)
    x = torch.randn(3)
    for n in (torch.tensor(2), torch.tensor(-2)):  # both sides of the branch
        assert same(compiled(x, n), fn(x, n))
    assert compiled.breaks


@pytest.mark.parametrize(
    "t", [torch.tensor([1.5, -2.0, 3.25]), torch.tensor([[1, 2, 3], [-4, 5, 6]]), torch.tensor(7)]
)
def test_tolist(t):
    def fn(x):
        return x.tolist()

    compiled = Compiled(fn, fullgraph=True, capture_scalar_outputs=True)
    assert compiled(t) == fn(t)
    other = t * 2 - 1
    assert compiled(other) == fn(other)  # read at run time
    assert compiled.backend.graph_count == 1


def test_items_of_a_bool_tensor_stay_symbolic_until_branched_on():
    def fn(x, flag):
        b = flag.item()
        return x * 2, b

    compiled = Compiled(fn, fullgraph=True, capture_scalar_outputs=True)
    x = torch.randn(2)
    for flag in (torch.tensor(True), torch.tensor(False)):
        assert same(compiled(x, flag), fn(x, flag))
    assert compiled.backend.graph_count == 1


def test_torch_check_on_an_item_is_asserted_when_the_graph_runs():
    def fn(x, n):
        k = n.item()
        torch._check(k >= 3)
        return x * k

    compiled = Compiled(fn, fullgraph=True, capture_scalar_outputs=True)
    x = torch.randn(3)
    assert same(compiled(x, torch.tensor(5)), fn(x, torch.tensor(5)))
    # as eager's torch._check raises; the graph's assertion names its condition, in torch's words
    with pytest.raises(RuntimeError, match=r"Runtime assertion failed for expression u\d+ >= 3"):
        compiled(x, torch.tensor(1))
    with pytest.raises(RuntimeError):
        fn(x, torch.tensor(1))
    assert compiled.backend.graph_count == 1


def test_a_checked_bound_decides_later_branches_without_a_break():
    def fn(x, n):
        k = n.item()
        torch._check(k >= 3)
        torch._check(k <= 10)
        if k >= 0 and k < 20:  # implied by the checks (asserted at run time)
            return x + k
        return x - k

    compiled = Compiled(fn, fullgraph=True, capture_scalar_outputs=True)
    x = torch.randn(3)
    for n in (3, 10):
        assert same(compiled(x, torch.tensor(n)), fn(x, torch.tensor(n)))
    assert compiled.backend.graph_count == 1


def test_tolist_of_a_tensor_of_symbolic_length_specializes_the_length():
    def fn(v):
        a, b = v.tolist()
        return a * b + 1

    compiled = Compiled(fn, fullgraph=True, dynamic=True, capture_scalar_outputs=True)
    for pair in ([2, 3], [-4, 5]):
        v = torch.tensor(pair)
        assert compiled(v) == fn(v)
    assert compiled.backend.graph_count == 1


def test_a_conjunction_checked_at_once_is_asserted_part_by_part():
    def fn(v):
        a, b = v.tolist()
        torch._check((a >= 1) & (b >= 1) & (a != b))
        if a == b:  # decided by the check's last part
            return v * 0
        return v * (a + b)

    compiled = Compiled(fn, fullgraph=True, capture_scalar_outputs=True)
    assert same(compiled(torch.tensor([2, 5])), fn(torch.tensor([2, 5])))
    for bad in ([0, 5], [3, 3]):
        with pytest.raises(RuntimeError):
            compiled(torch.tensor(bad))
    assert compiled.backend.graph_count == 1


@pytest.mark.parametrize(
    "build",
    [
        lambda v: torch.tensor([v.item()]),
        lambda v: torch.tensor([[v.item()], [2.0]]),
        lambda v: torch.tensor(v.item()),
        lambda v: torch.tensor((v.item(), 1)),
    ],
)
@pytest.mark.parametrize("v", [torch.tensor([0.75]), torch.tensor([5])])
def test_a_tensor_built_from_items(build, v):
    def fn(x):
        return build(x)

    compiled = Compiled(fn, fullgraph=True, capture_scalar_outputs=True)
    for value in (v, v * 3):
        assert same(compiled(value), fn(value))
    assert compiled.backend.graph_count == 1


def test_an_int_item_may_be_negative():
    def fn(x, n):
        k = n.item()
        if k >= 0:  # nothing says so: decided by the run (a graph break), not assumed
            return x + k
        return x - k

    compiled = Compiled(fn, capture_scalar_outputs=True)
    x = torch.randn(3)
    for n in (torch.tensor(-3), torch.tensor(4)):
        assert same(compiled(x, n), fn(x, n))
    assert any("data-dependent" in b.reason for b in compiled.breaks)


def test_float_and_int_of_a_one_element_tensor_are_its_item():
    # float(t) / int(t) run Tensor.__float__ / __int__: item() made a number, in the graph
    def fn(x, n):
        return x * float(n + 0.5) + int(n.to(torch.int64) * 2)

    compiled = Compiled(fn, fullgraph=True, capture_scalar_outputs=True)
    x = torch.randn(4)
    for n in (torch.tensor([1.5]), torch.tensor([-3.0]), torch.tensor([[7.25]])):
        assert same(compiled(x, n), fn(x, n))  # each call reads the value it is given
    assert not compiled.breaks
    assert compiled.backend.graph_count == 2  # a (1,) and a (1, 1) tensor


def test_float_of_a_tensor_without_capture_is_a_break():
    def fn(x, n):
        return x * float(n)

    compiled = Compiled(fn)
    x, n = torch.randn(4), torch.tensor(2.0)
    assert same(compiled(x, n), fn(x, n))
    assert compiled.breaks


@pytest.mark.parametrize(
    "v", [torch.tensor([4]), torch.tensor([0]), torch.tensor([-0.0]), torch.tensor([True])]
)
def test_bool_of_an_item_and_of_a_one_element_tensor_is_a_graph_value(v):
    # bool(n) is `n != 0` kept symbolic (bool of a SymBool is itself), as Tensor.__bool__ is
    def of_item(t):
        return bool(t.item())

    def of_tensor(t):
        return bool(t), bool(t * 2)

    for fn in (of_item, of_tensor):
        compiled = Compiled(fn, fullgraph=True, capture_scalar_outputs=True)
        for value in (v, 1 - v.int()):  # each call reads the value it is given
            assert compiled(value) == fn(value)
        assert not compiled.breaks
        assert compiled.backend.graph_count == 2  # v's dtype, then int32


def test_bool_of_a_tensor_of_several_values_raises_as_eager():
    def fn(t):
        try:
            return bool(t)
        except RuntimeError:
            return t.sum()

    compiled = Compiled(fn, fullgraph=True, capture_scalar_outputs=True)
    for t in (torch.tensor([1, 2, 3]), torch.ones(0)):
        assert same(compiled(t), fn(t))
    assert not compiled.breaks


@pytest.mark.parametrize(
    "build",
    [
        lambda t, n: t.new_tensor([n]),
        lambda t, n: t.new_tensor([[n, n + 1], [n * 2, 0]]),
        lambda t, n: t.new_tensor([n * t.shape[0], t.shape[0] - n], dtype=torch.float64),
    ],
)
@pytest.mark.parametrize("dtype", [torch.int64, torch.float32])
def test_new_tensor_of_read_numbers_keeps_them_in_the_graph(build, dtype):
    # new_tensor is torch.tensor with t's dtype and device: the numbers stay graph values
    def fn(t, v):
        return build(t, v.item())

    compiled = Compiled(fn, fullgraph=True, capture_scalar_outputs=True)
    t = torch.ones(3, dtype=dtype)
    for v in (torch.tensor(4), torch.tensor(-2)):
        got, want = compiled(t, v), fn(t, v)
        assert got.dtype == want.dtype and same(got, want)
    assert not compiled.breaks
    assert compiled.backend.graph_count == 1


def test_a_constant_tensor_built_in_the_trace_indexes_a_size_and_a_list():
    # torch.tensor(1) made from constants: its value is known at trace time (no input
    # reaches it), so x.shape[i] and a list index read it without a break
    def fn(x):
        i = torch.tensor(1)
        j = torch.tensor([2])
        return x.reshape(-1, x.shape[i]), (10, 20, 30)[j]

    compiled = Compiled(fn, fullgraph=True)
    for x in (torch.randn(2, 3, 4), torch.randn(2, 5, 4)):
        assert same(compiled(x), fn(x))
    assert not compiled.breaks


def test_an_input_tensor_as_an_index_is_still_a_break():
    def fn(x, i):
        return x * x.shape[i]

    compiled = Compiled(fn)
    x = torch.randn(2, 3)
    for i in (torch.tensor(0), torch.tensor(1)):
        assert same(compiled(x, i), fn(x, i))
    assert compiled.breaks
