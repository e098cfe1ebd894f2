"""The example value of F.scaled_dot_product_attention on CUDA with symbolic sizes
(example_rules.py): computed without handing symbolic sizes to aten's CUDA kernel choice,
with the strides the chosen CUDA kernel gives, the node staying the sdpa call.

No GPU here: CUDA fakes need a CUDA build of torch (the tests that run them skip on CPU-only
builds, saying so); which kernel a GPU would choose is stood in for by patching
`choose_backend`. The layout rules are checked against eager CPU outputs (math, flash) and
aten's meta kernels (memory-efficient, cuDNN)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import ember_symbolic as es
from ember_bytecode_tracer import example_rules as er
from ember_bytecode_tracer.dynamic import DynamicPolicy
from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import LocalSource
from ember_bytecode_tracer.output_graph import OutputGraph

needs_cuda_build = pytest.mark.skipif(
    not torch.backends.cuda.is_built(),
    reason="torch built without CUDA: fake CUDA tensors can be made but aten's CUDA kernels "
    "(sdpa's kernel choice, CUDA allocation under fake mode) are missing, so SDPA cannot run "
    "on them; run under /work/venv312 (torch's CUDA build works without a GPU)",
)

BACKENDS = {
    "math": er.MATH,
    "flash": er.FLASH,
    "efficient": er.EFFICIENT,
    "cudnn": er.CUDNN,
}


def bshd(b, length, h, e, dtype=torch.float32):
    """HF's query layout: (B, L, H, E) projections seen as (B, H, L, E)."""
    return torch.randn(b, length, h, e, dtype=dtype).transpose(1, 2)


def fused_qkv(b, length, h, e):
    """GPT-2's: one projection split in three, so each part has gaps (not dense)."""
    qkv = torch.randn(b, length, 3 * h * e)
    return [p.view(b, length, h, e).transpose(1, 2) for p in qkv.split(h * e, dim=2)]


# ---- the layout rules on concrete tensors ------------------------------------------------


def significant(strides, shape):
    """Strides of the dims of size > 1: aten's meta kernels lay size-1 dims out otherwise
    than the CUDA kernels' C++ `empty_like` (which keeps the query's)."""
    return [s for s, n in zip(strides, shape, strict=True) if n != 1]


QUERY_LAYOUTS = {
    "contiguous": lambda: torch.randn(2, 4, 12, 16),
    "bshd": lambda: bshd(2, 12, 4, 16),
    "fused_qkv": lambda: fused_qkv(2, 12, 4, 16)[0],
    "length_1": lambda: bshd(2, 1, 4, 16),
}


@pytest.mark.parametrize("layout", sorted(QUERY_LAYOUTS))
def test_math_rule_matches_eager_cpu_math(layout):
    q = QUERY_LAYOUTS[layout]()
    k = v = torch.randn(2, 4, 9, 16)
    with sdpa_kernel(SDPBackend.MATH):
        out = F.scaled_dot_product_attention(q, k, v)
    assert er.sdpa_output_strides(er.MATH, q, q, out.shape) == out.stride()


@pytest.mark.parametrize("layout", ["contiguous", "bshd", "length_1"])
def test_flash_rule_matches_eager_cpu_flash_for_dense_queries(layout):
    # CPU's flash kernel also writes into the query's layout (dense queries; the CUDA one
    # differs for queries with gaps, covered below from aten's source)
    q = QUERY_LAYOUTS[layout]()
    k = v = bshd(2, 9, 4, 16)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        out = F.scaled_dot_product_attention(q, k, v)
    assert er.sdpa_output_strides(er.FLASH, q, q, out.shape) == out.stride()


def test_flash_rule_for_queries_with_gaps_and_odd_head_dims():
    q, _, _ = fused_qkv(2, 12, 4, 16)
    # empty_like(q.transpose(1, 2)) of a tensor with gaps: dense, in its dims' order
    assert er.sdpa_output_strides(er.FLASH, q, q, q.shape) == (12 * 64, 16, 64, 1)
    q = torch.randn(2, 4, 12, 32)[..., :16]  # gaps, heads outermost
    assert er.sdpa_output_strides(er.FLASH, q, q, q.shape) == (4 * 12 * 16, 12 * 16, 16, 1)
    # aten's flash meta kernel agrees (empty_like of the query, gaps and all)
    meta = torch.empty_strided(q.shape, q.stride(), device="meta")
    out = torch.ops.aten._scaled_dot_product_flash_attention(meta, meta, meta)[0]
    assert er.sdpa_output_strides(er.FLASH, q, q, q.shape) == out.stride()
    q = bshd(2, 12, 4, 20)  # padded to 24 (a contiguous tensor), then sliced back to 20
    assert er.sdpa_output_strides(er.FLASH, q, q, q.shape) == (4 * 12 * 24, 12 * 24, 24, 1)


@pytest.mark.parametrize("layout", sorted(QUERY_LAYOUTS))
def test_efficient_rule_matches_aten_meta(layout):
    q = QUERY_LAYOUTS[layout]().to("meta")
    k = v = torch.empty(2, 4, 9, 16, device="meta")
    out = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, None, False)[0]
    got = er.sdpa_output_strides(er.EFFICIENT, q, q, out.shape)
    assert significant(got, out.shape) == significant(out.stride(), out.shape)


@pytest.mark.parametrize("layout", ["contiguous", "bshd", "length_1"])
@pytest.mark.parametrize("value_dim", [16, 8])
def test_cudnn_rule_matches_aten_meta_for_dense_queries(layout, value_dim):
    q = QUERY_LAYOUTS[layout]().to("meta")
    k = torch.empty(2, 4, 9, 16, device="meta")
    v = torch.empty(2, 4, 9, value_dim, device="meta")
    out = torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, False)[0]
    got = er.sdpa_output_strides(er.CUDNN, q, q, out.shape)
    assert significant(got, out.shape) == significant(out.stride(), out.shape)


def test_cudnn_rule_for_queries_with_gaps_is_dense_in_their_order():
    q, _, _ = fused_qkv(2, 12, 4, 16)
    assert er.sdpa_output_strides(er.CUDNN, q, q, q.shape) == (12 * 64, 16, 64, 1)


# ---- through OutputGraph.create_node on CUDA fakes with symbolic sizes -------------------


class Trace:
    """An OutputGraph under dynamic=True with graph inputs on a fake CUDA device."""

    def __init__(self) -> None:
        self.output = OutputGraph(f_globals={}, code_name="f", dynamic=DynamicPolicy(True))
        self.env = self.output.dynamic.env

    def input(self, name, t, dynamic_dims=(), requires_grad=False):
        mode = self.output.fake_mode
        dims = {d: es.Dim(es.DimDynamic.DUCK) for d in dynamic_dims}
        meta = es.meta_tensor(
            self.env, t, LocalSource(name), dims=dims, default=es.DimDynamic.STATIC
        )
        with torch._C._DisableTorchDispatch():
            fake = mode.fake_tensor_converter.from_meta_and_device(mode, meta, torch.device("cuda"))
        if requires_grad:
            fake.requires_grad_(True)
        node = self.output.graph.placeholder(name)
        node.meta["example_value"] = fake
        return node

    def guards(self):
        return [g.code for g in self.env.render_guards()]

    def sdpa(self, *args, **kwargs):
        return self.output.create_node(
            "call_function", F.scaled_dot_product_attention, args, kwargs
        )


def hints(sizes):
    return [int(s.node.hint) if isinstance(s, torch.SymInt) else s for s in sizes]


@needs_cuda_build
@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_symbolic_length_on_cuda_adds_no_guard(monkeypatch, backend):
    """What a GPU's kernel choice did to HF models (one graph per length) cannot happen: the
    rule never hands symbolic sizes to aten's choice, whichever kernel it picks."""
    monkeypatch.setattr(er, "choose_backend", lambda statics, bound: BACKENDS[backend])
    trace = Trace()
    q = trace.input("q", bshd(2, 78, 4, 16), dynamic_dims=[2], requires_grad=True)
    k = trace.input("k", bshd(2, 78, 4, 16), dynamic_dims=[2], requires_grad=True)
    before = trace.guards()
    node, example = trace.sdpa(q, k, k, is_causal=True)
    assert trace.guards() == before  # no Eq(s0, 78), no new condition at all
    assert node.target is F.scaled_dot_product_attention  # backends still pick the kernel
    length = example.shape[2]
    assert isinstance(length, torch.SymInt) and hints(example.shape) == [2, 4, 78, 16]
    assert example.device.type == "cuda" and example.dtype == torch.float32
    assert example.requires_grad and example.grad_fn is not None
    real_q = bshd(2, 78, 4, 16)
    want = er.sdpa_output_strides(BACKENDS[backend], real_q, real_q, real_q.shape)
    assert hints(example.stride()) == list(want)
    if backend != "math":  # HF's layout is kept: the transpose(1, 2).reshape after it is free
        assert hints(example.stride()) == [78 * 64, 16, 64, 1]


CASES = {
    "gqa": (lambda: (bshd(2, 10, 8, 16), bshd(2, 10, 2, 16), bshd(2, 10, 2, 16)),
            {"enable_gqa": True}),
    "mask": (lambda: (bshd(2, 10, 4, 16), bshd(2, 13, 4, 16), bshd(2, 13, 4, 16)),
             {"attn_mask": torch.randn(2, 1, 10, 13)}),
    "bool_mask": (lambda: (bshd(2, 10, 4, 16), bshd(2, 13, 4, 16), bshd(2, 13, 4, 16)),
                  {"attn_mask": torch.rand(10, 13) > 0.3}),
    "fused_qkv": (lambda: fused_qkv(2, 10, 4, 16), {"is_causal": True}),  # offsets, gaps
    "value_dim": (lambda: (bshd(2, 10, 4, 16), bshd(2, 13, 4, 16), bshd(2, 13, 4, 8)), {}),
    "three_dims": (lambda: (torch.randn(3, 10, 16), torch.randn(3, 13, 16),
                            torch.randn(3, 13, 16)), {"scale": 0.5}),
    "half": (lambda: (bshd(2, 10, 4, 16, torch.float16), bshd(2, 13, 4, 16, torch.float16),
                      bshd(2, 13, 4, 16, torch.float16)), {"is_causal": True}),
}  # fmt: skip


@needs_cuda_build
@pytest.mark.parametrize("case", sorted(CASES))
def test_shape_and_dtype_match_eager_cpu(case):
    make, kwargs = CASES[case]
    q, k, v = make()
    with sdpa_kernel(SDPBackend.MATH):  # any kernel gives these shapes and dtypes
        want = F.scaled_dot_product_attention(q, k, v, **kwargs)
    trace = Trace()
    nodes = [
        trace.input(name, t, dynamic_dims=[t.dim() - 2])
        for name, t in (("q", q), ("k", k), ("v", v))
    ]
    if "attn_mask" in kwargs:
        mask = kwargs["attn_mask"]
        lengths = [mask.dim() - 2, mask.dim() - 1]  # (L, S): the lengths of q and k
        kwargs = {**kwargs, "attn_mask": trace.input("mask", mask, dynamic_dims=lengths)}
    before = trace.guards()
    _, example = trace.sdpa(*nodes, **kwargs)
    assert hints(example.shape) == list(want.shape) and example.dtype == want.dtype
    if not torch.cuda.is_available():  # no GPU: aten chooses math (a GPU's: the next test)
        assert hints(example.stride()) == list(want.stride())
    assert sorted(trace.guards()) == sorted(before), (before, trace.guards())


@needs_cuda_build
def test_the_kernel_choice_sees_concrete_sizes_only(monkeypatch):
    """aten's choice (here a stand-in that reads sizes as ints, as a GPU's does) runs on
    static twins at this call's sizes, so reading them records nothing."""
    seen = []
    real_sdpa = F.scaled_dot_product_attention

    def sdpa_reading_ints(q, k, v, *args, **kwargs):
        seen.append([int(s) for t in (q, k, v) for s in (*t.shape, *t.stride())])
        assert not any(isinstance(s, torch.SymInt) for t in (q, k, v) for s in t.shape)
        return real_sdpa(q, k, v, *args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", sdpa_reading_ints)
    trace = Trace()
    q = trace.input("q", bshd(2, 78, 4, 16), dynamic_dims=[2])
    before = trace.guards()
    trace.output.create_node("call_function", real_sdpa, (q, q, q), {})
    assert seen == [[2, 4, 78, 16, 78 * 64, 16, 64, 1] * 3]
    assert trace.guards() == before


@needs_cuda_build
@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_the_choice_is_read_off_the_static_output(monkeypatch, backend):
    """What a GPU's composite returns on the twins (stood in for by a layout) names the kernel."""
    q = bshd(2, 78, 4, 16)
    want = er.sdpa_output_strides(BACKENDS[backend], q, q, q.shape)
    if backend != "math":
        want = er.sdpa_output_strides(er.EFFICIENT, q, q, q.shape)  # the fused ones agree here
    static = torch.empty_strided(q.shape, want)
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda *a, **k: static)
    chosen = er.choose_backend({"query": q, "key": q, "value": q}, dict(er._SDPA_DEFAULTS))
    assert er.sdpa_output_strides(chosen, q, q, q.shape) == want


@needs_cuda_build
def test_inputs_eager_refuses_are_a_graph_break():
    trace = Trace()
    q = trace.input("q", bshd(2, 10, 4, 16), dynamic_dims=[2])
    k = trace.input("k", bshd(2, 10, 4, 16, torch.float16), dynamic_dims=[2])
    with pytest.raises(Unsupported, match="same dtype"):
        trace.sdpa(q, k, k)


@needs_cuda_build
def test_static_sizes_and_cpu_keep_the_plain_call(monkeypatch):
    calls = []
    monkeypatch.setattr(er, "choose_backend", lambda statics, bound: calls.append(1) or er.MATH)
    trace = Trace()
    q = trace.input("q", bshd(2, 10, 4, 16))  # static: aten's own choice cannot specialize
    trace.sdpa(q, q, q)
    assert calls == []
    assert (
        er.rule_for("call_function", F.scaled_dot_product_attention, (torch.ones(1, 2),) * 3, {})
        is None
    )


@needs_cuda_build
def test_a_failing_kernel_choice_leaves_the_plain_call(monkeypatch):
    def failing(statics, bound):
        raise RuntimeError("no kernel choice here")

    monkeypatch.setattr(er, "choose_backend", failing)
    trace = Trace()
    q = trace.input("q", bshd(2, 10, 4, 16), dynamic_dims=[2])
    node, example = trace.sdpa(q, q, q)  # aten's composite, as before the rule (math here)
    assert node.target is F.scaled_dot_product_attention
    assert hints(example.shape) == [2, 4, 10, 16]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: eager CUDA kernels")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout", ["bshd", "contiguous", "fused_qkv"])
@pytest.mark.parametrize("kwargs", [{}, {"is_causal": True}, {"mask": True}], ids=str)
def test_strides_match_eager_cuda(dtype, layout, kwargs):
    """On a GPU: the example value has the strides of eager's output (whichever kernel aten
    picks) and the length stays symbolic (checked on an H100, torch 2.11: 54 cases)."""
    make = {"bshd": bshd, "contiguous": lambda *s, **k: torch.randn(2, 4, 77, 64, **k),
            "fused_qkv": lambda *s, **k: fused_qkv(*s)[0].to(**k)}[layout]  # fmt: skip
    q, k, v = (make(2, 77, 4, 64, dtype=dtype).cuda() for _ in range(3))
    mask = torch.randn(2, 1, 77, 77, dtype=dtype).cuda() if kwargs.get("mask") else None
    call = {"attn_mask": mask} if mask is not None else kwargs
    want = F.scaled_dot_product_attention(q, k, v, **call)
    output = OutputGraph(f_globals={}, code_name="f", dynamic=DynamicPolicy(True))
    nodes = []
    for i, t in enumerate((q, k, v) + ((mask,) if mask is not None else ())):
        node = output.graph.placeholder(f"t{i}")
        node.meta["example_value"] = output.dynamic.fake_tensor(LocalSource(f"t{i}"), t)
        nodes.append(node)
    before = {g.code for g in output.dynamic.env.render_guards()}
    node_kwargs = {"attn_mask": nodes[3]} if mask is not None else kwargs
    _, example = output.create_node(
        "call_function", F.scaled_dot_product_attention, tuple(nodes[:3]), node_kwargs
    )
    new = {g.code for g in output.dynamic.env.render_guards()} - before
    assert not [g for g in new if g.endswith(" == 77")]  # the length never specialized
    assert hints(example.shape) == list(want.shape)
    assert hints(example.stride()) == list(want.stride())
