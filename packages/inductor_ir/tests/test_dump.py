"""The readable dump is stable (same text every run) and logged on ember.ir."""

import logging

import torch

from conftest import compile_and_run
from ember_inductor_ir import dump_lowering
from ember_primops import prims

EXPECTED = """\
# inputs
arg0: float32[4, 12] stride [12, 1] cpu (input 0)
# operations
buf0: float32[4, 12] stride [12, 1] cpu = Pointwise, loops [4, 12]  # exp_default
    tmp0 = load(arg0, 12*i0 + i1)
    tmp1 = exp(tmp0)
    store(buf0, 12*i0 + i1, tmp1)
buf1: float32[4] stride [1] cpu = Reduction sum over [12], loops [4]  # sum_default
    tmp0 = load(buf0, 12*i0 + r0)
    tmp1 = reduction(float32, float32, 'sum', tmp0)
    store_reduction(buf1, i0, tmp1)
buf2: float32[4, 12] stride [12, 1] cpu = Pointwise, loops [4, 12]  # div_default
    tmp0 = load(buf0, 12*i0 + i1)
    tmp1 = load(buf1, i0)
    tmp2 = truediv(tmp0, tmp1)
    store(buf2, 12*i0 + i1, tmp2)
# outputs
buf2 as float32[4, 12] stride [12, 1] cpu"""


def _f(a):
    e = prims.exp(a)
    return (prims.div(e, prims.broadcast_in_dim(prims.sum(e, [1]), [4, 12], [0])),)


def test_dump_is_stable(caplog):
    with caplog.at_level(logging.INFO, logger="ember.ir"):
        lowering, _, _ = compile_and_run(_f, torch.randn(4, 12))
    assert dump_lowering(lowering) == EXPECTED
    assert any(EXPECTED in r.getMessage() for r in caplog.records)
    again, _, _ = compile_and_run(_f, torch.randn(4, 12))
    assert dump_lowering(again) == EXPECTED
