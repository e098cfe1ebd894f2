"""cat, pad, scatters, creation, random, indexing, extern kernels and fallbacks vs eager."""

import torch

from ember_inductor_ir.extern import ExternKernel
from ember_primops import prims


def test_cat(check):
    a, b, c = torch.randn(2, 3), torch.randn(4, 3), torch.randn(1, 3)
    check(lambda x, y, z: (prims.cat([x, y, z], 0), prims.cat([x, x], 1)), a, b, c)


def test_pad_with_crop_and_interior(check):
    x = torch.randn(3, 4)
    check(lambda a: (prims.pad(a, 1.5, [1, -1], [2, 1], [0, 1]),), x)


def test_slice_scatter(check):
    a, src = torch.randn(6, 4), torch.randn(2, 4)
    check(lambda x, s: (prims.slice_scatter(x, s, 0, 1, 5, 2),), a, src)


def test_creation(check):
    def f(a):
        full = prims.full([2, 3], 7.0, dtype=torch.float32, device=torch.device("cpu"))
        ramp = prims.iota(3, start=2, step=3, dtype=torch.float32, device=torch.device("cpu"))
        s = prims.scalar_tensor(0.5, dtype=torch.float32, device=torch.device("cpu"))
        return (prims.add(prims.add(a, full), prims.mul(ramp, s)),)

    check(f, torch.randn(2, 3))


def test_random_is_bit_exact(check):
    seed = torch.tensor(1234, dtype=torch.int64)

    def f(s):
        cpu = torch.device("cpu")
        return (
            prims.uniform([5, 7], s, 3, dtype=torch.float32, device=cpu),
            prims.uniform([4], s, 0, dtype=torch.float16, device=cpu),
            prims.normal([3, 3], s, 11, dtype=torch.float32, device=cpu),
            prims.normal([6], s, 2, dtype=torch.float64, device=cpu),
        )

    check(f, seed, atol=0, rtol=0)


def test_gather_index_select_index(check):
    a = torch.randn(5, 6)
    idx = torch.randint(0, 5, (3, 6))
    sel = torch.tensor([4, 0, 2])
    rows, cols = torch.tensor([0, 4, 1]), torch.tensor([[3], [0]])

    def f(x, i, s, r, c):
        return (
            prims.gather(x, 0, i),
            prims.index_select(x, 1, s),
            prims.index(x, [r]),
            prims.index(x, [None, s]),
            prims.index(x, [c, r]),
        )

    check(f, a, idx, sel, rows, cols)


def test_mm_is_an_extern_kernel_and_takes_views(check):
    a, w = torch.randn(4, 5), torch.randn(3, 5)

    def f(x, y):
        h = prims.mm(x, prims.permute(y, [1, 0]))
        return (prims.mm(prims.exp(h), y),)

    lowering, _sched = check(f, a, w, atol=1e-4, rtol=1e-4)
    externs = [op for op in lowering.operations if isinstance(op, ExternKernel)]
    assert [e.kernel_name for e in externs] == ["mm", "mm"]
    assert externs[0].args[1].view is not None  # the transposed weight is passed as a view
    assert lowering.extern_counts["mm"] == 2 and not lowering.fallback_counts


def test_prim_without_lowering_is_a_counted_fallback(check):
    x = torch.rand(3, 4) + 0.5
    lowering, _ = check(lambda a: (prims.add(prims.digamma(a), a),), x)
    assert lowering.fallback_counts == {"digamma": 1}
    assert any(isinstance(op, ExternKernel) and op.fallback for op in lowering.operations)


def test_complex_values_stay_out_of_loop_kernels(check):
    # fft.rfft(x, norm="ortho") scales a complex result: no code generator emits complex
    # loops, so the multiply runs as a counted fallback kernel.
    def f(x):
        c = prims.fft_r2c(x, [0], True)
        return (prims.mul(c, c),)

    lowering, _ = check(f, torch.randn(8))
    assert lowering.fallback_counts["mul"] == 1
    assert not [
        b for b in lowering.buffers.values() if b.get_dtype().is_complex and hasattr(b, "data")
    ]


def test_a_cat_of_many_inputs_is_a_library_copy(check):
    from conftest import LIBRARY_CPU  # the check fixture's target
    from ember_inductor_ir.extern import ExternKernel

    n = LIBRARY_CPU.cat_extern_inputs

    def fn(x):  # a stack of the steps of an unrolled loop, each computed
        return (prims.cat([prims.mul(x, prims.sin(x)) for _ in range(n)], 0),)

    lowering, _ = check(fn, torch.randn(3, 5))
    (cat,) = [op for op in lowering.operations if isinstance(op, ExternKernel)]
    assert cat.kernel_name == "cat" and cat.writes_out and not cat.fallback


def test_a_cat_of_few_inputs_stays_a_loop_body(check):
    from ember_inductor_ir.extern import ExternKernel

    lowering, _ = check(
        lambda x, y: (prims.cat([x, y, x], 1),), torch.randn(3, 2), torch.randn(3, 4)
    )
    assert not [op for op in lowering.operations if isinstance(op, ExternKernel)]


def test_roll_is_one_index_map(check):
    # Swin's shifted windows: a layer norm's output rolled over H and W. One load a point
    # through (i - shift) mod n, where the two cats of slices it was carried the norm four
    # times, each under a mask
    from ember_inductor_ir.handlers.readwrite import ReadWriteHandler
    from ember_inductor_ir.indexing import index_vars
    from ember_inductor_ir.nodes import ComputedBuffer

    def fn(a):
        return (prims.roll(prims.sin(a), [5, 2], [1, 2]), prims.roll(a, [3], [0]))

    lowering, _ = check(fn, torch.randn(3, 8, 7, 4))
    for buffer in (b for b in lowering.buffers.values() if isinstance(b, ComputedBuffer)):
        reads = ReadWriteHandler()
        buffer.data.inner_fn(reads, index_vars("i", len(buffer.data.ranges)))
        assert len(reads.reads) == 1, reads.reads
