"""Float32 CPU matmuls through oneDNN's linear primitive instead of aten's mm (MKL).

On this project's AMD EPYC (AVX-512, one thread) MKL's sgemm over 128 rows reaches 30-40
GF/s where oneDNN's JIT kernels reach 1.1-2.5x that for ``x @ W.t()`` with ``x`` row-major:
a transformer's projections (128 x 768 x 3072: 7.1 -> 6.0 ms) and above all its
vocabulary head (128 x 768 x 50257: 161 -> 101 ms). With ``x`` transposed (a weight gradient,
``g.t() @ x`` over a short batch) oneDNN is slower (0.6-0.8x), so that case keeps mm.
Eager and torch.compile both call mm there, which is where this choice gains on them.

Whether oneDNN pays is a property of the CPU (on Intel CPUs, where MKL is strong, it may
not): ``EMBER_CPU_ONEDNN_MM=auto`` (the default) measures it once per CPU model, torch
version and thread count on a few transformer-shaped products (``calibrate``, ~0.1-0.5 s,
kept on disk under the cache root), ``1`` routes without measuring, ``0`` never routes.
The choice is made once, when the wrapper is generated, from the static layouts of the
operands (``use_onednn``); the call itself checks nothing. oneDNN returns a fresh tensor:
where the buffer is row-major at offset 0 that tensor becomes the buffer (``onednn_mm``,
the storage the plan gave it released), else it is copied into the planned buffer
(``onednn_mm_out``: a pass over the result, a third of a weight gradient's product).
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import time
from typing import Any

import torch

from ember_codegen.cache import atomic_write, default_cache_root, ensure_private_dir
from ember_codegen.exc import CodegenError
from ember_codegen.wrapper.size_bindings import concrete, is_symbolic
from ember_inductor_ir.layout import Layout

log = logging.getLogger("ember.codegen")

#: Products with fewer multiply-adds stay with mm: oneDNN's per-call dispatch (~5-10 us)
#: is a visible part of them, and MKL's small-matrix paths are good.
MIN_MACS = 1 << 22
#: The rows where MKL is weak here: at 128 rows it reaches ~40 GF/s, oneDNN ~100; at 512
#: rows both ~95 (ratios 0.95-1.12), at 32 and at 1024 (K = 256) oneDNN is slower
#: (0.8-1.0x, 0.9x; the zoo's rnn). Outside these bounds mm keeps the product.
MIN_ROWS = 64
MAX_ROWS = 256
#: Which extern ops may be routed (their operands: (bias,) a, b).
ROUTABLE = frozenset({"mm", "addmm"})


def _linear_op() -> Any:
    """oneDNN's linear (``mkldnn::_linear_pointwise``), or None where torch lacks it."""
    if not torch.backends.mkldnn.is_available():
        return None
    try:
        return torch.ops.mkldnn._linear_pointwise.default
    except (AttributeError, RuntimeError):
        return None


LINEAR = _linear_op()
#: Whether new wrappers may route products here at all (``EMBER_CPU_ONEDNN_MM=0``: no).
#: Wrappers written before, in the on-disk cache, keep their calls: the runtime functions
#: work either way wherever torch has oneDNN.
ENABLED = LINEAR is not None and os.environ.get("EMBER_CPU_ONEDNN_MM", "auto") != "0"
#: (rows, K, N) of the calibration: a transformer's projections at MIN_ROWS..MAX_ROWS rows
CALIBRATION_PRODUCTS = (
    (128, 768, 768), (128, 768, 3072), (128, 3072, 768), (256, 1024, 1024), (128, 768, 8192),
)  # fmt: skip
#: oneDNN must take at most this fraction of mm's time (geomean) to be used. On this
#: project's AMD EPYC at one thread the products above measure 0.80-0.93 (their geomean
#: ~0.88, repeatably); the margin below 1 keeps a noisy tie with MKL on mm.
PAYS_BELOW = 0.95
_verdicts: dict[str, bool] = {}


def _cpu_key() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            model = next(
                (ln.split(":", 1)[1].strip() for ln in info if ln.startswith("model name")), model
            )
    except OSError:
        pass
    return f"{model} | torch {torch.__version__} | {torch.get_num_threads()} threads"


def _time_product(op: Any, a: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> float:
    start = time.perf_counter()
    op(a, w, out)
    return time.perf_counter() - start


def calibrate() -> float:
    """oneDNN's time over mm's (geomean over CALIBRATION_PRODUCTS, best of 3 alternating
    runs each after a warm-up) at the current thread count."""
    ratios = []
    for rows, k, n in CALIBRATION_PRODUCTS:
        a, w, out = torch.randn(rows, k), torch.randn(n, k), torch.empty(rows, n)
        runs = {
            "mm": lambda a, w, out: torch.mm(a, w.t(), out=out),
            "dnn": lambda a, w, out: LINEAR(a, w, None, "none", [], ""),
        }
        best = {name: math.inf for name in runs}
        for round_ in range(4):
            for name, op in runs.items():
                seconds = _time_product(op, a, w, out)
                if round_:  # round 0 warms both up
                    best[name] = min(best[name], seconds)
        ratios.append(best["dnn"] / best["mm"])
    return math.exp(sum(map(math.log, ratios)) / len(ratios))


def onednn_pays() -> bool:
    """Whether routing pays on this CPU at this thread count (see the module docstring)."""
    setting = os.environ.get("EMBER_CPU_ONEDNN_MM", "auto")
    if not ENABLED or setting == "0":
        return False
    if setting == "1":
        return True
    key = _cpu_key()
    if key not in _verdicts:
        _verdicts[key] = _stored_or_measured(key)
    return _verdicts[key]


def _stored_or_measured(key: str) -> bool:
    folder = default_cache_root() / "onednn_probe"
    path = folder / "verdicts.json"
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        stored = {}
    if isinstance(stored.get(key), dict) and "ratio" in stored[key]:
        return stored[key]["ratio"] <= PAYS_BELOW
    ratio = calibrate()
    log.info("oneDNN over mm on %s: %.3f (routes products: %s)", key, ratio, ratio <= PAYS_BELOW)
    try:
        ensure_private_dir(folder)
        atomic_write(path, json.dumps({**stored, key: {"ratio": ratio}}, indent=1).encode())
    except (OSError, CodegenError) as error:  # unstored: measured again next process
        log.info("oneDNN calibration not stored: %s", error)
    return ratio <= PAYS_BELOW


def onednn_mm_out(a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    """``torch.mm(a, b, out=out)`` computed by oneDNN (``b`` is a weight read transposed)."""
    return out.copy_(LINEAR(a, b.t(), None, "none", [], ""))


def onednn_addmm_out(
    bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor
) -> torch.Tensor:
    """``torch.addmm(bias, a, b, out=out)`` for a 1-D ``bias``, computed by oneDNN."""
    return out.copy_(LINEAR(a, b.t(), bias, "none", [], ""))


def onednn_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``torch.mm(a, b)`` by oneDNN, a fresh row-major result."""
    return LINEAR(a, b.t(), None, "none", [], "")


def onednn_addmm(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``torch.addmm(bias, a, b)`` for a 1-D ``bias`` by oneDNN, a fresh row-major result."""
    return LINEAR(a, b.t(), bias, "none", [], "")


#: runtime names -> functions (runtime_namespace)
RUNTIME_FUNCTIONS: dict[str, Any] = {
    "_dnn_mm_out": onednn_mm_out,
    "_dnn_addmm_out": onednn_addmm_out,
    "_dnn_mm": onednn_mm,
    "_dnn_addmm": onednn_addmm,
}
#: extern op -> the runtime name that replaces its out variant (the result copied into
#: the planned buffer) and the one whose fresh result becomes the buffer
RUNTIME_NAMES: dict[str, str] = {"mm": "_dnn_mm_out", "addmm": "_dnn_addmm_out"}
FRESH_NAMES: dict[str, str] = {"mm": "_dnn_mm", "addmm": "_dnn_addmm"}


def _ints(values: Any) -> tuple[int, ...] | None:
    if any(is_symbolic(v) for v in values):
        return None
    return tuple(concrete(v) for v in values)


def use_onednn(kernel_name: str, layouts: list[Layout | None], kwargs: dict[str, Any]) -> bool:
    """Whether the wrapper calls oneDNN for this mm/addmm, given its operands' layouts
    (``None`` for a non-tensor argument): float32 on the CPU, static sizes, ``a`` row-major with
    ``MIN_ROWS`` to ``MAX_ROWS`` rows and ``MIN_MACS`` multiply-adds, an addmm's bias one
    row of ``N`` with unit alpha and beta."""
    if not ENABLED or kernel_name not in ROUTABLE:
        return False
    if kernel_name == "addmm":
        if kwargs.get("beta", 1) != 1 or kwargs.get("alpha", 1) != 1 or len(layouts) != 3:
            return False
        bias, a, b = layouts
    else:
        if kwargs or len(layouts) != 2:
            return False
        bias, (a, b) = None, layouts
    if a is None or b is None or a.dtype != torch.float32 or b.dtype != torch.float32:
        return False
    if a.device.type != "cpu" or b.device.type != "cpu":  # the Triton wrapper shares this builder
        return False
    a_size, a_stride = _ints(a.size), _ints(a.stride)
    b_size = _ints(b.size)
    if a_size is None or a_stride is None or b_size is None or len(a_size) != 2:
        return False
    (m, k), n = a_size, b_size[-1]
    if a_stride != (k, 1) or not MIN_ROWS <= m <= MAX_ROWS or m * k * n < MIN_MACS:
        return False
    if bias is not None:
        bias_size, bias_stride = _ints(bias.size), _ints(bias.stride)
        if bias.dtype != torch.float32 or bias_size != (n,) or bias_stride != (1,):
            return False
    return onednn_pays()
