"""A pointwise value realized after an earlier reader inlined it (zoo rnn's backward graph)."""

import torch

from ember_primops import prims


def test_reader_realized_before_its_input_is_realized(check):
    # sin(x) is inlined into buf0 = cos(sin(x)) (realized for the first mm); the second mm
    # then realizes sin(x) itself. buf0 must keep computing sin(x) inline rather than load a
    # buffer written after it.
    def fn(x, w):
        a = prims.sin(x)
        b = prims.cos(a)
        return (prims.mm(b, w), prims.mm(a, w))

    lowering, _ = check(fn, torch.randn(4, 5), torch.randn(5, 3))
    assert [e.kernel_name for e in lowering.operations if hasattr(e, "kernel_name")] == [
        "mm",
        "mm",
    ]


def test_view_reader_realized_before_its_base_is_realized(check):
    def fn(x, w, v):
        a = prims.sin(x)
        b = prims.cos(prims.permute(a, [1, 0]))
        return (prims.mm(b, w), prims.mm(a, v))

    check(fn, torch.randn(5, 4), torch.randn(5, 3), torch.randn(4, 3))


def test_a_chain_longer_than_python_can_nest_is_stored_in_pieces():
    # 600 chained multiplies (a loop over a ParameterList): inlined whole, a reader's loader
    # calls nested past the recursion limit; stored every MAX_INLINED_NODES nodes
    from conftest import compile_and_run
    from ember_inductor_ir.graph import MAX_INLINED_NODES

    def chain(x, w):
        for _ in range(600):
            x = prims.mul(x, w)
        return (x,)

    x, w = torch.rand(8) + 0.5, torch.full((8,), 1.001)
    lowering, _, got = compile_and_run(chain, x, w)
    torch.testing.assert_close(got[0], chain(x, w)[0])
    stored = [b for b in lowering.buffers.values() if type(b).__name__ == "ComputedBuffer"]
    assert len(stored) >= 600 // MAX_INLINED_NODES


def _stored_pointwise(lowering) -> int:
    return sum(
        1
        for b in lowering.buffers.values()
        if type(b).__name__ == "ComputedBuffer" and type(b.data).__name__ == "Pointwise"
    )


def _residual_stream(x, a, b, c, d):
    # x + a + b + ..., each running sum read by the next add and by a reduction (a norm's
    # statistics): MLP-Mixer's residual stream, with the blocks' outputs as inputs here
    sums, total = [], x
    for term in (a, b, c, d):
        total = prims.add(total, term)
        sums.append(prims.sum(total, [1]))
    return (*sums, total)


def test_a_shared_running_sum_is_stored_once_it_reads_three_whole_buffers(check, monkeypatch):
    # x + a (two whole reads) is recomputed by its two readers; x + a + b (three) is
    # stored, so x, a and b need not live on; (x + a + b) + c reads two again; the last
    # sum is an output, stored anyway. Without the rule every term lived to the end.
    import ember_inductor_ir.graph as graph

    inputs = [torch.randn(6, 8) for _ in range(5)]
    lowering, _ = check(_residual_stream, *inputs)
    monkeypatch.setattr(graph, "MAX_SHARED_FULL_READS", 10**9)
    without, _ = check(_residual_stream, *inputs)
    assert _stored_pointwise(lowering) == _stored_pointwise(without) + 1


def test_a_broadcast_read_is_not_a_whole_read(check, monkeypatch):
    import ember_inductor_ir.graph as graph

    def fn(x, a, bias):
        y = prims.add(prims.add(x, a), prims.broadcast_in_dim(bias, [6, 8], [1]))
        return prims.sum(y, [1]), prims.mul(y, y)

    inputs = torch.randn(6, 8), torch.randn(6, 8), torch.randn(8)
    lowering, _ = check(fn, *inputs)
    monkeypatch.setattr(graph, "MAX_SHARED_FULL_READS", 2)  # the bias would count
    stricter, _ = check(fn, *inputs)
    assert _stored_pointwise(stricter) == _stored_pointwise(lowering) + 1


def _two_term_stream(x, a, b):
    # (x + a) + b read by a reduction and a product: stored, as it reads three whole buffers
    total = prims.add(prims.add(x, a), b)
    return prims.sum(total, [1]), prims.mul(total, total)


def test_a_padded_buffer_read_through_a_slice_is_a_whole_read(check):
    # MLP-Mixer's bf16 token-mixing outputs are a matmul's result padded for alignment
    # ([N*C, 200]) read as 196 tokens: each is a whole term of the residual stream, and
    # x + padded[:, :8] + b is stored where x + a + b is. (Counted as a broadcast, the
    # stream kept four 37-MB terms alive at the Mixer's peak.)
    def sliced(x, padded, b):
        return _two_term_stream(x, prims.slice(padded, [0, 0], [6, 8]), b)

    x, b = torch.randn(6, 8), torch.randn(6, 8)
    got, _ = check(sliced, x, torch.randn(6, 12), b)
    want, _ = check(_two_term_stream, x, torch.randn(6, 8), b)
    assert _stored_pointwise(got) == _stored_pointwise(want) == 3  # with the product
