"""One suite model through Ember on the GPU under variants that switch one code-generation
choice back each (a fresh process per variant), to find which choice a failure (a CUDA
error, a mismatch) comes from:

    CUDA_LAUNCH_BLOCKING=1 python tools/gpu/bisect_variants.py --model inception_v3 \
        --mode infer-fp32 --variants base,no_window,old_votes
    python tools/gpu/bisect_variants.py --model resnet50 --mode train-bf16 \
        --variants base,no_window,no_narrow,no_combine   # ms a step and peak MB of each

A variant is a name in VARIANTS: a function run before the model compiles.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

SUITES = Path(__file__).resolve().parents[2] / "benchmarks" / "suites"
sys.path.insert(0, str(SUITES))


def _no_window() -> None:
    from ember_codegen.triton import heuristics

    heuristics.WINDOW_MAX_ROW = 0


def _old_votes() -> None:
    from ember_inductor_ir import graph
    from ember_inductor_ir.layout import is_channels_last

    graph._order_vote = lambda layout: (
        1 if is_channels_last(layout) else -1 if layout.is_contiguous() else 0
    )


def _no_combine() -> None:
    import os

    os.environ["EMBER_TRITON_COMBINE"] = "0"


def _no_gather_store() -> None:
    from ember_inductor_ir import graph

    graph.STORE_BROADCAST_GATHERS = False


def _long_row_tiles() -> None:
    """Short persistent rows in the tiles longer rows get (heuristics.SHORT_ROW_MAX = 0)."""
    from ember_codegen.triton import heuristics

    heuristics.SHORT_ROW_MAX = 0


def _no_full_reads_rule() -> None:
    """Shared pointwise values stored by their op count only (graph.MAX_SHARED_FULL_READS off)."""
    from ember_inductor_ir import graph

    graph.MAX_SHARED_FULL_READS = 10**9


def _narrow_stem_nhwc() -> None:
    """A stem of three channels into at most 32 runs channels-last again (before 2026-12-01
    only one no convolution reads kept eager's layout): the A/B of the stem rule."""
    from ember_inductor_ir.lowering import convolution

    convolution.SLOW_NHWC["image_input"] = lambda node, shape: False


def _recomputed_values_early() -> None:
    """A backward's recomputed values made at its start, fused into the first group that
    makes their inputs (before 2026-12-01: ViT's training backward planned 1237 MB, 812 since)."""
    import sys

    import ember_inductor_ir.scheduler.schedule  # noqa: F401  (the module, not the function)
    from ember_aot_autograd.partition import common

    common.SINK_RECOMPUTED = False
    sys.modules["ember_inductor_ir.scheduler.schedule"].MAX_HOISTED_EXTERNS = 10**9


def _recompute_library_operands() -> None:
    """Forward values a backward matmul or convolution gradient reads recomputed in the
    backward, not saved (aot min-cut: SAVE_LIBRARY_OPERANDS off; on since the A/B of
    2026-12-02, stats_ab.sh group 1)."""
    from ember_aot_autograd.partition import mincut

    mincut.SAVE_LIBRARY_OPERANDS = False


def _statistics_inline() -> None:
    """A reduction's per-channel divisions and roots recomputed for every element of their
    broadcast reader (graph.STATISTIC_BROADCAST_MIN off), and a split reduction's index
    int64 when NSPLIT times its row passes int32 (kernel.SPLIT_BOUND_BY_CHUNKS off): both as
    before 2026-12-02."""
    from ember_codegen.triton import kernel
    from ember_inductor_ir import graph

    graph.STATISTIC_BROADCAST_MIN = 0
    kernel.SPLIT_BOUND_BY_CHUNKS = False


def _statistics_inline_only() -> None:
    """Only the per-channel divisions and roots recomputed per element (split bound as now)."""
    from ember_inductor_ir import graph

    graph.STATISTIC_BROADCAST_MIN = 0


def _split_bound_by_rows() -> None:
    """Only the split reduction's int32 bound as NSPLIT times its row (statistics stored)."""
    from ember_codegen.triton import kernel

    kernel.SPLIT_BOUND_BY_CHUNKS = False


def _program_order() -> None:
    """A group's nodes in program order (scheduler/pass_order.py off): a statistic stored
    between two reductions over one row cuts their pass in two."""
    import importlib

    module = importlib.import_module("ember_inductor_ir.scheduler.schedule")
    module.in_pass_order = lambda nodes, accesses: nodes


def _welford_reciprocal() -> None:
    """A looped Welford update multiplies by one reciprocal of its pass's count."""
    from ember_codegen.triton import reduction_emit

    reduction_emit.WELFORD_RECIPROCAL_A_PASS = True


def _pool_scatter() -> None:
    """A max pool's backward as aten's scatter-add (zeros, then an atomic add a window),
    not each input element gathering its windows (decompositions/pool_backward.py)."""
    from ember_primops.decompositions import pool_backward

    pool_backward.MAX_GATHERED_WINDOWS = 0


def _saved_floats_only() -> None:
    """Only floating-point saved maps cross to the backward channels-last (before 018413b:
    a max pool's int8 window offsets crossed NCHW, and the backward's gather read them, and
    the index recomputed from them, element by element)."""
    from ember_inductor_ir import saved_layouts

    floats = saved_layouts._feature_map
    saved_layouts._feature_map = lambda val: floats(val) and val.dtype.is_floating_point


def _gathers_vote_by_walk() -> None:
    """A gathered read votes by its walk, as before 0101394: the indirect dims walk nothing,
    so it has no say, and a max pool's backward output was stored NCHW beside NHWC maps."""
    from ember_inductor_ir import graph

    graph._gathered = lambda index: False


def _target_with(**fields: object) -> None:
    """The Triton target re-registered with some capabilities changed."""
    from dataclasses import replace

    from ember_codegen.triton.target import TRITON_TARGET
    from ember_inductor_ir.target import register_target

    register_target(replace(TRITON_TARGET, **fields))


VARIANTS = {
    "base": lambda: None,
    "no_window": _no_window,
    "old_votes": _old_votes,
    "no_combine": _no_combine,
    "no_narrow": lambda: _target_with(narrow_stores=False),
    "no_conv_bias": lambda: _target_with(conv_bias_in_kernels=False),
    # shared pointwise values up to 32 ops a point recomputed in each reader (16: stored):
    # a ResNet-50 backward's masked, widened gradient (20 ops, the batch norm's forward
    # recomputed for the ReLU mask) is then no kernel of its own before the batch-norm
    # backward's reduction and pointwise kernel, which read the same inputs anyway
    "inline32": lambda: _target_with(inline_op_limit=32),
    # a gather a reader broadcasts recomputed in that reader (graph.py: STORE_BROADCAST_GATHERS)
    "no_gather_store": _no_gather_store,
    "long_row_tiles": _long_row_tiles,
    # a shared value reading three whole buffers recomputed in each reader, not stored
    "no_full_reads": _no_full_reads_rule,
    # a narrow stem (3 -> at most 32 channels) channels-last, its images copied NHWC first
    "stem_nhwc": _narrow_stem_nhwc,
    # a backward's recomputed values at its start, in the first group making their inputs
    "recompute_early": _recomputed_values_early,
    # batch-norm statistics' divisions and roots per element, split reductions int64
    "stats_inline": _statistics_inline,
    "stats_only_inline": _statistics_inline_only,
    "split_by_rows": _split_bound_by_rows,
    "program_order": _program_order,
    "welford_reciprocal": _welford_reciprocal,
    "pool_scatter": _pool_scatter,
    "saved_floats_only": _saved_floats_only,
    "gathers_vote_by_walk": _gathers_vote_by_walk,
    # what a backward library op reads saved, not recomputed (more memory, fewer passes)
    "recompute_library_operands": _recompute_library_operands,
}


def run_variant(args: argparse.Namespace) -> None:
    import torch

    VARIANTS[args.variant]()
    from cases import BUILDERS, to_device
    from models import entries
    from run import TOLERANCE, _peak_mb, compare, make_step

    case = to_device(BUILDERS[args.suite](entries(args.suite, [args.model])[0], "gpu"), "cuda")
    case.model.train(args.mode.startswith("train"))
    ref = make_step(case, "eager", args.mode, "cuda")()
    try:
        step = make_step(case, "ember", args.mode, "cuda")
        got = step()  # the first step: from the weights eager's step started from
        torch.cuda.synchronize()
        worst, ok = compare(got, ref, *TOLERANCE[args.mode])
        step()  # warm-up
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()
        ms = (time.perf_counter() - start) * 1000 / max(args.steps, 1)
        peak = _peak_mb(step, "cuda")
        print(f"{args.variant}: {'ok' if ok else 'MISMATCH'} worst {worst:.3g}, {ms:.2f} ms a step, "
              f"peak {peak:.1f} MB", flush=True)  # fmt: skip
    except Exception as exc:  # the failure is what is being looked for
        tail = traceback.format_exc().splitlines()[-12:]
        print(f"{args.variant}: FAILED {type(exc).__name__}: {exc}".splitlines()[0])
        print("\n".join("   " + line for line in tail), flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--suite", default="timm")
    p.add_argument("--model", required=True)
    p.add_argument("--mode", default="infer-fp32")
    p.add_argument("--variants", default="base")
    p.add_argument("--variant")
    p.add_argument("--timeout", type=float, default=240)
    p.add_argument("--steps", type=int, default=10, help="timed steps after the check")
    args = p.parse_args()
    if args.variant:
        return run_variant(args)
    cache_root = tempfile.mkdtemp(prefix="ember-bisect-")
    for name in args.variants.split(","):
        cmd = [sys.executable, __file__, "--suite", args.suite, "--model", args.model,
               "--mode", args.mode, "--variant", name, "--steps", str(args.steps)]  # fmt: skip
        # each variant its own cache: a variant that changes the lowering or the launch
        # configs but neither the prim graph nor the target would hit another's kernels
        env = {**os.environ, "EMBER_CACHE_DIR": f"{cache_root}/variant-{name}"}
        try:
            subprocess.run(cmd, timeout=args.timeout, check=False, env=env)
        except subprocess.TimeoutExpired:
            print(f"{name}: timed out after {args.timeout:.0f} s", flush=True)
    return None


if __name__ == "__main__":
    main()
