"""Run one OpInfo entry's samples eagerly and under DecomposeMode(strict) and compare.

Shared by the pytest module (test_opinfo_decompositions.py) and the sweep script (sweep.py).
"""

from __future__ import annotations

import dataclasses
import warnings

import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from ember_primops.decompose_mode import DecomposeMode, MissingDecomposition

DTYPES = (torch.float32, torch.float64, torch.bfloat16)
TOLERANCES = {  # (rtol, atol): decompositions may reassociate, so looser than eager-vs-eager
    torch.float32: (1e-4, 1e-4),
    torch.float64: (1e-7, 1e-7),
    torch.bfloat16: (3e-2, 3e-2),  # one bf16 ulp at magnitude 4 is 0.03
}
# Entries that cannot run on CPU at all (their sample generation asserts a GPU).
CPU_IMPOSSIBLE = {
    "jiterator_unary",
    "jiterator_binary",
    "jiterator_4inputs_with_extra_args",
    "jiterator_binary_return_by_ref",
    "jiterator_2inputs_2outputs",
}
# Entries whose results are unspecified (uninitialized memory): compare metadata only.
UNDEFINED_VALUES = {
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "empty_permuted",
}


def op_key(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def cpu_float_ops() -> list:
    """The denominator: op_db entries supporting float32 or float64 on CPU, runnable on CPU."""
    out = []
    for op in op_db:
        supported = op.supported_dtypes("cpu")
        if (torch.float32 in supported or torch.float64 in supported) and (
            op.name not in CPU_IMPOSSIBLE
        ):
            out.append(op)
    return out


def dtypes_for(op) -> list[torch.dtype]:
    supported = op.supported_dtypes("cpu")
    return [d for d in DTYPES if d in supported]


@dataclasses.dataclass
class Outcome:
    status: str  # pass | pass_metadata | missing | mismatch | error | skipped
    detail: str = ""
    dtype: torch.dtype | None = None
    sample: int = -1
    shapes: str = ""

    def repro(self, key: str) -> str:
        return (
            f"REPRO op={key} dtype={self.dtype} sample={self.sample} shapes={self.shapes} "
            f":: {self.status}: {self.detail}  (rerun: EMBER_OPINFO_OPS={key} "
            "python packages/primops/tests/opinfo/sweep.py -v)"
        )


class _Recorder(TorchDispatchMode):
    """Notes whether eager drew random numbers (then only metadata can be compared)."""

    def __init__(self):
        super().__init__()
        self.unspecified = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if torch.Tag.nondeterministic_seeded in func.tags:
            self.unspecified = True
        return func(*args, **(kwargs or {}))


def _clone(x):
    return pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, x)


def _shapes(sample) -> str:
    items = [sample.input, *sample.args, *sample.kwargs.values()]
    leaves = pytree.tree_leaves(items)
    return ",".join(
        f"{list(t.shape)}" if isinstance(t, torch.Tensor) else repr(t)[:20] for t in leaves
    )[:160]


def _compare(expected, actual, dtype, metadata_only: bool) -> str | None:
    exp_leaves, exp_spec = pytree.tree_flatten(expected)
    act_leaves, act_spec = pytree.tree_flatten(actual)
    if len(exp_leaves) != len(act_leaves):
        return f"output structure {exp_spec} != {act_spec}"
    rtol, atol = TOLERANCES.get(dtype, (1e-5, 1e-5))
    for i, (e, a) in enumerate(zip(exp_leaves, act_leaves, strict=True)):
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                return f"output {i}: expected a tensor, got {type(a).__name__}"
            if e.shape != a.shape or e.dtype != a.dtype:
                return f"output {i}: {e.dtype}{list(e.shape)} != {a.dtype}{list(a.shape)}"
            if metadata_only:
                continue
            try:
                torch.testing.assert_close(
                    a, e, rtol=rtol, atol=atol, equal_nan=True, check_stride=False
                )
            except AssertionError as err:
                lines = [ln for ln in str(err).splitlines() if ln.strip()]
                return f"output {i}: " + " | ".join(lines[:3])
        elif e != a and not (isinstance(e, float) and e != e and a != a):
            return f"output {i}: {e!r} != {a!r}"
    return None


def run_op(op, max_samples: int | None = None, dtypes=None) -> Outcome:
    """Check every (dtype, sample) of ``op``; the first failure, else pass."""
    ran = 0
    metadata_only_any = False
    for dtype in dtypes or dtypes_for(op):
        try:
            samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))
        except Exception as err:
            return Outcome("skipped", f"sample generation failed: {err!r}"[:200], dtype)
        for index, sample in enumerate(samples[:max_samples]):
            recorder = _Recorder()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    torch.manual_seed(0)
                    with recorder:
                        expected = op(
                            *_clone((sample.input, *sample.args)), **_clone(sample.kwargs)
                        )
                except Exception:
                    continue
                mode = DecomposeMode(strict=True)
                try:
                    torch.manual_seed(0)
                    with mode:
                        actual = op(*_clone((sample.input, *sample.args)), **_clone(sample.kwargs))
                except MissingDecomposition as err:
                    return Outcome("missing", str(err.op), dtype, index, _shapes(sample))
                except Exception as err:
                    return Outcome(
                        "error", f"{type(err).__name__}: {err}"[:300], dtype, index, _shapes(sample)
                    )
            unspecified = recorder.unspecified or op.name in UNDEFINED_VALUES
            problem = _compare(expected, actual, dtype, unspecified)
            if problem is not None:
                return Outcome("mismatch", problem[:300], dtype, index, _shapes(sample))
            ran += 1
            metadata_only_any |= unspecified
    if ran == 0:
        return Outcome("skipped", "eager accepted no sample")
    return Outcome("pass_metadata" if metadata_only_any else "pass")
