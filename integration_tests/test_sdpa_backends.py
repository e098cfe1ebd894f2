"""F.scaled_dot_product_attention through Ember's backends: an attention block (HF's layout:
projections viewed as heads and transposed) compiled with `aot_eager` and `inductor`, causal,
with a bool mask, a float mask, and grouped-query heads; forward and backward equal eager's,
and the graphs the compilers receive hold aten's fused kernel as one extern prim forward and
one backward (no matmul/softmax decomposition). The Triton target runs the same block under
Triton's CPU interpreter."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap
from collections import Counter

import pytest
import torch
import torch.nn.functional as F

D, HEADS = 32, 4


class AttentionBlock(torch.nn.Module):
    def __init__(self, kv_heads: int = HEADS, causal: bool = True):
        super().__init__()
        self.kv_heads, self.head_dim, self.causal = kv_heads, D // HEADS, causal
        self.q = torch.nn.Linear(D, D)
        self.kv = torch.nn.Linear(D, 2 * kv_heads * self.head_dim)
        self.o = torch.nn.Linear(D, D)

    def forward(self, x, mask=None):
        b, n, _ = x.shape
        q = self.q(x).view(b, n, HEADS, self.head_dim).transpose(1, 2)
        k, v = self.kv(x).view(b, n, 2, self.kv_heads, self.head_dim).unbind(2)
        attn = F.scaled_dot_product_attention(
            q,
            k.transpose(1, 2),
            v.transpose(1, 2),
            attn_mask=mask,
            is_causal=self.causal,
            enable_gqa=self.kv_heads != HEADS,
        )
        return self.o(attn.transpose(1, 2).reshape(b, n, D))


def _bool_mask():
    mask = torch.rand(6, 6, generator=torch.Generator().manual_seed(3)) > 0.4
    mask[:, 0] = True  # no fully masked row
    return mask


CASES = {
    "causal": (dict(causal=True), None),
    "bool_mask": (dict(causal=False), _bool_mask()),
    "float_mask": (dict(causal=False), torch.randn(2, 1, 6, 6)),
    "gqa": (dict(causal=True, kv_heads=2), None),
}


class Spy:
    """Wraps an aot compiler and keeps the prim graph it receives."""

    def __init__(self, compiler):
        self.compiler, self.graphs = compiler, []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return self.compiler(gm, example_inputs)

    def ops(self) -> Counter:
        return Counter(
            str(n.target).removeprefix("ember_prims.").removesuffix(".default")
            for gm in self.graphs
            for n in gm.graph.nodes
            if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)
        )


def spied_backend(name: str):
    """`name`'s stages with its compilers spied on (same table, partitioner, compilers)."""
    from ember.backends.aot_eager import counting_graph_runner
    from ember.backends.inductor import compile_prim_graph
    from ember_aot_autograd import (
        aot_module,
        default_partition,
        min_cut_rematerialization_partition,
    )
    from ember_primops import decomposition_table

    if name == "aot_eager":
        fw = Spy(counting_graph_runner("aot_eager", "forward"))
        bw = Spy(counting_graph_runner("aot_eager", "backward"))
        partition = default_partition
    else:
        fw, bw = Spy(compile_prim_graph("forward")), Spy(compile_prim_graph("backward"))
        partition = min_cut_rematerialization_partition

    def backend(gm, example_inputs):
        return aot_module(
            gm,
            example_inputs,
            fw_compiler=fw,
            bw_compiler=bw,
            decompositions=decomposition_table(),
            partition_fn=partition,
        )

    return backend, fw, bw


def _run_against_eager(backend, case: str):
    import ember

    kwargs, mask = CASES[case]
    torch.manual_seed(0)
    model = AttentionBlock(**kwargs)
    twin = copy.deepcopy(model)
    x = torch.randn(2, 6, D, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    compiled = ember.compile(twin, backend=backend, fullgraph=True)
    expected, got = model(x, mask), compiled(x2, mask)
    torch.testing.assert_close(got, expected)
    expected.square().sum().backward()
    got.square().sum().backward()
    torch.testing.assert_close(x2.grad, x.grad)
    for mine, theirs in zip(twin.parameters(), model.parameters(), strict=True):
        torch.testing.assert_close(mine.grad, theirs.grad)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_sdpa_stays_one_fused_extern(backend, case):
    import ember

    ember.reset()
    spied, fw, bw = spied_backend(backend)
    _run_against_eager(spied, case)
    assert len(fw.graphs) == 1 and len(bw.graphs) == 1
    forward, backward = fw.ops(), bw.ops()
    assert forward["sdpa_flash_cpu"] == 1 and backward["sdpa_flash_cpu_backward"] == 1
    assert backward["sdpa_flash_cpu"] == 0  # the forward's logsumexp is saved, not recomputed
    decomposed = {"bmm", "amax", "exp", "softmax"}
    assert not decomposed & (set(forward) | set(backward)), (forward, backward)
    assert not ember.counters["aten_fallbacks"] and not ember.counters["inductor_fallbacks"]


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_sdpa_through_the_registered_backend(backend):
    import ember

    ember.reset()
    _run_against_eager(backend, "bool_mask")
    stats = ember.counters[backend]
    assert stats["forward_graphs"] == 1 and stats["backward_graphs"] == 1
    assert not ember.counters["aten_fallbacks"] and not ember.counters["inductor_fallbacks"]


# The Triton target under its CPU interpreter, in a child process (TRITON_INTERPRET must be
# set before triton is imported). The child drives the stages below the tracer directly.
TRITON_CHILD = textwrap.dedent(
    """
    import json, sys, torch
    sys.path.insert(0, sys.argv[1])
    from test_sdpa_backends import AttentionBlock, CASES
    from ember_aot_autograd import aot_module, min_cut_rematerialization_partition
    from ember_codegen import compile_graph
    from ember_inductor_ir import lower, schedule
    from ember_primops import decomposition_table

    externs = {}

    def compiler(gm, example_inputs):
        lowering = lower(gm, example_inputs, target="triton")
        for name, n in lowering.extern_counts.items():
            externs[name] = externs.get(name, 0) + n
        scheduled = schedule(lowering)
        assert not scheduled.fallback_counts, scheduled.fallback_counts
        compiled = compile_graph(scheduled, target="triton")
        return lambda *args: compiled(list(args))

    results = {}
    for case, (kwargs, mask) in CASES.items():
        torch.manual_seed(0)
        model = AttentionBlock(**kwargs)
        x = torch.randn(2, 6, 32, requires_grad=True)
        gm = torch.fx.symbolic_trace(model)
        inputs = [x, mask] if mask is not None else [x]
        run = aot_module(gm, inputs, fw_compiler=compiler, bw_compiler=compiler,
                         decompositions=decomposition_table(),
                         partition_fn=min_cut_rematerialization_partition)
        got = run(*inputs)
        got = got[0] if isinstance(got, (list, tuple)) else got
        expected = model(x, mask)
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
        g_got = torch.autograd.grad(got.square().sum(), [x])[0]
        g_exp = torch.autograd.grad(expected.square().sum(), [x])[0]
        torch.testing.assert_close(g_got, g_exp, rtol=1e-4, atol=1e-5)
        results[case] = "ok"
    print(json.dumps({"externs": externs, "results": results}))
    """
)


def test_sdpa_through_the_triton_interpreter(tmp_path):
    pytest.importorskip("triton", reason="the Triton target needs the 'triton' extra")
    env = {
        **os.environ,
        "TRITON_INTERPRET": "1",
        "EMBER_CACHE_DIR": str(tmp_path / "cache"),
    }
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run(
        [sys.executable, "-c", TRITON_CHILD, here],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(report["results"]) == set(CASES)
    assert report["externs"]["sdpa_flash_cpu"] == len(CASES)
    assert report["externs"]["sdpa_flash_cpu_backward"] == len(CASES)
