"""What a call of the generated wrapper costs: views made once, results adopted inline,
operators called without OpOverload's Python frame, and all of it still matching eager."""

import gc
import weakref

import pytest
import torch
from prim_helpers import prim_graph

from ember_codegen import CodegenError, compile_graph
from ember_codegen.wrapper.held_layouts import preferred_layouts
from ember_inductor_ir import lower, schedule
from ember_primops import prims


def _reshaped_mm(x, w):
    a = prims.exp(x)
    return (prims.mm(prims.reshape(a, [8, 8]), w),)


def test_a_buffer_is_allocated_in_the_view_its_extern_takes(check):
    sched, compiled = check(
        _reshaped_mm, torch.randn(2, 4, 8), torch.randn(8, 8), atol=1e-4, rtol=1e-4
    )
    preferred = preferred_layouts(sched)
    (exp_buffer,) = [n for n in preferred if len(sched.layout(n).size) == 3]
    assert preferred[exp_buffer][0] == (8, 8)
    assert f"{exp_buffer} = _empty_strided((8, 8), (8, 1)" in compiled.wrapper_source
    assert "_as_strided" not in compiled.wrapper_source  # the mm reads the buffer as is


def test_an_output_in_the_buffer_layout_keeps_it_on_a_tie(check):
    def f(x, w):
        a = prims.exp(x)
        return (a, prims.mm(prims.reshape(a, [8, 8]), w))

    _, compiled = check(f, torch.randn(2, 4, 8), torch.randn(8, 8), atol=1e-4, rtol=1e-4)
    assert "_empty_strided((2, 4, 8), (32, 8, 1)" in compiled.wrapper_source
    assert "_as_strided(" in compiled.wrapper_source  # the mm's operand, made at its call


def test_a_taken_over_storage_already_held_in_the_wanted_view_is_aliased(check):
    def f(x, w):
        a = prims.exp(x)  # (2, 4, 8), held (8, 8) for the first mm, dead after it
        b = prims.sin(prims.reshape(prims.mm(prims.reshape(a, [8, 8]), w), [2, 4, 8]))
        return (prims.mm(prims.reshape(b, [8, 8]), w),)  # b written over the first product

    sched, compiled = check(f, torch.randn(2, 4, 8), torch.randn(8, 8), atol=1e-4, rtol=1e-4)
    reused = {a.buffer: a.reuses for a in sched.allocations.values() if a.reuses}
    assert reused
    for buffer, donor in reused.items():
        assert f"{buffer} = {donor}\n" in compiled.wrapper_source  # no view of the (8, 8) one
    assert "_as_strided" not in compiled.wrapper_source


def test_an_extern_result_in_another_layout_is_copied_into_the_buffer_layout(compile_prims):
    x, w = torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3)

    def conv(a, b):
        return (prims.exp(prims.convolution(a, b, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)),)

    _, compiled = compile_prims(conv, x, w)
    namespace = compiled._call.__globals__
    original = namespace["_convolution"]  # torch's binding (library_calls.BINDING_CALLS)
    assert "_convolution(" in compiled.wrapper_source

    def channels_last_result(*args):  # a convolution whose result has other strides
        return original(*args).contiguous(memory_format=torch.channels_last)

    namespace["_convolution"] = channels_last_result
    try:
        (out,) = compiled([x, w])
    finally:
        namespace["_convolution"] = original
    torch.testing.assert_close(out, torch.exp(torch.nn.functional.conv2d(x, w, padding=1)))


def test_a_matmul_writes_into_its_planned_buffer(check):
    # mm.out into storage the memory plan hands on: the second product takes the storage of
    # exp(x), dead after the first (each exp after a product writes over it). Small inputs:
    # exp of a product of unscaled randn reaches 1e25, where a summation order's last bit
    # already exceeds any fixed tolerance
    a, b = 0.3 * torch.randn(5, 7), 0.3 * torch.randn(7, 7)
    _, compiled = check(
        lambda x, y: (prims.exp(prims.mm(prims.exp(prims.mm(prims.exp(x), y)), y)),),
        a,
        b,
        atol=1e-5,
        rtol=1e-5,
    )
    source = compiled.wrapper_source
    assert source.count("out=buf") == 2 and "_r = " not in source
    assert "buf2 = buf1\n" in source and "buf3 = buf0; del buf0" in source


def test_a_fallback_result_is_checked_in_full(check):
    z = torch.randn(3, dtype=torch.complex64)
    _, compiled = check(lambda a: (prims.neg(a),), z)
    assert ".dtype != " in compiled.wrapper_source.split("# k0_")[1]


def test_a_contiguous_input_is_guarded_by_is_contiguous(check):
    _, compiled = check(lambda a: (prims.exp(a),), torch.randn(4, 1, 6), atol=1e-6, rtol=1e-6)
    assert "arg0.is_contiguous()" in compiled.wrapper_source
    x = torch.randn(6, 4).t().reshape(4, 1, 6) * 1  # contiguous again after the mul
    same = torch.randn(4, 2, 6)[:, :1, :]  # contiguous but for the size-1 dim's stride
    transposed = torch.randn(6, 1, 4).permute(2, 1, 0)  # other strides: copied first
    for a in (x, same, transposed):
        torch.testing.assert_close(compiled([a])[0], torch.exp(a), atol=1e-6, rtol=1e-6)
    with pytest.raises(CodegenError, match="compiled for"):
        compiled([torch.randn(4, 1, 6, dtype=torch.float64)])
    with pytest.raises(CodegenError, match="compiled for"):
        compiled([torch.randn(4, 2, 6)])


def test_trusted_inputs_have_only_their_strides_checked(builder):
    x = torch.randn(6, 4).t()  # a non-contiguous example
    gm = prim_graph(lambda a: (prims.exp(a),), x)
    sched = schedule(lower(gm, [x]))
    trusted = compile_graph(sched, builder=builder, trusted_inputs=True)
    assert ".shape" not in trusted.wrapper_source and ".dtype" not in trusted.wrapper_source
    torch.testing.assert_close(trusted([x])[0], torch.exp(x), atol=1e-6, rtol=1e-6)
    y = torch.randn(4, 6)  # same kind, other strides (a caller guarding kinds only): relaid
    torch.testing.assert_close(trusted([y])[0], torch.exp(y), atol=1e-6, rtol=1e-6)
    checked = compile_graph(schedule(lower(gm, [x])), builder=builder)
    assert ".shape != (4, 6)" in checked.wrapper_source


def test_prims_run_their_implementation_without_the_meta_check(check):
    a = torch.randn(4, 5)
    index = torch.tensor([[0, 1, 2, 3, 0], [1, 2, 3, 0, 1]])
    src = torch.randn(2, 5)

    def f(x, i, s):
        return (prims.scatter(prims.exp(x), 0, i, s), prims.cumsum(x, 1))

    _, compiled = check(f, a, index, src, atol=1e-6, rtol=1e-6)
    source = compiled.wrapper_source
    assert "_prim_impl[" in source and "# scatter (fallback)" in source
    impls = compiled._call.__globals__["_prim_impl"]
    assert torch.ops.ember_prims.scatter.default in impls  # resolved by the first call
    with pytest.raises(RuntimeError, match="out of bounds"):
        compiled([a, index * 10, src])  # values the meta could not check: aten raises


def test_a_cat_of_many_inputs_copies_into_its_planned_buffer(check):
    def stack(x):
        return (prims.cat([prims.mul(x, prims.sin(x)) for _ in range(9)], 0),)

    _, compiled = check(stack, torch.randn(4, 6), atol=1e-6, rtol=1e-6)
    assert "out=buf" in compiled.wrapper_source  # aten's cat.out after the inputs' kernel


def test_a_dead_buffer_serves_the_next_calls_allocation(check, monkeypatch):
    from ember_codegen.cpp.emit import wrapper
    from ember_codegen.cpp.emit.wrapper import STORAGE_POOL

    monkeypatch.setattr(wrapper, "SMALL_BUFFER_BYTES", 0)  # pool even these 16 KiB
    x = torch.randn(64, 64) / 8
    # sin(a) dies at the product (the exp writes over the product: the graph's output)
    _, compiled = check(lambda a: (prims.exp(prims.mm(prims.sin(a), a)),), x, atol=1e-5, rtol=1e-5)
    STORAGE_POOL.clear()
    compiled([x])  # fills the pool with the call's dead buffers
    held = STORAGE_POOL.held_bytes
    assert held >= 64 * 64 * 4
    compiled([x])  # takes them again and gives them back: nothing new is held
    assert STORAGE_POOL.held_bytes == held


def test_small_buffers_are_allocated_anew_and_large_ones_pooled(check):
    # the pool's Python take and give cost more than torch.empty_strided where the C
    # allocator serves the buffer from memory it has mapped already
    small, large = torch.randn(8, 8), torch.randn(256, 128)
    for x, pooled in ((small, False), (large, True)):
        _, compiled = check(lambda a: (prims.exp(prims.sin(a)),), x, atol=1e-5, rtol=1e-5)
        assert ("_pool.take(" in compiled.wrapper_source) is pooled
        assert ("_empty_strided(" in compiled.wrapper_source) is not pooled


def test_a_transposed_input_is_read_through_t(check):
    # an nn.Linear weight read as mm's second operand: one C call, no as_strided per call
    _, compiled = check(
        lambda x, w: (prims.mm(x, prims.permute(w, [1, 0])),),
        torch.randn(3, 16),
        torch.randn(4, 16),
        atol=1e-5,
        rtol=1e-5,
    )
    assert "arg1.t()" in compiled.wrapper_source
    assert "_as_strided" not in compiled.wrapper_source


def test_the_storage_pool_is_bounded():
    from ember_codegen.cpp.emit.storage_pool import StoragePool

    pool = StoragePool(limit_bytes=1000)
    pool.give(torch.empty(100), torch.float32, 100)  # 400 bytes
    pool.give(torch.empty(100), torch.float32, 100)
    assert pool.held_bytes == 800
    pool.give(torch.empty(100), torch.float32, 100)  # over the limit: emptied, then kept
    assert pool.held_bytes == 400
    pool.give(torch.empty(1000), torch.float32, 1000)  # larger than the budget: not kept
    assert pool.held_bytes == 400
    taken = pool.take((10, 10), (10, 1), 0, torch.float32, 96)
    assert taken.shape == (10, 10) and pool.held_bytes == 0
    assert StoragePool(limit_bytes=0).take((2,), (1,), 0, torch.float32, 2).shape == (2,)


def test_the_storage_pool_serves_nearby_sizes_from_one_size_class():
    # a symbolic graph called at lengths 41, 42, 43...: a call's buffers serve the next
    # lengths of their size class (classes are 1/8 apart: 41..44 rows of 64 share one)
    from ember_codegen.cpp.emit.storage_pool import StoragePool, size_class

    pool = StoragePool(limit_bytes=1 << 20)
    first = pool.take((41, 64), (64, 1), 0, torch.float32, 41 * 64)
    assert first.untyped_storage().nbytes() == 4 * size_class(41 * 64) >= 4 * 41 * 64
    pool.give(first, torch.float32, 41 * 64)
    second = pool.take((43, 64), (64, 1), 0, torch.float32, 43 * 64)
    assert second.untyped_storage().data_ptr() == first.untyped_storage().data_ptr()
    assert pool.held_bytes == 0
    # a storage too small for a request's class is never handed out for it
    pool.give(torch.empty(100), torch.float32, 100)  # serves class 96, not 104
    assert pool.take((100,), (1,), 0, torch.float32, 100).untyped_storage().nbytes() == 416
    assert all(size_class(n) >= n and size_class(n) * 8 <= n * 9 for n in range(1, 5000))


def test_an_extern_reading_a_buffer_as_is_gets_its_own_layout_when_held_transposed(check):
    # an unrolled recurrent cell's backward: a gate gradient g (4, 20) feeds g @ W once and
    # g.T @ h_t twice, so g is held transposed; the first extern must still get (4, 20)
    def f(x, w, h1, h2):
        g = prims.exp(x)
        gt = prims.permute(g, [1, 0])
        return (prims.mm(g, w), prims.mm(gt, h1), prims.mm(gt, h2))

    inputs = torch.randn(4, 20), torch.randn(20, 5), torch.randn(4, 5), torch.randn(4, 6)
    sched, _ = check(f, *inputs, atol=1e-4, rtol=1e-4)
    preferred = preferred_layouts(sched)
    (g_buffer,) = [n for n in preferred if sched.layout(n).size == [4, 20]]
    assert preferred[g_buffer][0] == (20, 4)  # held in the view two of its externs take


def test_a_trusted_inputs_view_is_kept_until_the_input_changes(builder):
    # a weight read transposed: made on the first call, reused while the same tensor with
    # the same data comes, made again for another tensor or after `.data =`
    x, w = torch.randn(3, 16), torch.randn(4, 16)
    gm = prim_graph(lambda a, b: (prims.mm(a, prims.permute(b, [1, 0])),), x, w)
    compiled = compile_graph(schedule(lower(gm, [x, w])), builder=builder, trusted_inputs=True)
    assert "_views[0]" in compiled.wrapper_source
    for _ in range(2):
        torch.testing.assert_close(compiled([x, w])[0], x @ w.t(), atol=1e-5, rtol=1e-5)
    other = torch.randn(4, 16)
    torch.testing.assert_close(compiled([x, other])[0], x @ other.t(), atol=1e-5, rtol=1e-5)
    w.data = torch.randn(4, 16)  # same tensor object, new storage
    torch.testing.assert_close(compiled([x, w])[0], x @ w.t(), atol=1e-5, rtol=1e-5)
    w.copy_(torch.randn(4, 16))  # same storage, new values: the view reads them
    torch.testing.assert_close(compiled([x, w])[0], x @ w.t(), atol=1e-5, rtol=1e-5)
    relaid = torch.randn(16, 4).t()  # other strides: relaid, a new tensor, a new view
    torch.testing.assert_close(compiled([x, relaid])[0], x @ relaid.t(), atol=1e-5, rtol=1e-5)
    untrusted = compile_graph(schedule(lower(gm, [x, w])), builder=builder)
    assert "_views" not in untrusted.wrapper_source


def test_a_kept_view_does_not_keep_its_input_alive(builder):
    # a saved activation or a gradient read transposed is an input of one call: once the
    # caller drops it, its storage goes (the cached view held it until the next call)
    x = torch.randn(3, 16)
    gm = prim_graph(lambda a, b: (prims.mm(a, prims.permute(b, [1, 0])),), x, torch.randn(4, 16))
    compiled = compile_graph(
        schedule(lower(gm, [x, torch.randn(4, 16)])), builder=builder, trusted_inputs=True
    )
    assert "_views[0]" in compiled.wrapper_source
    for _ in range(3):
        w = torch.randn(4, 16)
        torch.testing.assert_close(compiled([x, w])[0], x @ w.t(), atol=1e-5, rtol=1e-5)
        gone = weakref.ref(w)
        del w
        gc.collect()
        assert gone() is None
    kept = torch.randn(4, 16)  # a live input still reads its view, also after a write
    for _ in range(2):
        kept.add_(1.0)
        torch.testing.assert_close(compiled([x, kept])[0], x @ kept.t(), atol=1e-5, rtol=1e-5)
