"""The memory plan between buffers of the graph: a pointwise kernel writing over a buffer it
reads for the last time (Allocation.in_place), library results handed on once dead, and the
plan's peak (Schedule.peak_bytes); every result checked against eager through the
interpreter, which shares storages as the plan says."""

from __future__ import annotations

import torch

from conftest import LIBRARY_CPU, check_against_eager, prim_graph
from ember_inductor_ir import OP_NAMES, Target, lower, run_scheduled, schedule
from ember_primops import prims

#: a CPU target whose products are library results (no ``out=``): the Triton target's way
FRESH_MM_CPU = Target(name="test-fresh-mm-cpu", device_type="cpu", ops=frozenset(OP_NAMES))


def _scheduled(fn, inputs, target=LIBRARY_CPU):
    return schedule(lower(prim_graph(fn, *inputs), list(inputs), target=target))


def _check(fn, inputs, target=LIBRARY_CPU):
    expected = fn(*inputs)
    sched = _scheduled(fn, inputs, target)
    got = run_scheduled(sched, list(inputs))
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4)
    return sched


def _in_place(sched) -> dict[str, str]:
    return {a.buffer: a.reuses for a in sched.allocations.values() if a.in_place}


def _mlp(x, w1, b1, w2):
    """x @ w1 -> + b1, tanh (pointwise, the product's last reader) -> @ w2 -> exp."""
    h = prims.mm(x, w1)
    a = prims.tanh(prims.add(h, prims.broadcast_in_dim(b1, [32, 64], [1])))
    return (prims.exp(prims.mm(a, w2)),)


def _mlp_inputs():
    torch.manual_seed(0)
    return [torch.randn(32, 16), torch.randn(16, 64), torch.randn(64), torch.randn(64, 16)]


def test_an_activation_is_written_over_the_product_it_reads_last():
    """The hidden activation takes the storage of the product it is computed from: the peak
    was 2 x 8 KiB (product and activation alive together), now 8 KiB + 2 KiB (the
    activation and the second product)."""
    for target in (LIBRARY_CPU, FRESH_MM_CPU):
        sched = _check(_mlp, _mlp_inputs(), target)
        assert len(_in_place(sched)) == 2, sched.describe()  # tanh over h; exp over the 2nd mm
        hidden = 32 * 64 * 4
        assert sched.peak_bytes() == hidden + 32 * 16 * 4, sched.describe()
        assert sched.live_bytes_bound() == 2 * hidden  # without in-place writes


def test_no_in_place_where_another_element_is_read():
    """tanh(h) + h^T reads h at the transposed element: h's storage is not written over."""

    def f(x, w):
        h = prims.mm(x, w)
        return (prims.add(prims.tanh(h), prims.permute(h, [1, 0])),)

    sched = _check(f, [torch.randn(8, 8), torch.randn(8, 8)], FRESH_MM_CPU)
    assert not _in_place(sched), sched.describe()


def test_no_in_place_where_a_later_kernel_reads_the_buffer():
    def f(x, w):
        h = prims.mm(x, w)
        a = prims.tanh(h)
        return (prims.mm(a, w), prims.mm(h, w))

    sched = _check(f, [torch.randn(8, 8), torch.randn(8, 8)], FRESH_MM_CPU)
    assert "buf1" not in _in_place(sched).values(), sched.describe()


def test_a_normalization_is_written_over_the_rows_it_reduced():
    """A row sum reads each row before the pass writing it: h - sum(h) written over h."""

    def f(x, w):
        h = prims.mm(x, w)
        total = prims.broadcast_in_dim(prims.sum(h, [1]), [16, 32], [0])
        return (prims.exp(prims.mm(prims.sub(h, total), prims.permute(w, [1, 0]))),)

    torch.manual_seed(0)
    sched = _check(f, [torch.randn(16, 8), torch.randn(8, 32)], FRESH_MM_CPU)
    assert len(_in_place(sched)) == 2, sched.describe()


def test_a_graph_output_is_never_written_over_nor_written_in_place():
    def f(x, w):
        h = prims.mm(x, w)
        return (h, prims.tanh(h))

    sched = _check(f, [torch.randn(8, 8), torch.randn(8, 8)], FRESH_MM_CPU)
    assert not _in_place(sched), sched.describe()


def test_a_dead_library_result_is_handed_on():
    """exp(h1) cannot be written in place (the next product reads it after), but h1 is dead
    after it: a later buffer of h1's size takes h1's storage (a library result is the plan's
    once dead)."""

    def f(x, w):
        h1 = prims.mm(x, w)
        h2 = prims.mm(prims.exp(h1), w)
        return (prims.sum(prims.mul(h2, h2), [1]),)

    sched = _check(f, [torch.randn(8, 8), torch.randn(8, 8)], FRESH_MM_CPU)
    donors = {a.reuses for a in sched.allocations.values() if a.reuses is not None}
    assert "buf0" in donors, sched.describe()


def test_the_inputs_of_the_interpreter_are_untouched():
    inputs = _mlp_inputs()
    copies = [t.clone() for t in inputs]
    check_against_eager(_mlp, *inputs, atol=1e-4, rtol=1e-4)
    for t, c in zip(inputs, copies, strict=True):
        assert torch.equal(t, c)


def test_a_value_kept_inside_its_kernel_does_not_take_the_storage_it_reads():
    """A batch norm + ReLU6 after a convolution: a costly value read twice gets a buffer of
    its own, but its kernel keeps it in registers (no storage). The kernel's stored result
    is the one written over the product, not the register value (that left a 300 MB bf16
    map of MobileNetV2 beside a fresh copy of it)."""

    def f(x, w):
        h = prims.mm(x, w)
        a = prims.exp(prims.tanh(prims.exp(prims.tanh(prims.exp(prims.sin(h))))))
        b = prims.add(prims.mul(a, a), prims.sin(a))
        return (prims.exp(prims.mm(b, prims.permute(w, [1, 0]))),)

    torch.manual_seed(0)
    sched = _check(f, [torch.randn(16, 8) * 0.1, torch.randn(8, 32) * 0.1], FRESH_MM_CPU)
    group = next(g for g in sched if not g.is_extern and len(g.nodes) == 2)
    (internal,) = group.internal
    written = {n.buffer.name for n in group.nodes} - {internal}
    in_place = _in_place(sched)
    assert internal not in in_place and written & set(in_place), sched.describe()


def test_a_row_kept_inside_its_reduction_does_not_take_the_storage_it_reads():
    """A softmax over attention scores plus a costly bias: the biased scores are read by the
    row's maximum and its exponentials, a full-row buffer of the reduction's kernel, which a
    persistent reduction keeps in registers. The softmax's result, not that row, is written
    over the product (SE-BoTNet held two [256, 1024, 1024] score maps at once)."""

    def f(x, w):
        h = prims.mm(x, w)
        s = prims.add(h, prims.exp(prims.tanh(prims.exp(prims.tanh(prims.sin(h))))))
        m = prims.broadcast_in_dim(prims.amax(s, [1]), [16, 32], [0])
        e = prims.exp(prims.sub(s, m))
        p = prims.div(e, prims.broadcast_in_dim(prims.sum(e, [1]), [16, 32], [0]))
        return (prims.mm(p, prims.permute(w, [1, 0])),)

    torch.manual_seed(0)
    sched = _check(f, [torch.randn(16, 8) * 0.1, torch.randn(8, 32) * 0.1], FRESH_MM_CPU)
    group = next(g for g in sched if not g.is_extern and g.internal)
    full = {n.buffer.name for n in group.nodes if n.placement == "full"}
    in_place = _in_place(sched)
    assert full & group.internal and not full & group.internal & set(in_place)
    assert (full - group.internal) & set(in_place), sched.describe()


def test_released_inputs_are_dropped_after_their_last_use_never_handed_on():
    """A caller that hands the inputs over (a backward's saved activations): each input is
    freed after the group that reads it last; its storage is not given to a later buffer
    (the caller may hold it still), and inputs kept by the outputs stay."""
    inputs = _mlp_inputs()
    kept = schedule(lower(prim_graph(_mlp, *inputs), list(inputs), target=LIBRARY_CPU))
    released = schedule(
        lower(prim_graph(_mlp, *inputs), list(inputs), target=LIBRARY_CPU), release_inputs=True
    )
    assert released.releases_inputs and not kept.releases_inputs
    x, w1, b1, w2 = released.graph_inputs
    freed = {name: group for group, names in released.frees.items() for name in names}
    assert not {x, w1, b1, w2} & {n for names in kept.frees.values() for n in names}
    order = [g.name for g in released]
    for name in (x, w1, b1, w2):
        last = max(k for k, g in enumerate(released) if name in g.reads)
        assert freed[name] == order[last], released.describe()
    assert not {a.reuses for a in released.allocations.values()} & {x, w1, b1, w2}
    got = run_scheduled(released, list(inputs))
    torch.testing.assert_close(got[0], _mlp(*inputs)[0], atol=1e-4, rtol=1e-4)

    # an input that is also an output is never dropped
    def passthrough(a, b):
        return (prims.exp(a), b)

    sched = schedule(lower(prim_graph(passthrough, *inputs[:2]), inputs[:2], target=LIBRARY_CPU),
                     release_inputs=True)  # fmt: skip
    a, b = sched.graph_inputs
    dropped = {n for names in sched.frees.values() for n in names}
    assert a in dropped and b not in dropped
