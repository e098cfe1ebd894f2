"""Narrow stores: a float32 buffer holding only bfloat16 values is stored as bfloat16 and
widened by every reader; graph outputs and what a library reads keep float32. Results are
compared with eager bit for bit through the interpreter (which allocates each buffer with
its layout's dtype)."""

from __future__ import annotations

import dataclasses

import torch

from conftest import LIBRARY_CPU, prim_graph
from ember_inductor_ir import lower, run_scheduled, schedule
from ember_inductor_ir.handlers.exactness import (
    ExactnessHandler,
    constant_exactness,
    tensor_exactness,
)
from ember_inductor_ir.narrow_stores import narrow_stores
from ember_primops import prims

BF16, F16, F32 = torch.bfloat16, torch.float16, torch.float32
NARROWING = dataclasses.replace(LIBRARY_CPU, name="test-narrowing-cpu", narrow_stores=True)


def _rounded(x, w, dtype=BF16):
    """exp(x) * w rounded to ``dtype`` and widened: costly enough (exp) to be stored once
    for two readers."""
    wide = prims.mul(prims.exp(x), w)
    return prims.convert_element_type(prims.convert_element_type(wide, dtype), F32)


def _full(value):
    return prims.full([16, 32], value, dtype=F32, device=torch.device("cpu"))


def _two_readers(x, w):
    y = _rounded(x, w)
    return prims.mul(y, y), prims.amax(y, [1])


def _inputs():
    torch.manual_seed(0)
    return [torch.randn(16, 32), torch.randn(16, 32)]


def _lowered(fn, inputs, target=NARROWING):
    return lower(prim_graph(fn, *inputs), list(inputs), target=target)


def _run_exact(fn, inputs, target=NARROWING):
    lowering = _lowered(fn, inputs, target)
    got = run_scheduled(schedule(lowering), list(inputs))
    for g, e in zip(got, fn(*inputs), strict=True):
        assert g.dtype == e.dtype and torch.equal(g, e), (g, e)
    return lowering


def _computed_dtypes(lowering) -> list[torch.dtype]:
    return [op.layout.dtype for op in lowering.operations if hasattr(op, "data")]


def test_a_bf16_exact_value_with_two_readers_is_stored_as_bf16():
    lowering = _run_exact(_two_readers, _inputs())
    narrowed = [b for b in lowering.narrowed if b.dtype == BF16]
    assert len(narrowed) == 1, _computed_dtypes(lowering)
    buf = lowering.buffers[narrowed[0].name]
    assert buf.layout.dtype == BF16 and buf.widen_to == F32
    assert narrowed[0].saved_bytes == 16 * 32 * 2


def test_a_float16_round_trip_is_stored_as_float16():
    def fn(x, w):
        y = _rounded(x, w, F16)
        return prims.mul(y, y), prims.amax(y, [1])

    lowering = _run_exact(fn, _inputs())
    assert [b.dtype for b in lowering.narrowed] == [F16]


def test_without_the_capability_nothing_is_narrowed():
    lowering = _run_exact(_two_readers, _inputs(), LIBRARY_CPU)
    assert lowering.narrowed == [] and BF16 not in _computed_dtypes(lowering)


def _narrowed_names(lowering) -> list[str]:
    return [n.name for n in lowering.narrowed]


def test_a_graph_output_keeps_float32():
    """y is returned: float32 as eager's; the same value of w and x, read twice but not
    returned, is narrowed beside it."""

    def fn(x, w):
        y, other = _rounded(x, w), _rounded(w, x)
        return y, prims.amax(y, [1]), prims.mul(other, other), prims.amax(other, [0])

    lowering = _run_exact(fn, _inputs())
    out = lowering.buffers[lowering.graph_outputs[0].name]
    assert out.layout.dtype == F32 and out.widen_to is None
    assert len(lowering.narrowed) == 1 and out.name not in _narrowed_names(lowering)


def test_a_value_a_matmul_reads_keeps_float32():
    """The library product gets y's float32 storage as it is; the value it does not read is
    narrowed."""

    def fn(x, w):
        y, other = _rounded(x, w), _rounded(w, x)
        product = prims.mm(y, prims.permute(w, [1, 0]))
        return product, prims.amax(y, [1]), prims.mul(other, other), prims.amax(other, [0])

    lowering = _run_exact(fn, _inputs())
    (mm,) = [op for op in lowering.operations if getattr(op, "kernel_name", "") == "mm"]
    read = mm.tensor_args()[0].name
    assert lowering.buffers[read].layout.dtype == F32
    assert len(lowering.narrowed) == 1 and read not in _narrowed_names(lowering)


def test_arithmetic_after_the_rounding_is_not_narrowed():
    def fn(x, w):
        y = prims.mul(_rounded(x, w), prims.exp(w))  # a product of bf16 values: not exact
        other = _rounded(w, x)
        return prims.mul(y, y), prims.amax(y, [1]), prims.mul(other, other), prims.amax(other, [0])

    lowering = _run_exact(fn, _inputs())
    assert len(lowering.narrowed) == 1
    assert all(lowering.buffers[n].layout.dtype == BF16 for n in _narrowed_names(lowering))


def test_a_selection_of_a_narrowed_value_is_narrowed_too():
    """relu of a stored bf16 value, itself stored for two readers: where(c, y, 0) is exact
    (the chain of a ResNet's backward: a mask applied to a rounded gradient)."""

    def fn(x, w):
        y = _rounded(x, w)
        big = prims.exp(prims.exp(y))
        r = prims.where(prims.gt(big, _full(1.5)), prims.neg(y), _full(0.0))
        return prims.mul(y, y), prims.amax(y, [1]), prims.mul(r, r), prims.amax(r, [0])

    lowering = _run_exact(fn, _inputs())
    assert len(lowering.narrowed) == 2, _computed_dtypes(lowering)


def test_the_pass_runs_once_per_buffer():
    lowering = _lowered(_two_readers, _inputs())
    assert narrow_stores(lowering) == []  # already narrowed: nothing more


def test_exactness_of_leaves_and_selections():
    ops = ExactnessHandler({"half": F16, "wide": F32, "mask": F32}, {"mask": frozenset({BF16})})
    both = frozenset({BF16, F16})
    assert constant_exactness(0.0, F32) == both
    assert constant_exactness(2.0**17, F32) == {BF16}  # past float16's range
    assert constant_exactness(0.1, F32) == frozenset()
    assert constant_exactness(3, torch.int64) == frozenset()
    assert tensor_exactness(torch.tensor([0.0, 0.5, float("nan")])) == both
    assert tensor_exactness(torch.tensor([0.0, 0.1])) == frozenset()
    half, wide, mask = ops.load("half", 0), ops.load("wide", 0), ops.load("mask", 0)
    assert half == (F16, {F16}) and wide == (F32, frozenset()) and mask == (F32, {BF16})
    assert ops.to_dtype(wide, BF16) == (BF16, {BF16})
    assert ops.to_dtype(half, F32) == (F32, {F16})
    assert ops.to_dtype(ops.to_dtype(half, F32), torch.int32)[1] == frozenset()
    # arithmetic in a narrow dtype gives one of its values; in float32 it does not
    assert ops.to_dtype(ops.add(half, half), F32) == (F32, {F16})
    assert ops.add(ops.to_dtype(half, F32), ops.to_dtype(half, F32))[1] == frozenset()
    cond = ops.gt(wide, ops.constant(0.0, F32))
    assert cond[0] == torch.bool
    assert ops.where(cond, mask, ops.constant(0.0, F32)) == (F32, {BF16})
    assert ops.where(cond, mask, ops.constant(0.1, F32))[1] == frozenset()
    assert ops.neg(ops.to_dtype(half, F32)) == (F32, {F16})
    assert ops.maximum(mask, ops.to_dtype(half, F32))[1] == frozenset()
