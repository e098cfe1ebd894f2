"""Guards that pin what the trace used and no more, and the reason a tensor check gives,
under the default backend (issue 26): the inductor twin of
packages/bytecode_tracer/tests/tracer/test_lazy_container_entries.py,
test_compiler_directives.py (a disabled function made per call) and
tests/guards/test_guard_failure.py."""

from __future__ import annotations

import pytest
import torch

import ember

pytestmark = pytest.mark.usefixtures("fresh_ember")


def _graphs() -> int:
    return ember.counters["inductor"]["forward_graphs"]


def test_unread_entries_change_without_a_retrace_under_inductor():
    def fn(x, table, pair):
        return x.sin() * table["scale"] + pair[0]

    compiled = ember.compile(fn, backend="inductor")
    x = torch.randn(8)
    calls = [
        ({"scale": 2.0, "tag": "a"}, (1.0, "p")),
        ({"scale": 2.0, "tag": "b"}, (1.0, "q")),  # only unread entries differ
        ({"scale": 3.0, "tag": "b"}, (1.0, "q")),  # a read entry differs: retrace
        ({"scale": 3.0, "tag": "b"}, (4.0, "q")),
    ]
    graphs = []
    for table, pair in calls:
        torch.testing.assert_close(compiled(x, table, pair), fn(x, table, pair))
        graphs.append(_graphs())
    assert graphs == [1, 1, 2, 3]


def test_a_size_change_names_the_tensor_under_inductor():
    reasons = []

    def fn(x, y):
        return x.exp() + y

    compiled = ember.compile(
        fn, backend="inductor", dynamic=False, guard_fail_fn=lambda f: reasons.append(f.reason)
    )
    for n in (3, 4):
        x, y = torch.randn(n), torch.randn(n)
        torch.testing.assert_close(compiled(x, y), fn(x, y))
    assert _graphs() == 2
    assert reasons[0].startswith("tensor 'x' size mismatch at index 0. expected 3, actual 4")


def test_a_disabled_function_made_per_call_reuses_the_trace_under_inductor():
    def fn(x, k):
        @torch.compiler.disable
        def offset(t):
            return t + k

        return offset(x.sin()).cos()

    compiled = ember.compile(fn, backend="inductor")
    x = torch.randn(6)
    for k in (1.0, 2.0, 3.0):
        torch.testing.assert_close(compiled(x, k), fn(x, k))
    # a graph before the break and one after it; the closure's value is read eagerly
    assert _graphs() == 2


def test_a_dropped_fstring_leaves_a_size_dynamic_under_inductor():
    def fn(x):
        y = x.tanh() * 2
        f"{x.shape[0]}"  # made and dropped
        shown = f"{x.shape[1]}"  # used: that size is pinned
        return y, shown

    compiled = ember.compile(fn, backend="inductor", dynamic=True)
    for rows in (5, 6, 9):
        x = torch.randn(rows, 4)
        got, want = compiled(x), fn(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]
    assert _graphs() == 1
    x = torch.randn(5, 7)
    assert compiled(x)[1] == "7" and _graphs() == 2


def test_a_new_argument_tuple_at_a_freed_ones_address_is_guarded_again():
    """Tuples come from a freelist: each call's argument tuple usually lands where the
    last one was freed. A guard that took that address for the same tuple checked the
    last call's tensors (kept alive here): a kernel for the wrong shape, or a crash."""

    def fn(pair):
        a, b = pair
        return a * 2 + b

    compiled = ember.compile(fn, backend="inductor", dynamic=False)
    kept = []
    for n in (3, 4, 5, 3, 4, 5):
        for _ in range(2):  # the guard records on a call that passes
            pair = (torch.randn(n), torch.randn(n))
            kept.append(list(pair))  # the tensors outlive their tuple
            torch.testing.assert_close(compiled(pair), fn(pair))
            del pair
    assert _graphs() == 3
