"""The verifier accepts lowered graphs and catches malformed IR."""

import pytest
import torch

from conftest import compile_and_run
from ember_inductor_ir import VerificationError, verify
from ember_inductor_ir.layout import contiguous_layout
from ember_inductor_ir.nodes import ComputedBuffer, Pointwise
from ember_primops import prims


def _lowered():
    lowering, _, _ = compile_and_run(lambda a: (prims.exp(a),), torch.randn(2, 3))
    return lowering


def _add_buffer(lowering, inner_fn, dtype=torch.float32):
    body = Pointwise(torch.device("cpu"), dtype, inner_fn, [2, 3])
    buf = ComputedBuffer("bad0", contiguous_layout(body.device, dtype, [2, 3]), data=body)
    lowering.buffers[buf.name] = buf
    lowering.operations.append(buf)


def test_lowered_graph_verifies():
    verify(_lowered())


def test_load_of_unknown_buffer():
    lowering = _lowered()
    _add_buffer(lowering, lambda ops, i: ops.load("nowhere", i[0]))
    with pytest.raises(VerificationError, match="nowhere"):
        verify(lowering)


def test_mixed_dtypes():
    lowering = _lowered()
    arg = lowering.graph_inputs[0]
    _add_buffer(lowering, lambda ops, i: ops.add(ops.load(arg, i[0]), ops.constant(1, torch.int64)))
    with pytest.raises(VerificationError, match="mixed dtypes"):
        verify(lowering)


def test_body_dtype_differs_from_buffer():
    lowering = _lowered()
    arg = lowering.graph_inputs[0]
    _add_buffer(lowering, lambda ops, i: ops.load(arg, 3 * i[0] + i[1]), dtype=torch.int32)
    with pytest.raises(VerificationError, match="produces"):
        verify(lowering)


def test_unknown_index_variable():
    import sympy

    lowering = _lowered()
    arg = lowering.graph_inputs[0]
    _add_buffer(lowering, lambda ops, i: ops.load(arg, sympy.Symbol("zz", integer=True)))
    with pytest.raises(VerificationError, match="unknown vars"):
        verify(lowering)
