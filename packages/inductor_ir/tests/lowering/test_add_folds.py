"""Adds performed by accumulating kernels (add_folds): index_put runs in place, into a buffer
only it reads, else into a fresh copy; an accumulating scatter into zeros added to a value
scatters into that value; a matmul added to a buffer only the add reads accumulates into it
(addmm_)."""

import torch

from ember_inductor_ir.extern import ExternKernel
from ember_inductor_ir.nodes import ComputedBuffer
from ember_primops import prims

F32 = {"dtype": torch.float32, "device": torch.device("cpu")}


def check_traced(check, fn, *inputs):
    """``check`` on the prim graph of ``fn`` as AOT tracing makes it: symbolic_trace folds a
    ``full`` with constant arguments into a tensor constant; it is turned back into a node."""
    helpers = check.__globals__  # the conftest module's namespace

    def prim_graph(fn, *inputs):
        gm = original(fn, *inputs)
        for node in list(gm.graph.nodes):
            if node.op != "get_attr":
                continue
            value = getattr(gm, node.target)
            with gm.graph.inserting_before(node):
                full = gm.graph.call_function(
                    prims.full,
                    (list(value.shape), value.flatten()[0].item()),
                    {"dtype": value.dtype, "device": value.device},
                )
            full.meta["val"] = node.meta["val"]
            node.replace_all_uses_with(full)
            gm.graph.erase_node(node)
        gm.recompile()
        return gm

    original = helpers["prim_graph"]
    helpers["prim_graph"] = prim_graph
    try:
        return check(fn, *inputs)
    finally:
        helpers["prim_graph"] = original


def _externs(lowering) -> list[ExternKernel]:
    return [op for op in lowering.operations if isinstance(op, ExternKernel)]


def _scatters(lowering) -> list[ExternKernel]:
    scatters = (torch.ops.aten.index_put_.default, torch.ops.aten.index_add_.default)
    return [op for op in _externs(lowering) if op.kernel in scatters]


def _computed_groups(sched) -> int:
    return sum(1 for g in sched if not g.is_extern)


def _embedding_grad(idx, v):
    return prims.index_put(prims.full([10, 4], 0, **F32), [idx], v, True)


IDX = torch.tensor([1, 3, 1, 9, 0, 3])  # repeated rows accumulate


def test_tied_embedding_gradient_scatters_into_the_matmul_result(check):
    def fn(x, w, idx, v):
        return (prims.add(prims.mm(x, w), _embedding_grad(idx, v)),)

    lowering, sched = check_traced(
        check, fn, torch.randn(10, 5), torch.randn(5, 4), IDX, torch.randn(6, 4)
    )
    assert not lowering.fallback_counts
    mm, scatter = _externs(lowering)
    assert scatter.mutates == mm.outputs[0].name  # no zero fill, no copy, no add kernel
    assert _computed_groups(sched) == 0


def test_tied_embedding_rows_added_into_the_matmul_result(check):
    # the embedding gradient as aten's decomposition makes it: index_add into zeros
    def fn(x, w, idx, v):
        rows = prims.index_add(prims.full([10, 4], 0, **F32), 0, idx, v)
        return (prims.add(prims.mm(x, w), rows),)

    lowering, sched = check_traced(
        check, fn, torch.randn(10, 5), torch.randn(5, 4), IDX, torch.randn(6, 4)
    )
    mm, scatter = _externs(lowering)
    assert scatter.kernel is torch.ops.aten.index_add_.default
    assert scatter.mutates == mm.outputs[0].name  # no zero fill, no copy, no add kernel
    assert _computed_groups(sched) == 0 and not lowering.fallback_counts


def test_two_scatters_added_in_a_chain_write_one_buffer(check):
    # t5: the shared table's gradient from the encoder's and the decoder's embeddings.
    def fn(x, w, idx, v, idx2, v2):
        tied = prims.add(prims.mm(x, w), _embedding_grad(idx, v))
        return (prims.add(_embedding_grad(idx2, v2), tied),)

    idx2 = torch.tensor([9, 9, 2])
    inputs = (
        torch.randn(10, 5),
        torch.randn(5, 4),
        IDX,
        torch.randn(6, 4),
        idx2,
        torch.randn(3, 4),
    )
    lowering, sched = check_traced(check, fn, *inputs)
    mm, first, second = _externs(lowering)
    assert first.mutates == mm.outputs[0].name
    assert second.mutates == first.outputs[0].name
    assert _computed_groups(sched) == 0


def test_untied_embedding_gradient_fills_zeros_then_scatters(check):
    lowering, _ = check_traced(check, _embedding_grad, IDX, torch.randn(6, 4))
    (scatter,) = _scatters(lowering)
    (fill,) = [op for op in lowering.operations if isinstance(op, ComputedBuffer)]
    assert scatter.mutates == fill.name and not lowering.fallback_counts


def test_a_value_read_elsewhere_is_copied_not_overwritten(check):
    def fn(x, idx, v):
        y = prims.exp(x)
        return prims.index_put(y, [idx], v, True), prims.mul(y, y)

    lowering, _ = check(fn, torch.randn(10, 4), IDX, torch.randn(6, 4))
    (scatter,) = _scatters(lowering)
    (exp,) = [op for op in lowering.operations if op.origins == ["exp_default"]]
    assert scatter.mutates != exp.name  # exp(x) is stored once and copied for the scatter


def test_a_graph_output_is_copied_not_overwritten(check):
    def fn(x, w, idx, v):
        y = prims.mm(x, w)
        return y, prims.index_put(y, [idx], v, False)

    lowering, _ = check(fn, torch.randn(10, 5), torch.randn(5, 4), IDX[:4], torch.randn(4, 4))
    mm, scatter = _externs(lowering)
    assert scatter.mutates != mm.outputs[0].name


def test_a_value_the_scatter_also_reads_is_copied(check):
    def fn(x, w, idx):
        y = prims.mm(x, w)
        return (prims.index_put(y, [idx], prims.index(y, [idx]), True),)

    lowering, _ = check(fn, torch.randn(10, 5), torch.randn(5, 4), IDX)
    mm, scatter = _externs(lowering)
    assert scatter.mutates != mm.outputs[0].name


def test_graph_inputs_are_never_written(check):
    def fn(x, idx, v):
        return (prims.add(x, _embedding_grad(idx, v)),)

    x = torch.randn(10, 4)
    before = x.clone()
    lowering, _ = check_traced(check, fn, x, IDX, torch.randn(6, 4))
    assert torch.equal(x, before)
    (scatter,) = _scatters(lowering)
    assert scatter.mutates not in lowering.graph_inputs


# -- x + a @ b as addmm_ ---------------------------------------------------------------


def _addmms(lowering) -> list[ExternKernel]:
    return [op for op in _externs(lowering) if op.kernel is torch.ops.aten.addmm_.default]


def test_a_sum_of_matmuls_accumulates_in_the_first_ones_buffer(check):
    # An unrolled loop's weight gradient: one matmul per step, summed.
    def fn(g0, g1, g2, g3, h0, h1, h2, h3):
        terms = [prims.mm(prims.permute(g, [1, 0]), h) for g, h in ((g0, h0), (g1, h1), (g2, h2))]
        total = prims.add(prims.add(terms[0], terms[1]), terms[2])
        return (prims.add(total, prims.mm(prims.permute(g3, [1, 0]), h3)),)

    inputs = [torch.randn(3, 6) for _ in range(4)] + [torch.randn(3, 5) for _ in range(4)]
    lowering, sched = check(fn, *inputs)
    first = [op for op in _externs(lowering) if op.kernel_name == "mm"]
    addmms = _addmms(lowering)
    assert len(first) == 1 and len(addmms) == 3
    assert addmms[0].mutates == first[0].outputs[0].name
    assert [op.mutates for op in addmms[1:]] == [op.outputs[0].name for op in addmms[:-1]]
    assert _computed_groups(sched) == 0


def test_a_transposed_matmul_term_accumulates_as_the_transposed_product(check):
    def fn(x, w, a, b):
        term = prims.permute(prims.permute(prims.permute(prims.mm(a, b), [1, 0]), [1, 0]), [1, 0])
        return (prims.add(prims.mm(x, w), term),)

    inputs = (torch.randn(5, 4), torch.randn(4, 3), torch.randn(3, 2), torch.randn(2, 5))
    lowering, sched = check(fn, *inputs)
    assert len(_addmms(lowering)) == 1 and _computed_groups(sched) == 0


def test_an_addend_not_stored_yet_is_added_by_a_kernel(check):
    # Storing exp(x) for addmm would cost the pass the fold saves: the add stays a kernel.
    def fn(x, a, b):
        return (prims.add(prims.exp(x), prims.mm(a, b)),)

    lowering, _ = check(fn, torch.randn(4, 5), torch.randn(4, 3), torch.randn(3, 5))
    assert not _addmms(lowering)


def test_an_addend_read_elsewhere_is_not_overwritten(check):
    def fn(x, w, a, b):
        p = prims.mm(x, w)
        return prims.add(p, prims.mm(a, b)), prims.mul(p, p)

    inputs = (torch.randn(4, 2), torch.randn(2, 5), torch.randn(4, 3), torch.randn(3, 5))
    lowering, _ = check(fn, *inputs)
    assert not _addmms(lowering)


def test_half_precision_sums_keep_eager_rounding(check):
    def fn(p, a, b):
        return (prims.add(prims.mm(p, p), prims.mm(a, b)),)

    inputs = [torch.randn(4, 4), torch.randn(4, 3), torch.randn(3, 4)]
    lowering, _ = check(fn, *[t.to(torch.bfloat16) for t in inputs], atol=1e-2, rtol=1e-2)
    assert not _addmms(lowering)


def test_a_bias_read_by_a_pointwise_op_is_not_a_fold_candidate():
    from conftest import prim_graph
    from ember_inductor_ir.add_folds import find_folds

    def fn(x, w, b):
        return (prims.tanh(prims.add(prims.mm(x, w), prims.broadcast_in_dim(b, [4, 5], [1]))),)

    gm = prim_graph(fn, torch.randn(4, 3), torch.randn(3, 5), torch.randn(5))
    assert not find_folds(gm.graph)  # the bias add fuses into the tanh's kernel


# -- bias + a @ b as addmm(bias, a, b, out=) ---------------------------------------------


def _bias_addmms(lowering) -> list[ExternKernel]:
    return [op for op in _externs(lowering) if op.kernel_name == "addmm"]


def _linear(x, w, b):  # (4, 3) @ (3, 5) + (5,)
    return prims.add(prims.mm(x, w), prims.broadcast_in_dim(b, [4, 5], [1]))


def test_a_linear_whose_sum_is_an_output_is_one_addmm(check):
    lowering, sched = check(
        lambda x, w, b: (_linear(x, w, b),), torch.randn(4, 3), torch.randn(3, 5), torch.randn(5)
    )
    (addmm,) = _bias_addmms(lowering)
    assert addmm.writes_out and addmm.mutates is None  # into planned storage, bias untouched
    assert [op.kernel_name for op in _externs(lowering)] == ["addmm"]  # no mm
    assert _computed_groups(sched) == 0  # no bias kernel


def test_a_linear_read_by_a_matmul_through_a_view_is_one_addmm(check):
    def fn(x, w, b, w2):
        h = prims.reshape(_linear(x, w, b), [2, 2, 5])
        return (prims.mm(prims.reshape(h, [4, 5]), w2),)

    inputs = (torch.randn(4, 3), torch.randn(3, 5), torch.randn(5), torch.randn(5, 2))
    lowering, sched = check(fn, *inputs)
    assert [op.kernel_name for op in _externs(lowering)] == ["addmm", "mm"]
    assert _computed_groups(sched) == 0


def test_a_row_bias_of_two_dims_broadcasts_like_eager(check):
    def fn(x, w, b):
        return (prims.add(prims.mm(x, w), prims.broadcast_in_dim(b, [4, 5], [0, 1])),)

    lowering, _ = check(fn, torch.randn(4, 3), torch.randn(3, 5), torch.randn(1, 5))
    assert len(_bias_addmms(lowering)) == 1


def test_a_linear_read_by_an_op_and_the_output_keeps_its_fused_kernel(check):
    def fn(x, w, b):
        y = _linear(x, w, b)
        return y, prims.tanh(y)

    lowering, sched = check(fn, torch.randn(4, 3), torch.randn(3, 5), torch.randn(5))
    assert not _bias_addmms(lowering)
    assert _computed_groups(sched) == 1  # the bias add and the tanh: one kernel anyway


def test_a_computed_bias_or_half_precision_is_added_by_a_kernel(check):
    def computed(x, w, b):
        return (prims.add(prims.mm(x, w), prims.broadcast_in_dim(prims.exp(b), [4, 5], [1])),)

    inputs = (torch.randn(4, 3), torch.randn(3, 5), torch.randn(5))
    lowering, _ = check(computed, *inputs)
    assert not _bias_addmms(lowering)
    half = [t.to(torch.bfloat16) for t in inputs]
    lowering, _ = check(lambda x, w, b: (_linear(x, w, b),), *half, atol=1e-2, rtol=1e-2)
    assert not _bias_addmms(lowering)


def test_a_column_bias_is_added_by_a_kernel(check):
    # broadcast along the rows' dim only: not addmm's trailing-dims broadcast of a vector
    def fn(x, w, b):
        return (prims.add(prims.mm(x, w), prims.broadcast_in_dim(b, [4, 5], [0])),)

    lowering, _ = check(fn, torch.randn(4, 3), torch.randn(3, 5), torch.randn(4))
    assert not _bias_addmms(lowering)


def test_a_linear_split_into_permuted_heads_keeps_the_bias_in_the_copy(check):
    # The copy that lays the heads out for the library kernel adds the bias for free.
    def fn(x, w, b, w2):
        heads = prims.permute(prims.reshape(_linear(x, w, b), [2, 2, 5]), [1, 0, 2])
        return (prims.bmm(heads, prims.broadcast_in_dim(w2, [2, 5, 2], [1, 2])),)

    inputs = (torch.randn(4, 3), torch.randn(3, 5), torch.randn(5), torch.randn(5, 2))
    lowering, _ = check(fn, *inputs)
    assert not _bias_addmms(lowering)
