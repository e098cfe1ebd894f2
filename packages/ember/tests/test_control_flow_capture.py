"""torch.cond and map captured into one graph, run on every backend, eager as the oracle.

A tensor predicate keeps both branches: the frame compiles to one graph that calls
`torch.ops.higher_order.cond` with each branch as a GraphModule attribute; a predicate known
at trace time picks its branch (no operator in the graph). Branches that change state outside
themselves, or disagree on their outputs, leave the call a graph break (eager runs it). The
aot_eager and inductor backends compile such a graph around the operator, each branch or
body compiled as well (backends/operator_split.py): nothing of it runs eagerly.
"""

from __future__ import annotations

import pytest
import torch
from functorch.experimental.control_flow import map as control_map

import ember
from conftest import CountingBackend, RecordingBackend

BACKENDS = ["eager", "aot_eager", "inductor"]
COND = torch.ops.higher_order.cond
MAP_IMPL = torch.ops.higher_order.map_impl


def _calls(gm, op):
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target is op]


def scaled_or_shifted(flag, t, bias):
    def grow(u):
        return u.exp() * 2 + bias  # `bias` is a free tensor: lifted into the subgraph

    def shrink(u):
        return u.tanh() - 1

    return torch.cond(flag, grow, shrink, (t,)) * 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_predicate_keeps_both_branches_in_one_graph(backend):
    counting = CountingBackend(backend)
    compiled = ember.compile(scaled_or_shifted, backend=counting, fullgraph=True)
    t, bias = torch.randn(6), torch.randn(6)
    for flag in (True, False, True):
        pred = torch.tensor(flag)
        torch.testing.assert_close(compiled(pred, t, bias), scaled_or_shifted(pred, t, bias))
    # one compile serves both values of the predicate: it is data, not a guard
    assert counting.graphs == 1
    if backend != "eager":
        assert ember.counters["compiled_operators"]["higher_order.cond"] == 1
        assert not ember.counters["graph_fallbacks"]


def test_the_graph_calls_cond_with_the_free_tensor_lifted():
    backend = RecordingBackend()
    compiled = ember.compile(scaled_or_shifted, backend=backend, fullgraph=True)
    compiled(torch.tensor(True), torch.randn(4), torch.randn(4))
    (gm,) = backend.graphs
    (call,) = _calls(gm, COND)
    _, true_attr, false_attr, operands = call.args
    assert len(operands) == 2  # t, then the lifted bias
    true_gm = getattr(gm, true_attr.target)
    false_gm = getattr(gm, false_attr.target)
    for sub in (true_gm, false_gm):  # both branches take the same operands
        assert len([n for n in sub.graph.nodes if n.op == "placeholder"]) == 2
    assert not [n for n in gm.graph.nodes if n.target is torch.exp]  # only in the branch


def test_a_data_dependent_predicate_computed_in_the_frame():
    def pick(t):
        return torch.cond(t.sum() > 0, lambda u: u + 1, lambda u: u - 1, [t])

    for backend in BACKENDS:
        ember.reset()
        compiled = ember.compile(pick, backend=backend, fullgraph=True)
        for t in (torch.ones(3), -torch.ones(3)):
            torch.testing.assert_close(compiled(t), pick(t))


def test_a_constant_predicate_picks_its_branch_without_the_operator():
    backend = RecordingBackend()

    def by_shape(t):
        return torch.cond(t.shape[0] > 2, lambda u: u.sin(), lambda u: u.cos(), [t])

    compiled = ember.compile(by_shape, backend=backend, fullgraph=True)
    for n in (4, 1):
        t = torch.randn(n)
        torch.testing.assert_close(compiled(t), by_shape(t))
    assert len(backend.graphs) == 2  # one per shape, each with one branch inline
    assert all(not _calls(gm, COND) for gm in backend.graphs)


def nested(p, q, t):
    def inner_true(u):
        return u * 10

    def inner_false(u):
        return -u

    def outer_true(q, u):
        return u.sin()

    def outer_false(q, u):
        return u + torch.cond(q, inner_true, inner_false, [u])

    return torch.cond(p, outer_true, outer_false, [q, t])


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_cond(backend):
    counting = CountingBackend(backend)
    compiled = ember.compile(nested, backend=counting, fullgraph=True)
    t = torch.tensor([0.5, -2.0])
    for p in (True, False):
        for q in (True, False):
            args = (torch.tensor(p), torch.tensor(q), t)
            torch.testing.assert_close(compiled(*args), nested(*args))
    assert counting.graphs == 1


def test_nested_cond_lives_inside_the_outer_branch():
    backend = RecordingBackend()
    ember.compile(nested, backend=backend)(torch.tensor(False), torch.tensor(True), torch.ones(2))
    (gm,) = backend.graphs
    (outer,) = _calls(gm, COND)
    false_gm = getattr(gm, outer.args[2].target)
    assert len(_calls(false_gm, COND)) == 1


def test_outputs_in_a_tuple_and_a_module_parameter_read_by_a_branch():
    linear = torch.nn.Linear(3, 3)

    def two(flag, t):
        out = torch.cond(flag, lambda u: (linear(u), u.sum()), lambda u: (u * 2, u.mean()), (t,))
        return out[0] + out[1]

    t = torch.randn(2, 3)
    for backend in BACKENDS:
        ember.reset()
        compiled = ember.compile(two, backend=backend, fullgraph=True)
        for flag in (True, False):
            torch.testing.assert_close(compiled(torch.tensor(flag), t), two(torch.tensor(flag), t))


def test_a_branch_returning_its_input_returns_a_new_tensor():
    def keep_or_double(flag, t):
        return torch.cond(flag, lambda u: u, lambda u: u * 2, (t,))

    compiled = ember.compile(keep_or_double, backend="eager", fullgraph=True)
    t = torch.randn(3)
    out = compiled(torch.tensor(True), t)
    assert torch.equal(out, t) and out.data_ptr() != t.data_ptr()


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_gradients_flow_through_the_taken_branch(backend):
    w = torch.randn(4, requires_grad=True)

    def loss(flag, t):
        return torch.cond(flag, lambda u: (u * w).sin(), lambda u: u * w * w, (t,)).sum()

    counting = CountingBackend(backend)
    compiled = ember.compile(loss, backend=counting)
    t = torch.randn(4)
    for flag in (True, False):
        pred = torch.tensor(flag)
        expected = torch.autograd.grad(loss(pred, t), w)[0]
        got = torch.autograd.grad(compiled(pred, t), w)[0]
        torch.testing.assert_close(got, expected)
    assert counting.graphs == 1


def test_branches_that_disagree_are_a_graph_break():
    def mismatched(flag, t):
        return torch.cond(flag, lambda u: u.sum(0), lambda u: u, (t,))

    with pytest.raises(ember.exc.Unsupported, match="disagree"):
        ember.compile(mismatched, backend="eager", fullgraph=True)(
            torch.tensor(True), torch.ones(2, 2)
        )


def test_a_branch_with_a_side_effect_is_refused():
    seen = []

    def noisy(flag, t):
        def record(u):
            seen.append(1)
            return u + 1

        return torch.cond(flag, record, lambda u: u - 1, (t,))

    with pytest.raises(ember.exc.Unsupported, match="changes state outside itself"):
        ember.compile(noisy, backend="eager", fullgraph=True)(torch.tensor(True), torch.ones(2))
    assert not seen  # the trace's append was not replayed


def test_a_branch_writing_an_outer_tensor_in_place_is_refused():
    def writes(flag, t, acc):
        return torch.cond(flag, lambda u: acc.add_(u).clone(), lambda u: u, (t,))

    with pytest.raises(ember.exc.Unsupported, match="in-place write"):
        ember.compile(writes, backend="eager", fullgraph=True)(
            torch.tensor(True), torch.ones(2), torch.zeros(2)
        )


@pytest.mark.parametrize("backend", BACKENDS)
def test_map_over_the_leading_dimension(backend):
    scale = torch.randn(3)

    def rows(xs, offset):
        return control_map(lambda row, off: row.sin() * scale + off, xs, offset)

    counting = CountingBackend(backend)
    compiled = ember.compile(rows, backend=counting, fullgraph=True)
    xs, offset = torch.randn(5, 3), torch.randn(3)
    torch.testing.assert_close(compiled(xs, offset), rows(xs, offset))
    assert counting.graphs == 1


def test_map_is_one_call_of_its_operator():
    backend = RecordingBackend()

    def rows(xs):
        return control_map(lambda row: (row + 1, row.sum()), xs)

    compiled = ember.compile(rows, backend=backend, fullgraph=True)
    xs = torch.randn(4, 2)
    got, expected = compiled(xs), rows(xs)
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b)
    (gm,) = backend.graphs
    assert len(_calls(gm, MAP_IMPL)) == 1


def test_map_body_with_a_side_effect_is_refused():
    class Counter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, xs):
            def body(x):
                self.calls += 1
                return x

            return control_map(body, xs)

    with pytest.raises(ember.exc.Unsupported, match="changes state outside itself"):
        ember.compile(Counter(), backend="eager", fullgraph=True)(torch.randn(3, 2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_symbolic_size_predicate_is_decided_under_a_guard(backend):
    def by_length(t):
        return torch.cond(t.shape[0] > 4, lambda u: u.sin(), lambda u: u.cos(), (t,))

    counting = CountingBackend(backend)
    compiled = ember.compile(by_length, backend=counting, dynamic=True)
    for n in (6, 8, 3, 9, 2):
        t = torch.randn(n)
        torch.testing.assert_close(compiled(t), by_length(t))
    assert counting.graphs == 2  # one per side of the predicate, each for every size there


@pytest.mark.parametrize("backend", BACKENDS)
def test_operands_nested_in_a_dict_and_a_list(backend):
    def mix(flag, t, s):
        def weigh(parts, extra):
            return parts["a"] * extra[0] + parts["b"]

        def blend(parts, extra):
            return parts["a"] - parts["b"] * extra[0]

        return torch.cond(flag, weigh, blend, ({"a": t, "b": s}, [s]))

    counting = CountingBackend(backend)
    compiled = ember.compile(mix, backend=counting, fullgraph=True)
    t, s = torch.randn(3), torch.randn(3)
    for flag in (True, False):
        pred = torch.tensor(flag)
        torch.testing.assert_close(compiled(pred, t, s), mix(pred, t, s))
    assert counting.graphs == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_map_over_a_symbolic_length(backend):
    def rows(xs, scale):
        return control_map(lambda row, s: row.cos() * s, xs, scale)

    counting = CountingBackend(backend)
    compiled = ember.compile(rows, backend=counting, dynamic=True)
    scale = torch.randn(2)
    for n in (3, 5, 7):
        xs = torch.randn(n, 2)
        torch.testing.assert_close(compiled(xs, scale), rows(xs, scale))
    assert counting.graphs == 1


def test_a_branch_writing_an_operand_through_a_view_is_refused():
    def through_view(flag, t):
        def bump(u):
            u[0].add_(1)  # writes the operand itself
            return u * 2

        return torch.cond(flag, bump, lambda u: u * 3, (t,))

    with pytest.raises(ember.exc.Unsupported, match="in-place write"):
        ember.compile(through_view, backend="eager", fullgraph=True)(
            torch.tensor(True), torch.ones(2)
        )


def test_a_branch_writing_its_own_intermediate_in_place_is_captured():
    def local_write(flag, t):
        def bump(u):
            v = u * 2
            v[0].add_(1)  # a view of the branch's own tensor
            return v

        return torch.cond(flag, bump, lambda u: u * 3, (t,))

    compiled = ember.compile(local_write, backend="eager", fullgraph=True)
    t = torch.randn(2)
    for flag in (True, False):
        pred = torch.tensor(flag)
        torch.testing.assert_close(compiled(pred, t), local_write(pred, t))
