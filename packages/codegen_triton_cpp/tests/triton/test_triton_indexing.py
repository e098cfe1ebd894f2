"""Views, masked shape ops, gathers, random numbers and extern kernels through the Triton
target (interpreter)."""

import torch

from ember_primops import prims


def test_view_chain(check):
    def f(a):
        v = prims.permute(a, [1, 0])
        v = prims.slice(v, [1, 0], [5, 4], [2, 1])
        v = prims.expand_dims(v, [0])
        v = prims.broadcast_in_dim(prims.squeeze(v, [0]), [3, 2, 4], [1, 2])
        v = prims.reshape(v, [6, 4])
        return (prims.add(v, v),)

    check(f, torch.randn(4, 6))


def test_reshape_split_collapse_as_strided_rev(check):
    def f(a):
        flat = prims.reshape(prims.exp(a), [24])
        s = prims.split_dim(a, 1, 2)
        c = prims.collapse_view(s, 0, 2)
        st = prims.as_strided(a, [3, 3], [6, 2], 1)
        return (
            prims.reshape(prims.add(flat, flat), [4, 6]),
            flat,
            prims.neg(c),
            prims.neg(st),
            prims.rev(prims.sin(a), [0]),
        )

    check(f, torch.randn(4, 6))


def test_input_with_storage_offset_and_non_contiguous_input(check):
    base = torch.randn(10, 8)
    x = base[2:6, 1:7]
    compiled = check(lambda a: (prims.mul(a, a), prims.permute(a, [1, 0])), x)
    other = torch.randn(20, 8)[5:9, 0:6]
    torch.testing.assert_close(compiled([other])[0], other * other)
    check(lambda a: (prims.cos(a),), torch.randn(6, 4).t())


def test_broadcasting(check):
    a, b, c = torch.randn(5, 1, 3), torch.randn(4, 1), torch.randn(3)

    def f(x, y, z):
        shape = [5, 4, 3]
        xb = prims.broadcast_in_dim(prims.squeeze(x, [1]), shape, [0, 2])
        yb = prims.broadcast_in_dim(prims.squeeze(y, [1]), shape, [1])
        zb = prims.broadcast_in_dim(z, shape, [2])
        return (prims.add(prims.mul(xb, yb), zb),)

    check(f, a, b, c)


def test_cat_pad_slice_scatter(check):
    a, b, c = torch.randn(2, 3), torch.randn(4, 3), torch.randn(1, 3)

    def f(x, y, z):
        return (
            prims.cat([x, y, z], 0),
            prims.cat([x, x], 1),
            prims.pad(x, 1.5, [1, -1], [2, 1], [0, 1]),
            prims.slice_scatter(y, x, 0, 0, 4, 2),
        )

    check(f, a, b, c)


def test_a_cat_read_at_a_one_step_loop_compares_a_constant_position(check):
    # CrossViT's class token: a norm of cat([cls, patches], 1)[:, 0:1]; the kernel's loops
    # are [B, 1] and the cat's position along dim 1 is a loop variable of one step, printed
    # as the literal 0 (which has no .to() in Triton)
    def fn(cls, patches, pos):
        x = prims.add(prims.cat([cls, patches], 1), pos)
        first = prims.slice(x, [0, 0, 0], [8, 1, 16])
        mean = prims.broadcast_in_dim(prims.sum(first, [2]), [8, 1, 16], [0, 1])
        return (prims.mul(prims.sub(first, mean), prims.erf(first)),)

    compiled = check(fn, torch.randn(8, 1, 16), torch.randn(8, 5, 16), torch.randn(8, 6, 16))
    assert "(0).to(" not in compiled.triton_source


def test_gather_index_select_index(check):
    a = torch.randn(5, 6)
    idx = torch.randint(0, 5, (3, 6))
    sel = torch.tensor([4, 0, 2])
    rows, cols = torch.tensor([0, -1, 1]), torch.tensor([[3], [0]])

    def f(x, i, s, r, c):
        return (
            prims.gather(x, 0, i),
            prims.index_select(x, 1, s),
            prims.index(x, [r]),
            prims.index(x, [None, s]),
            prims.index(x, [c, r]),
        )

    check(f, a, idx, sel, rows, cols)


def test_random_bits_and_uniform_are_bit_exact(check):
    seed = torch.tensor(1234, dtype=torch.int64)

    def f(s):
        cpu = torch.device("cpu")
        return (
            prims.uniform([5, 7], s, 3, dtype=torch.float32, device=cpu),
            prims.uniform([4], s, 0, dtype=torch.float16, device=cpu),
            prims.uniform([4000], s, 9, dtype=torch.bfloat16, device=cpu),
            prims.uniform([6], s, 2, dtype=torch.float64, device=cpu),
            prims.random_bits([2, 5], s, 2**32 + 7, device=cpu),
        )

    check(f, seed, atol=0, rtol=0)


def test_normal_matches_the_reference(check):
    seed = torch.tensor(-99, dtype=torch.int64)

    def f(s):
        cpu = torch.device("cpu")
        return (prims.normal([3, 3], s, 11, dtype=torch.float32, device=cpu),)

    check(f, seed)


def test_mm_bias_relu_calls_the_extern_and_fuses_the_epilogue(check):
    from canonical_graphs import GOLDEN

    fn, inputs = GOLDEN["mm_bias_relu"]
    compiled = check(fn, *inputs(), atol=1e-5, rtol=1e-5)
    assert compiled.kernel_count == 1
    assert "# mm" in compiled.wrapper_source


def test_prim_without_lowering_is_a_counted_fallback(check):
    x = torch.rand(3, 4) + 0.5
    compiled = check(lambda a: (prims.add(prims.digamma(a), a),), x)
    assert compiled.fallback_counts == {"digamma": 1}


def test_index_values_compute_in_int32_where_every_step_fits(check):
    # a concatenation selects its input by `channel % C`: int32 arithmetic (int64 division
    # is tens of instructions per element), converted to int64 as the value's type
    def f(a, b):
        return (prims.cat([prims.exp(a), prims.neg(b)], 1),)

    compiled = check(f, torch.randn(64, 40), torch.randn(64, 24))
    code = compiled.kernels[0].code
    assert "to(tl.int64) %" not in code and "% 64" in code


def test_int32_exactness_bounds_every_step():
    import sympy

    from ember_codegen.triton.kernel import XINDEX, _int32_exact
    from ember_inductor_ir.indexing import ModularIndexing

    ranges = {XINDEX: sympy.Integer(45_158_400)}
    assert _int32_exact(ModularIndexing(XINDEX, 1, 288) - 224, ranges)
    assert not _int32_exact(XINDEX * 100, ranges)  # the value leaves int32
    assert not _int32_exact(XINDEX + sympy.Symbol("s0"), ranges)  # an unbounded size


def test_masked_loads_keep_contiguous_offsets_on_the_gpu(monkeypatch):
    # A GPU never dereferences a masked-off lane: the concatenation's loads take their plain
    # offsets (contiguous: 16-byte loads). The interpreter reads every lane's address, so
    # there masked-off lanes point at element 0.
    from prim_helpers import prim_graph

    from ember_codegen.triton import index_printer
    from ember_codegen.triton.kernel import build_group
    from ember_inductor_ir import lower, schedule

    def f(a, b):
        return (prims.cat([prims.exp(a), prims.neg(b)], 1),)

    inputs = [torch.randn(64, 40), torch.randn(64, 24)]
    sched = schedule(lower(prim_graph(f, *inputs), inputs, target="triton"))
    (group,) = [g for g in sched if not g.is_extern]
    interpreted = build_group(group, sched).kernels[0].code
    monkeypatch.setattr(index_printer, "interpreter_source", lambda: False)
    gpu = build_group(group, sched).kernels[0].code
    loads = [line for line in gpu.splitlines() if "tl.load(" in line]
    assert len(loads) == 2 and not any("tl.where(" in line for line in loads)
    assert sum("tl.load(ptr_arg0 + tl.where(" in line for line in interpreted.splitlines()) == 1


def test_a_padded_reads_digits_of_a_negative_position_stay_masked(check, monkeypatch):
    """A padded read through a reshape of a transposed input loads at digits of ``i - 3``
    (``(i - 3) // 4`` and ``(i - 3) % 4``), non-negative only where the pad's mask holds:
    Triton's truncating `//` and `%` give negative offsets elsewhere. The load must keep that
    mask; proven in bounds by the digits' assumed sign, it read before the buffer's start on
    the GPU (Swin's shifted windows: an illegal memory access)."""
    from prim_helpers import prim_graph

    from ember_codegen.triton import index_printer
    from ember_codegen.triton.kernel import build_group
    from ember_inductor_ir import lower, schedule

    def f(a):
        flat = prims.reshape(prims.permute(a, [1, 0]), [8])  # digits of the position
        padded = prims.pad(flat, 0.0, [3], [0], [0])
        return (prims.add(padded, padded),)

    a = torch.randn(4, 2)
    check(f, a)
    sched = schedule(lower(prim_graph(f, a), [a], target="triton"))
    monkeypatch.setattr(index_printer, "interpreter_source", lambda: False)  # the GPU's form
    (group,) = [g for g in sched if not g.is_extern]
    (kernel,) = build_group(group, sched).kernels
    loads = [line for line in kernel.code.splitlines() if "tl.load(" in line]
    assert loads and all("xmask & " in line for line in loads), loads


def test_a_concatenations_masks_compare_in_int32(check):
    """A cat of static extent picks its input by int32 compares of the channel position:
    int64 ones took two instructions each (ESE-VoVNet's recomputed concatenations ran at a
    third of the H200's memory rate)."""

    def f(a, b, c):
        return (prims.cat([prims.exp(a), b, prims.abs(c)], 1),)

    inputs = (torch.randn(2, 3, 4, 4), torch.randn(2, 5, 4, 4), torch.randn(2, 2, 4, 4))
    compiled = check(f, *inputs)
    assert "tl.int64" not in compiled.triton_source.split("def k0_")[1]
