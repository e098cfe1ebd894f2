"""OpInfo-generated checks of the aot_eager and inductor backends against eager (float32).

Each op_db entry's samples are compiled with ``ember.compile(fn, backend=..., fullgraph=True)``
and the outputs compared with eager; under aot_eager, also the gradients of the inputs where
the entry supports autograd. The plain run covers a representative subset (a few samples per
entry); ``EMBER_OPINFO=full`` runs every CPU float entry (the first 16 samples, or
``EMBER_OPINFO_MAX_SAMPLES``: 0 for all), with the entries of
``known_failures.KNOWN_FAILURES`` as strict xfails (a fix shows up as XPASS). A failure message
is a one-line repro.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import cpu_float_ops, op_key, run_entry
from known_failures import KNOWN_FAILURES

FULL = os.environ.get("EMBER_OPINFO") == "full"
SUBSET_SAMPLES = 3
FULL_SAMPLES = int(os.environ.get("EMBER_OPINFO_MAX_SAMPLES", "16")) or None  # 0: all

# One entry per family: unary and binary pointwise, promotion, compounds, comparisons, where,
# reductions (plain, arg, welford), scans, views and shape ops, cat/stack, indexing, matmul
# (an extern kernel), nn (softmax, norms, losses, pooling, convolution, embedding), creation.
REPRESENTATIVE = {
    "abs",
    "add",
    "mul",
    "div.no_rounding_mode",
    "exp",
    "sigmoid",
    "pow",
    "clamp",
    "where",
    "lerp",
    "eq",
    "sum",
    "mean",
    "amax",
    "argmax",
    "var",
    "cumsum",
    "permute",
    "transpose",
    "expand",
    "reshape",
    "cat",
    "gather",
    "index_select",
    "mm",
    "nn.functional.softmax",
    "nn.functional.layer_norm",
    "nn.functional.mse_loss",
    "nn.functional.gelu",
    "zeros_like",
    "block_diag",
    "var_mean",
    "bmm",
    "nn.functional.conv2d",
    "nn.functional.embedding",
    "nn.functional.cross_entropy",
    "nn.functional.max_pool2d",
    "index_add",
}
# Entries that once raised instead of running (issue 14), kept in the plain run so they stay
# fixed: in-place view ops on temporaries (matmul/linear of a vector, quantile), and
# gradients that were wrong (det: aten's LU; index_reduce: a permuted in-place write; cumprod:
# max over bool; gather: an empty index).
ONCE_RAISED = {
    "matmul",
    "nn.functional.linear",
    "quantile",
    "linalg.det",
    "index_reduce.mean",
    "cumprod",
    "gather",
}
# Entries whose graph may run eagerly by a declared stage limitation (see ember's
# backends/eager_fallback.py): right results, counted in ember.counters["graph_fallbacks"];
# any other entry running eagerly fails.
RUNS_EAGERLY = {
    "linalg.inv",  # aten's info check reads tensor data (.item())
    "linalg.solve",
    "mvlgamma.mvlgamma_p_1",
    "linspace.tensor_overload",
    "resize_",  # changes a tensor's sizes in place
    "to_sparse",  # sparse tensors are not traced
    "index_put",  # a boolean-mask index (DataDependentIndex)
}
REPRESENTATIVE |= ONCE_RAISED | RUNS_EAGERLY

ENTRIES = [op for op in cpu_float_ops() if FULL or op_key(op) in REPRESENTATIVE]


@pytest.fixture(scope="module", autouse=True)
def _kernel_cache(tmp_path_factory):
    previous = os.environ.get("EMBER_CACHE_DIR")
    os.environ["EMBER_CACHE_DIR"] = str(tmp_path_factory.mktemp("ember-cache"))
    yield
    if previous is None:
        os.environ.pop("EMBER_CACHE_DIR", None)
    else:
        os.environ["EMBER_CACHE_DIR"] = previous


def _params(backend: str) -> list:
    params = []
    for op in ENTRIES:
        key = op_key(op)
        reason = KNOWN_FAILURES.get((backend, key))
        marks = [pytest.mark.xfail(reason=reason, strict=True)] if FULL and reason else []
        params.append(pytest.param(op, id=key, marks=marks))
    return params


def _check(op, backend: str) -> None:
    grads = backend == "aot_eager" and op.supports_autograd
    outcomes = run_entry(
        op, backend, grads=grads, max_samples=FULL_SAMPLES if FULL else SUBSET_SAMPLES
    )
    if all(o.status == "skipped" for o in outcomes.values()):
        pytest.skip(outcomes["forward"].detail)
    failures = [
        o.repro(op_key(op), backend, phase) for phase, o in outcomes.items() if o.status == "fail"
    ]
    assert not failures, "\n".join(failures)
    eager = [f"{phase}: {o.detail}" for phase, o in outcomes.items() if o.status == "eager"]
    if not FULL and op_key(op) not in RUNS_EAGERLY:  # the full sweep's table counts them
        assert not eager, f"{op_key(op)} ran eagerly: " + "; ".join(eager)


@pytest.mark.parametrize("op", _params("aot_eager"))
def test_aot_eager(op):
    _check(op, "aot_eager")


@pytest.mark.parametrize("op", _params("inductor"))
def test_inductor(op):
    _check(op, "inductor")
