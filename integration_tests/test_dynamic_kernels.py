"""Dynamic shapes make the kernels a static compile makes (issue 13, steady state).

A symbolic compile (``dynamic=True``) of a transformer layer's pieces schedules as many
kernels as the static compile of one length, and its C++ indexes its buffers with no more
integer divisions and modulos: index folds and fusion checks are proven for every size of
the length symbol (layer norm stays one kernel over a ``[s, 64]`` view of ``[1, s, 64]``;
BERT's heads ``[b, s, 4, 16]`` are read through plain strides). Every output is compared
with eager over several lengths, and the counts are of the compiled graphs (no fallback).
"""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

import ember
import ember_inductor_ir
from ember_codegen.cpp.emit.kernel import KernelBuilder


@pytest.fixture(autouse=True)
def _fresh(monkeypatch, tmp_path):
    ember.reset()
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    yield
    ember.reset()


@pytest.fixture
def schedules(monkeypatch):
    """Every schedule the inductor backend makes, in order."""
    made = []
    original = ember_inductor_ir.schedule

    def recording(lowering, **options):
        sched = original(lowering, **options)
        made.append(sched)
        return sched

    monkeypatch.setattr(ember_inductor_ir, "schedule", recording)
    return made


def _loop_sources(sched) -> list[str]:
    return [KernelBuilder(g, sched).build().code for g in sched if g.extern is None]


def _divisions(sources: list[str]) -> int:
    """Integer divisions and modulos in index expressions (inside [...])."""
    return sum(len(re.findall(r"\[[^\]]*[/%][^\]]*\]", s)) for s in sources)


def _compare(fn, make_args, lengths, schedules):
    """(static schedule, symbolic schedule), outputs checked against eager."""
    static = ember.compile(fn, dynamic=False)
    with torch.no_grad():
        args = make_args(lengths[0])
        torch.testing.assert_close(static(*args), fn(*args), rtol=1e-5, atol=1e-5)
    assert len(schedules) == 1 and schedules[0].shape_env is None
    ember.reset()
    dynamic = ember.compile(fn, dynamic=True)
    with torch.no_grad():
        for n in lengths:
            args = make_args(n)
            torch.testing.assert_close(dynamic(*args), fn(*args), rtol=1e-5, atol=1e-5)
    assert len(schedules) == 2 and schedules[1].shape_env is not None  # one symbolic graph
    return schedules[0], schedules[1]


def _gpt2_block(x, w1, b1, lw, lb, w2, b2):
    """addmm on [s, 64] rows, layer norm over the [1, s, 64] view, addmm again."""
    h = torch.addmm(b1, x.view(-1, 64), w1).view(1, -1, 64)
    h = F.layer_norm(h + x, (64,), lw, lb)
    return torch.addmm(b2, h.view(-1, 64), w2).view(1, -1, 64)


def test_layer_norm_over_a_symbolic_length_is_one_kernel(schedules):
    torch.manual_seed(0)
    params = [torch.randn(64, 64) * 0.1, torch.randn(64), torch.randn(64), torch.randn(64)]
    params += [torch.randn(64, 64) * 0.1, torch.randn(64)]

    def make_args(n):
        return [torch.randn(1, n, 64), *params]

    static, symbolic = _compare(_gpt2_block, make_args, [27, 9, 40, 27], schedules)
    assert len(list(symbolic)) == len(list(static))
    reductions = [g for g in symbolic if g.extern is None and g.reduction_sizes]
    assert len(reductions) == 1 and any(n.placement == "full" for n in reductions[0].nodes)
    assert _divisions(_loop_sources(symbolic)) <= _divisions(_loop_sources(static))


def _bert_attention(x, mask, wq, bq, wk, bk, wv, bv):
    """BERT's heads (a [b, s, 64] projection with a bias, viewed [b, s, 4, 16], transposed)
    and its additive mask: expand, compare, where over [b, 1, s, s]."""
    b, s, _ = x.shape

    def heads(w, bias):
        return F.linear(x, w, bias).view(b, s, 4, 16).transpose(1, 2)

    bias = mask[:, None, None, :].expand(b, 1, s, s)
    bias = torch.where(bias > 0, 0.0, torch.finfo(torch.float32).min)
    q, k, v = heads(wq, bq), heads(wk, bk), heads(wv, bv)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    return out.transpose(1, 2).reshape(b, s, 64)


def test_bert_heads_and_mask_over_a_symbolic_length(schedules):
    torch.manual_seed(0)
    weights = [t for _ in range(3) for t in (torch.randn(64, 64) * 0.1, torch.randn(64))]

    def make_args(n):
        mask = torch.ones(2, n)
        mask[1, n // 2 :] = 0
        return [torch.randn(2, n, 64), mask, *weights]

    static, symbolic = _compare(_bert_attention, make_args, [33, 17, 50, 33], schedules)
    assert len(list(symbolic)) == len(list(static))
    assert _divisions(_loop_sources(symbolic)) <= _divisions(_loop_sources(static))


def _scaled_relu(x):
    return torch.relu(x) * 2.0 + 1.0


def test_symbolic_kernel_runs_serial_or_parallel_by_its_run_size(schedules):
    """A static compile makes a small kernel serial and a large one parallel; a symbolic
    kernel makes that choice per run (a serial loop nest and an OpenMP one), not a parallel
    region for every size."""
    static, symbolic = _compare(
        _scaled_relu, lambda n: [torch.randn(n, 64)], [5, 3, 9, 700, 1100], schedules
    )
    assert "omp parallel" not in "".join(_loop_sources(static))  # 5 x 64: serial
    (source,) = _loop_sources(symbolic)
    parallel, serial = source.split("} else {")
    assert re.search(r"if \([^)]*s\d[^)]* >= \d+\) \{", parallel)
    assert "#pragma omp parallel for" in parallel
    assert "omp parallel" not in serial and "#pragma omp simd" in serial
