"""Fusion, DCE and buffer reuse, each checked against eager through the interpreter."""

import logging

import torch

from ember_inductor_ir import PrinterHandler
from ember_primops import prims


def test_chain_of_ten_pointwise_ops_is_one_kernel(check):
    def f(a, b):
        x = prims.add(a, b)
        for op in (
            prims.sin,
            prims.exp,
            prims.neg,
            prims.abs,
            prims.sqrt,
            prims.cos,
            prims.tanh,
            prims.sigmoid,
        ):
            x = op(x)
        return (prims.mul(x, b),)

    _lowering, sched = check(f, torch.randn(8, 16), torch.randn(8, 16))
    assert len(sched) == 1


def _softmax(a):
    m = prims.broadcast_in_dim(prims.amax(a, [1]), [8, 32], [0])
    e = prims.exp(prims.sub(a, m))
    s = prims.broadcast_in_dim(prims.sum(e, [1]), [8, 32], [0])
    return (prims.div(e, s),)


def test_softmax_is_one_kernel(check):
    _, sched = check(_softmax, torch.randn(8, 32))
    assert len(sched) == 1
    group = sched[0]
    # exp(a - max) is read by the sum and by the division: computed once, kept in the group
    assert [n.placement for n in group.nodes] == ["reduction", "full", "reduction", "full"]
    assert group.internal == {n.buffer.name for n in group.nodes[:3]}
    printed = []
    for node in group.nodes:
        printer = PrinterHandler()
        node.run(printer)
        printed.append("\n".join(printer.lines))
    assert sum(text.count(" exp(") for text in printed) == 1, printed


def test_reduction_then_pointwise_epilogue(check):
    def f(a):
        vm = prims.var_mean(a, [1], 1.0)
        return (prims.rsqrt(prims.add(vm[0], vm[1])),)

    # positive rows: var + mean stays away from zero, where rsqrt would turn one rounding
    # step of the sums into a difference beyond the tolerance (a randn row did, once in CI)
    _, sched = check(f, torch.rand(6, 10) + 0.5)
    assert len(sched) == 1
    assert sched[0].nodes[-1].placement == "outer"


def test_realized_pointwise_fuses_into_its_reductions(check):
    def f(a):
        heavy = a
        for _ in range(6):
            heavy = prims.sin(prims.mul(prims.exp(heavy), heavy))  # too big to inline twice
        return (prims.sum(heavy, [1]), prims.amax(heavy, [1]))

    lowering, sched = check(f, torch.randn(4, 12), atol=1e-4, rtol=1e-4)
    assert len(lowering.operations) >= 3  # the shared pointwise was realized, then fused
    assert len(sched) == 1


def test_horizontal_fusion_of_independent_kernels_reading_the_same_input(check, caplog):
    with caplog.at_level(logging.INFO, logger="ember.fusion"):
        _, sched = check(lambda a: (prims.sin(a), prims.cos(a)), torch.randn(5, 7))
    assert len(sched) == 1
    assert any("horizontal" in r.getMessage() for r in caplog.records)


def test_refused_fusion_is_logged_with_a_reason(check, caplog):
    with caplog.at_level(logging.INFO, logger="ember.fusion"):
        _, sched = check(lambda a: (prims.sum(a, [0]), prims.sum(a, [1])), torch.randn(10, 12))
    assert len(sched) == 2
    assert any(
        "no fusion" in r.getMessage() and "kernel iterates" in r.getMessage()
        for r in caplog.records
    )


def test_transposed_read_of_a_reduction_input_is_not_fused_across_rows(check):
    def f(a):
        e = prims.exp(a)
        for _ in range(8):
            e = prims.mul(prims.sin(e), e)
        t = prims.permute(e, [1, 0])
        return (prims.sum(t, [1]), prims.sum(e, [1]))

    check(f, torch.randn(12, 12), atol=1e-4, rtol=1e-4)


def test_dead_code_is_eliminated(check):
    def f(a):
        unused = prims.sum(prims.exp(a), [0])  # noqa: F841 (dead on purpose)
        return (prims.neg(a),)

    lowering, sched = check(f, torch.randn(10, 3))
    assert len(lowering.operations) == 2
    assert len(sched) == 1


def test_buffer_reuse_between_kernels(check):
    a, w = torch.randn(4, 4), torch.randn(4, 4)

    def f(x, m):
        h1 = prims.mm(prims.exp(x), m)  # exp(x) is dead after the first mm
        h2 = prims.mm(prims.sin(h1), m)  # sin(h1) can take exp(x)'s storage
        return (prims.mm(prims.cos(h2), m),)

    _, sched = check(f, a, w, atol=1e-4, rtol=1e-4)
    reused = [x for x in sched.allocations.values() if x.reuses is not None]
    assert reused, sched.describe()


def test_no_reuse_of_a_storage_a_fallback_view_still_reads(check):
    # prims.diagonal has no lowering: its fallback kernel returns a view of exp(x)'s buffer,
    # so that storage stays live until the view's last reader (sin(y) may not take it).
    def f(x, y):
        u = prims.diagonal(prims.exp(x), 0, 0, 1)
        v = prims.diagonal(prims.sin(y), 0, 0, 1)
        return (prims.add(u, v),)

    lowering, sched = check(f, torch.randn(3, 3), torch.randn(3, 3))
    assert lowering.fallback_counts["diagonal"] == 2
    assert not [a for a in sched.allocations.values() if a.reuses is not None], sched.describe()


def test_a_norm_written_as_a_channels_last_map_fuses_with_its_statistics(check):
    # XCiT's tokens [B, H*W, C] normalized and handed on as the [B, C, H, W] map its
    # convolution reads, channels-last: the rows the kernel reduces are runs of channels in
    # the map's memory, so the map is written by the kernel that computes the statistics
    def f(x):
        mean = prims.broadcast_in_dim(prims.sum(x, [2]), [2, 6, 12], [0, 1])
        centered = prims.sub(x, mean)
        return (prims.permute(prims.reshape(centered, [2, 2, 3, 12]), [0, 3, 1, 2]),)

    _, sched = check(f, torch.randn(2, 6, 12))
    assert len(sched) == 1
    assert [n.placement for n in sched[0].nodes] == ["reduction", "full"]


def test_a_large_value_is_not_moved_back_over_many_library_calls(check):
    """A value read only after six matmuls, from a group made before them: computed there it
    would be held across all six (a backward's recomputed norm output, read by its layer's
    weight gradient); it stays after them, beside its reader."""

    def f(a, w):
        h = prims.sin(a)
        x = h  # the first matmul reads it: its group runs before them all
        for _ in range(6):
            x = prims.mm(x, w)
        return (h, x, prims.mul(prims.cos(h), h))  # (the product: written after the matmuls)

    a, w = torch.randn(512, 512), torch.randn(512, 512) / 23  # 1 MiB each: over the floor
    _, sched = check(f, a, w, atol=1e-3, rtol=1e-3)
    order = [g for g in sched if g.extern is None or "mm" in g.extern.kernel_name]
    last_mm = max(k for k, g in enumerate(order) if g.extern is not None)
    (late,) = [k for k, g in enumerate(order) if g.extern is None
                    and any("mul" in str(n.buffer.origins) for n in g.nodes)]  # fmt: skip
    assert late > last_mm, [g.name for g in order]


def test_a_narrowing_copy_joins_its_source_however_far_back(check):
    """A smaller copy of a value made before six matmuls, read after them and by nothing
    else (a max pool's int64 offsets narrowed to the int8 saved for the backward, made at
    the forward's end): joined to the source's group it is held across the matmuls, but
    the wider source is not (it is not even stored)."""

    def f(a, w):
        t = prims.sum(a, [2])  # the matmuls read it
        g = prims.amax(a, [2])  # the same group: read only by the copy
        x = t
        for _ in range(6):
            x = prims.mm(x, w)
        return (x, prims.convert_element_type(g, torch.bfloat16))

    a, w = torch.randn(1024, 512, 16), torch.randn(512, 512) / 23  # the copy: 1 MiB
    _, sched = check(f, a, w, atol=1e-2, rtol=1e-2)
    (group,) = [g for g in sched if g.extern is None]
    kinds = sorted(n.placement for n in group.nodes)
    assert kinds == ["outer", "reduction", "reduction"], [g.name for g in sched]
    (amax,) = [n.buffer.name for n in group.nodes if "amax" in str(n.buffer.origins)]
    assert amax in group.internal and amax not in group.writes
