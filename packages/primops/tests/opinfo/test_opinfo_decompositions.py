"""OpInfo-generated checks: each op_db entry's samples under DecomposeMode(strict) vs eager.

The plain run covers a representative subset (float32 and float64, a few samples each);
``EMBER_OPINFO=full`` runs every CPU float entry with every dtype (float32, float64, bfloat16
where supported) and every sample; there, entries in ``known_failures.KNOWN_FAILURES`` are
strict xfails, so a fix shows up as XPASS. A failure message is a one-line repro.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import cpu_float_ops, op_key, run_op
from known_failures import KNOWN_FAILURES

FULL = os.environ.get("EMBER_OPINFO") == "full"

# One or more entries per decomposition family: elementwise, promotion, pointwise compounds,
# reductions, scans, views, shape, creation, indexing, matmul, nn, losses, linalg, fft, random.
REPRESENTATIVE = {
    "abs",
    "add",
    "mul",
    "div.no_rounding_mode",
    "div.floor_rounding",
    "sub",
    "pow",
    "exp",
    "log1p",
    "sigmoid",
    "erfinv",
    "atan2",
    "remainder",
    "fmod",
    "maximum",
    "eq",
    "lt",
    "clamp",
    "where",
    "lerp",
    "addcmul",
    "nan_to_num",
    "xlogy",
    "logaddexp",
    "isnan",
    "sum",
    "mean",
    "prod",
    "amax",
    "argmax",
    "var",
    "std_mean",
    "logsumexp",
    "any",
    "all",
    "linalg.vector_norm",
    "cumsum",
    "cummax",
    "sort",
    "topk",
    "median",
    "kthvalue",
    "view",
    "reshape",
    "permute",
    "transpose",
    "expand",
    "squeeze",
    "unsqueeze",
    "narrow",
    "select",
    "diagonal",
    "as_strided",
    "unfold",
    "split",
    "unbind",
    "t",
    "flatten",
    "cat",
    "stack",
    "flip",
    "roll",
    "repeat",
    "tril",
    "triu",
    "constant_pad_nd",
    "slice_scatter",
    "diagonal_scatter",
    "zeros_like",
    "full",
    "arange",
    "linspace",
    "eye",
    "to",
    "clone",
    "gather",
    "scatter",
    "scatter_add",
    "scatter_reduce.sum",
    "index_select",
    "index_put",
    "index_add",
    "take",
    "masked_fill",
    "masked_scatter",
    "mm",
    "bmm",
    "addmm",
    "matmul",
    "dot",
    "einsum",
    "softmax",
    "log_softmax",
    "nn.functional.gelu",
    "nn.functional.silu",
    "nn.functional.relu",
    "nn.functional.layer_norm",
    "nn.functional.batch_norm",
    "nn.functional.group_norm",
    "nn.functional.embedding",
    "nn.functional.conv2d",
    "nn.functional.max_pool2d",
    "nn.functional.avg_pool2d",
    "nn.functional.adaptive_avg_pool2d",
    "nn.functional.interpolate.bilinear",
    "nn.functional.interpolate.bicubic",
    "nn.functional.pad.reflect",
    "nn.functional.cross_entropy",
    "nn.functional.mse_loss",
    "nn.functional.binary_cross_entropy_with_logits",
    "nn.functional.dropout",
    "nn.functional.scaled_dot_product_attention",
    "linalg.solve",
    "linalg.cholesky",
    "linalg.pinv",
    "fft.fft",
    "fft.rfft",
    "bernoulli",
    "normal",
    "_softmax_backward_data",
}


def _selected():
    ops = cpu_float_ops()
    if not FULL:
        ops = [op for op in ops if op_key(op) in REPRESENTATIVE]
    return ops


def _params():
    for op in _selected():
        key = op_key(op)
        marks = []
        if FULL and key in KNOWN_FAILURES:  # the subset's dtypes/samples may not hit them
            marks.append(pytest.mark.xfail(reason=KNOWN_FAILURES[key], strict=True))
        yield pytest.param(op, id=key, marks=marks)


@pytest.mark.parametrize("op", _params())
def test_decomposition_matches_eager(op):
    dtypes = (
        None
        if FULL
        else [d for d in (torch.float32, torch.float64) if d in op.supported_dtypes("cpu")]
    )
    outcome = run_op(op, max_samples=None if FULL else 3, dtypes=dtypes)
    if outcome.status == "skipped":
        pytest.skip(outcome.detail)
    assert outcome.status in ("pass", "pass_metadata"), outcome.repro(op_key(op))


def test_representative_subset_names_exist():
    """A renamed op_db entry must not silently drop out of the plain run."""
    keys = {op_key(op) for op in cpu_float_ops()}
    assert keys >= REPRESENTATIVE, sorted(REPRESENTATIVE - keys)
