"""aot_module on torch-level graphs whose example values have symbolic sizes (ember-symbolic-
shapes): one traced variant serves every size, equal to eager forward and backward."""

from __future__ import annotations

import math
import operator

import pytest
import torch
import torch.fx

from ember_aot_autograd import aot_module, default_partition, min_cut_rematerialization_partition

es = pytest.importorskip("ember_symbolic")
PARTITIONERS = {"default": default_partition, "min_cut": min_cut_rematerialization_partition}


def symbolic_graph(fn, args, dims):
    """`fn` traced by torch.fx, placeholders and nodes carrying example values with symbolic
    sizes as the tracer makes them: `dims[i]` is {dim: Dim} for a tensor, "int" for a SymInt."""
    env = es.ShapeEnv()
    mode = es.fake_mode(env)
    gm = torch.fx.symbolic_trace(fn)
    fakes = []
    for i, (arg, dim) in enumerate(zip(args, dims, strict=True)):
        if isinstance(arg, torch.Tensor):
            fake = es.fake_tensor(mode, arg, f"a{i}", dims=dim or {}, default=es.DimDynamic.STATIC)
            fakes.append(fake.requires_grad_(arg.requires_grad))
        elif dim == "int":
            fakes.append(env.create_symint(arg, f"a{i}", dynamic=es.DimDynamic.DYNAMIC))
        else:
            fakes.append(arg)

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node):
            value = super().run_node(node)
            if node.op != "output":
                node.meta["example_value"] = value
            return value

    with mode:
        Recorder(gm).run(*fakes)
    return gm, env


class Compilers:
    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm


def _mlp(x, w1, b1, w2):
    h = torch.relu(x @ w1.t() + b1)
    return (h @ w2.t()).view(x.size(0), -1).sum(1) * 2


def _attention(x, n, wq, wo, lw, lb):
    b, t, d = x.size(0), x.size(1), x.size(2)
    h = torch.nn.functional.layer_norm(x, (d,), lw, lb)
    q = (h @ wq).view(b, t, 4, d // 4).transpose(1, 2)
    a = torch.softmax(q @ q.transpose(-1, -2) / math.sqrt(8), dim=-1)
    o = (a @ q).transpose(1, 2).reshape(b, t, d) @ wo
    return (o + x) * n, torch.arange(t).float().sum()


def _params(*shapes):
    torch.manual_seed(0)
    # small weights: well-conditioned softmax, so float32 rounding stays within tolerance
    return [(torch.randn(*s) * 0.2).requires_grad_() for s in shapes]


def _check(compiled, fn, args, params):
    for p in params:
        p.grad = None
    out = compiled(*args)
    out = out if isinstance(out, tuple) else (out,)
    out[0].sum().backward()
    got = [p.grad for p in params]
    for p in params:
        p.grad = None
    ref = fn(*args)
    ref = ref if isinstance(ref, tuple) else (ref,)
    ref[0].sum().backward()
    for a, e in zip(out, ref, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-3)
    for a, e in zip(got, [p.grad for p in params], strict=True):
        torch.testing.assert_close(a, e, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("partitioner", sorted(PARTITIONERS))
def test_mlp_one_variant_for_every_batch_size(partitioner):
    from ember_primops import decomposition_table

    w1, b1, w2 = _params((16, 8), (16,), (4, 16))
    x = torch.randn(5, 8)
    gm, _env = symbolic_graph(_mlp, [x, w1, b1, w2], [{0: es.Dim()}, None, None, None])
    fw, bw = Compilers(), Compilers()
    compiled = aot_module(
        gm, [x, w1, b1, w2], fw, bw, decomposition_table(), PARTITIONERS[partitioner]
    )
    for n in (5, 7, 3, 12):
        _check(compiled, _mlp, [torch.randn(n, 8), w1, b1, w2], [w1, b1, w2])
    assert (len(fw.graphs), len(bw.graphs)) == (1, 1)
    # the backward gets the batch size as an int from the forward, not a tensor to read it from
    (fw_gm,) = fw.graphs
    (bw_gm,) = bw.graphs
    bw_inputs = [n for n in bw_gm.graph.nodes if n.op == "placeholder"]
    sizes = [n for n in bw_inputs if isinstance(n.meta["val"], torch.SymInt)]
    assert sizes, bw_gm.graph
    assert any(n.target is torch.ops.aten.sym_size.int for n in fw_gm.graph.nodes)
    assert not any(n.target is torch.ops.aten.sym_size.int for n in bw_gm.graph.nodes)


# torch 2.11's FakeTensorMode answers `aten.size.default` with int() of every size, which
# specializes a symbolic size; this test's helper runs `x.size()` on fakes through an FX
# Interpreter (the tracer computes sizes itself and never dispatches it: its dynamic-shape
# tests pass on 2.11, see the torch-oldest session)
OLD_FAKE_SIZES = torch.__version__ < "2.13"


@pytest.mark.skipif(OLD_FAKE_SIZES, reason="torch < 2.13: FakeTensorMode int()s aten.size")
@pytest.mark.parametrize("partitioner", sorted(PARTITIONERS))
def test_attention_block_with_symint_input(partitioner):
    from ember_primops import decomposition_table

    wq, wo, lw, lb = _params((32, 32), (32, 32), (32,), (32,))

    def args(b, t, n):
        return [torch.randn(b, t, 32), n, wq, wo, lw, lb]

    first = args(2, 5, 3)
    dims = [{0: es.Dim(), 1: es.Dim()}, "int", None, None, None, None]
    gm, _env = symbolic_graph(_attention, first, dims)
    fw, bw = Compilers(), Compilers()
    compiled = aot_module(gm, first, fw, bw, decomposition_table(), PARTITIONERS[partitioner])
    for b, t, n in ((2, 5, 3), (3, 7, 4), (4, 3, 2), (2, 9, 5)):
        _check(compiled, _attention, args(b, t, n), [wq, wo, lw])
    assert (len(fw.graphs), len(bw.graphs)) == (1, 1)
    placeholders = [n for n in fw.graphs[0].graph.nodes if n.op == "placeholder"]
    assert isinstance(placeholders[1].meta["val"], torch.SymInt)  # n stays an input


def test_inference_graph_sizes_are_nodes():
    from ember_primops import decomposition_table

    def fn(x):
        return (
            x.reshape(x.size(0) * x.size(1), -1)
            + torch.arange(x.size(1)).repeat(x.size(0))[:, None]
        )

    x = torch.randn(3, 4, 2)
    gm, _env = symbolic_graph(fn, [x], [{0: es.Dim(), 1: es.Dim()}])
    fw = Compilers()
    with torch.no_grad():
        compiled = aot_module(gm, [x], fw, None, decomposition_table())
        for shape in ((3, 4, 2), (5, 2, 2), (2, 6, 2)):
            x = torch.randn(*shape)
            torch.testing.assert_close(compiled(x), fn(x))
    assert len(fw.graphs) == 1
    targets = {n.target for n in fw.graphs[0].graph.nodes}
    assert torch.ops.aten.sym_size.int in targets and operator.mul in targets


def test_guards_recorded_by_a_late_trace_are_checked_per_call():
    """A variant traced at call time (not when the caller built its guard function) whose
    decomposition branches on a size: the branch's guard is checked on each call, and a
    call it rejects runs a static variant traced for its own sizes."""
    from ember_aot_autograd import aot_function

    aten = torch.ops.aten

    def branchy_relu(x):  # a decomposition whose result depends on a size branch
        if x.shape[0] > 6:
            return aten.mul.Tensor(x, 2.0)
        return aten.mul.Tensor(x, 3.0)

    def fn(x):
        return torch.relu(x) + 1

    x = torch.randn(4, 3)
    gm, _env = symbolic_graph(fn, [x], [{0: es.Dim()}])
    values = [n.meta["example_value"] for n in gm.graph.nodes if n.op == "placeholder"]
    fw = Compilers()
    compiled = aot_function(
        gm, fw, decompositions={aten.relu.default: branchy_relu}, example_values=values
    )
    with torch.no_grad():
        for n in (4, 5, 8, 9, 3):
            x = torch.randn(n, 3)
            expected = x * (2.0 if n > 6 else 3.0) + 1
            torch.testing.assert_close(compiled(x), expected)
    # one symbolic variant (n <= 6) and one static variant per size it rejected
    assert len(fw.graphs) == 3
    assert compiled.traces["inference"] == 3
