"""CUDA sdpa of symbolic size before aot (attention_kernels.py): where aten picks the
memory-efficient kernel, the composite's mask shaping (expand, pad to an aligned width)
branched on the length during aot's trace, one guard per residue class (one graph per length
class on an H100 for GPT-2 and Llama). Rewritten into the explicit kernel call, aot's forward
and joint traces add no guard on the length.

CUDA fakes need torch's CUDA build (/work/venv312 has one; no GPU needed); the kernel aten
would pick on a GPU is stood in for. On a GPU, tools/gpu/dynamic_check.py checks the values."""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.fx
import torch.nn.functional as F

import ember_bytecode_tracer.example_rules as er
from ember.backends.attention_kernels import efficient_attention, explicit_cuda_attention
from ember_aot_autograd import trace_joint, trace_to_aten
from ember_primops import decomposition_table

es = pytest.importorskip("ember_symbolic")

pytestmark = pytest.mark.skipif(
    not torch.backends.cuda.is_built(),
    reason="fake CUDA tensors need torch's CUDA build (run under /work/venv312)",
)


def _attention(x, mask):
    b, t, d = x.shape
    q = x.view(b, t, 2, d // 2).transpose(1, 2)
    k = (x * 2).view(b, t, 2, d // 2).transpose(1, 2)
    a = F.scaled_dot_product_attention(q, k, q, attn_mask=mask)
    return a.transpose(1, 2).reshape(b, t, d)


def _symbolic_inputs(env, length, mask_dtype, requires_grad):
    """x (2, L, 32) and an HF-style (2, 1, L, L) mask on CUDA fakes, L symbolic."""
    mode = es.fake_mode(env)
    x = torch.randn(2, length, 32)
    mask = torch.ones(length, length, dtype=torch.bool).tril().expand(2, 1, length, length)
    if mask_dtype != torch.bool:
        mask = torch.zeros(mask.shape).masked_fill(~mask, float("-inf")).to(mask_dtype)
    duck = es.Dim(es.DimDynamic.DUCK)  # equal sizes share one symbol: the length
    fakes = []
    for name, value, dims in (("x", x, {1: duck}), ("mask", mask, {2: duck, 3: duck})):
        meta = es.meta_tensor(env, value, name, dims=dims, default=es.DimDynamic.STATIC)
        with torch._C._DisableTorchDispatch():
            fake = mode.fake_tensor_converter.from_meta_and_device(mode, meta, torch.device("cuda"))
        fakes.append(fake)
    fakes[0].requires_grad_(requires_grad)
    return mode, fakes


def _traced_graph(mode, fakes):
    """The torch-level graph with the tracer's example values, computed as the tracer
    computes them: sdpa's by its rule (on a GPU aten's own choice on symbolic fakes fails),
    every op under the dispatch the tracer uses (on a GPU, C++ composites on CUDA fakes
    read concrete sizes: a specialization `Eq(s0, 9)` before aot ever runs)."""
    gm = torch.fx.symbolic_trace(_attention)
    values = iter(fakes)
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            node.meta["example_value"] = next(values)
        elif node.op in ("call_function", "call_method"):
            args, kwargs = torch.fx.node.map_arg(
                (node.args, node.kwargs), lambda n: n.meta["example_value"]
            )
            if node.op == "call_method":
                fn, args = getattr(args[0], node.target), args[1:]
            else:
                fn = node.target
            rule = er.rule_for(node.op, node.target, args, kwargs)
            with mode, er.dispatch_context(fn, args, kwargs):
                node.meta["example_value"] = rule() if rule else fn(*args, **kwargs)
    return gm


def _rewritten(monkeypatch, backend, mask_dtype=torch.bool, requires_grad=False, length=9):
    monkeypatch.setattr(er, "choose_backend", lambda statics, bound: backend)
    env = es.ShapeEnv()
    mode, fakes = _symbolic_inputs(env, length, mask_dtype, requires_grad)
    gm = _traced_graph(mode, fakes)
    return env, fakes, gm, explicit_cuda_attention(gm)


def _added_guards(env, trace):
    before = {g.code for g in env.render_guards()}
    result = trace()
    return result, [g.code for g in env.render_guards() if g.code not in before]


@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.float32])
def test_efficient_kernel_forward_trace_adds_no_length_guard(monkeypatch, mask_dtype):
    env, fakes, gm, count = _rewritten(monkeypatch, er.EFFICIENT, mask_dtype)
    assert count == 1
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert efficient_attention in targets and F.scaled_dot_product_attention not in targets
    aten_gm, added = _added_guards(
        env, lambda: trace_to_aten(gm, fakes, decomposition_table(), shape_env=env)
    )
    assert added == [], added
    ops = {str(n.target) for n in aten_gm.graph.nodes if n.op == "call_function"}
    assert "ember_prims.sdpa_efficient.default" in ops, ops
    out = aten_gm.graph.output_node().args[0][0].meta["val"]
    assert isinstance(out.shape[1], torch.SymInt)


@pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="autograd's engine runs the backward on the fakes' device: needs a GPU",
)
def test_efficient_kernel_joint_trace_adds_no_length_guard(monkeypatch):
    env, fakes, gm, count = _rewritten(monkeypatch, er.EFFICIENT, requires_grad=True)
    assert count == 1
    joint, added = _added_guards(
        env, lambda: trace_joint(gm, fakes, decomposition_table(), shape_env=env)
    )
    assert added == [], added
    ops = {str(n.target) for n in joint.gm.graph.nodes if n.op == "call_function"}
    assert {
        "ember_prims.sdpa_efficient.default",
        "ember_prims.sdpa_efficient_backward.default",
    } <= ops


@pytest.mark.parametrize("backend", [er.FLASH, er.CUDNN, er.MATH])
def test_other_kernels_keep_the_plain_call(monkeypatch, backend):
    _, _, gm, count = _rewritten(monkeypatch, backend)
    assert count == 0
    assert F.scaled_dot_product_attention in {n.target for n in gm.graph.nodes}


def test_static_and_cpu_calls_keep_the_plain_call(monkeypatch):
    monkeypatch.setattr(er, "choose_backend", lambda statics, bound: er.EFFICIENT)
    from torch._subclasses.fake_tensor import FakeTensorMode

    x, mask = torch.randn(2, 9, 32), torch.ones(9, 9, dtype=torch.bool).tril()
    mode = FakeTensorMode()  # no shape env: static sizes
    with mode:
        fakes = [mode.from_tensor(t).to("cuda") for t in (x, mask)]
    static_cuda = _traced_graph(mode, fakes)
    assert explicit_cuda_attention(static_cuda) == 0
    gm = _traced_graph(contextlib.nullcontext(), [x, mask])  # CPU values
    assert explicit_cuda_attention(gm) == 0
    torch.testing.assert_close(gm(x, mask), _attention(x, mask))
