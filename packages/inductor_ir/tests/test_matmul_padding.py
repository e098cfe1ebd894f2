"""Large matmuls with an unaligned dim multiply zero-padded operands and return a slice of
the padded product (matmul_padding.py): Bart's LM head over its odd vocabulary."""

import dataclasses

import pytest
import torch

import ember_inductor_ir.matmul_padding as matmul_padding
from conftest import FUSING_GPU, prim_graph
from ember_inductor_ir import lower, run_scheduled, schedule
from ember_inductor_ir.extern import ExternKernel
from ember_primops import prims

ALIGNED_GPU = dataclasses.replace(FUSING_GPU, name="test-aligned-gpu", matmul_alignment_bytes=16)


@pytest.fixture(autouse=True)
def _small_products_qualify(monkeypatch):
    monkeypatch.setattr(matmul_padding, "MIN_WORK", 1)


def _run(fn, *inputs, target=ALIGNED_GPU):
    gm = prim_graph(fn, *inputs)
    lowering = lower(gm, list(inputs), target=target)
    got = run_scheduled(schedule(lowering), list(inputs))
    return lowering, gm, got


def _products(lowering) -> list[list[int]]:
    ops = [op for op in lowering.operations if isinstance(op, ExternKernel)]
    return [[int(s) for s in lowering.buffers[op.outputs[0].name].layout.size] for op in ops]


def _lm_head(x, w):
    # autocast's linear: the weight cast to bf16 and transposed
    logits = prims.mm(x, prims.permute(prims.convert_element_type(w, torch.bfloat16), [1, 0]))
    return (prims.reshape(logits, [2, 32, 1001]),)


def test_an_odd_vocabulary_pads_the_weight_and_slices_the_product():
    x, w = torch.randn(64, 96).bfloat16(), torch.randn(1001, 96)
    lowering, gm, (got,) = _run(_lm_head, x, w)
    (expected,) = _lm_head(x, w)
    assert _products(lowering) == [[64, 1008]]
    torch.testing.assert_close(got, expected, atol=1e-2, rtol=1e-2)
    assert got.stride() == (32 * 1008, 1008, 1)  # the padded rows, viewed: no copy
    pads = [n for n in gm.graph.nodes if n.op == "call_function" and "pad" in str(n.target)]
    assert len(pads) == 1


def test_addmm_pads_k_in_both_operands_and_n_in_its_bias():
    def fn(bias, a, b):
        return (prims.addmm(bias, a, b),)

    bias, a, b = (torch.randn(*s).bfloat16() for s in ((70,), (64, 100), (100, 70)))
    lowering, _, (got,) = _run(fn, bias, a, b)
    assert _products(lowering) == [[64, 72]]
    torch.testing.assert_close(got, torch.addmm(bias, a, b), atol=5e-2, rtol=2e-2)


def test_a_gradient_read_by_two_products_is_padded_once():
    def fn(grad, x, w):
        # the LM head's backward: the weight's gradient reads grad transposed (M = vocab),
        # the input's gradient reads it as is (K = vocab); both pad the vocab dim
        return prims.mm(prims.permute(grad, [1, 0]), x), prims.mm(grad, w)

    grad, x, w = (torch.randn(*s).bfloat16() for s in ((64, 1001), (64, 96), (1001, 96)))
    lowering, gm, got = _run(fn, grad, x, w)
    pads = [n for n in gm.graph.nodes if n.op == "call_function" and "pad" in str(n.target)]
    assert [list(p.args[3]) for p in pads if p.args[0].name == "grad"] == [[0, 7]]
    assert sorted(_products(lowering)) == [[64, 96], [1008, 96]]
    for g, e in zip(got, fn(grad, x, w), strict=True):
        torch.testing.assert_close(g, e, atol=1e-1, rtol=2e-2)
        assert g.is_contiguous()  # rows cut off a row-major product: still contiguous


def test_aligned_small_and_unpadded_targets_are_left_alone():
    def fn(a, b):
        return (prims.mm(a, b),)

    aligned = (torch.randn(64, 96).bfloat16(), torch.randn(96, 128).bfloat16())
    small_k = (torch.randn(64, 3).bfloat16(), torch.randn(3, 100).bfloat16())
    odd = (torch.randn(64, 96).bfloat16(), torch.randn(96, 1001).bfloat16())
    assert _products(_run(fn, *aligned)[0]) == [[64, 128]]
    assert _products(_run(fn, *small_k)[0]) == [[64, 104]]  # N padded, K = 3 is not
    assert _products(_run(fn, *odd, target=FUSING_GPU)[0]) == [[64, 1001]]


def test_small_products_are_left_alone(monkeypatch):
    monkeypatch.setattr(matmul_padding, "MIN_WORK", 1 << 30)
    x, w = torch.randn(64, 96).bfloat16(), torch.randn(1001, 96)
    lowering, _, (got,) = _run(_lm_head, x, w)
    assert _products(lowering) == [[64, 1001]]
    assert got.is_contiguous()
