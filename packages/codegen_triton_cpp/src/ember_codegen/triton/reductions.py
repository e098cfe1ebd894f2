"""Reduction kinds of the Triton target: one registry entry per reduction type.

An entry says what a lane accumulates in (``acc_type``), the identity that masked lanes
hold, how two lanes combine (an expression, used by looped reductions lane by lane) and
how a whole tile is reduced along its reduction axis (``tile``: used by persistent
reductions, at the end of looped ones and over the partials of split ones). Floating
sums, products and Welford accumulate in float32 (float64 for float64). ``argmax`` /
``argmin`` and ``welford`` carry several tensors and are handled by kernel.py around the
helpers ``_em_arg*_combine`` / ``_em_welford_combine`` (helpers.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ember_codegen.exc import CodegenError

from .dtypes import compute_type, is_integer, python_literal


@dataclass(frozen=True)
class ReductionKind:
    acc_type: Callable[[torch.dtype, torch.dtype], str]  # (dtype, src_dtype) -> Triton type
    identity: Callable[[torch.dtype, torch.dtype], str]  # -> Python literal
    combine: Callable[[str, str], str]  # (acc, value) -> expression
    tile: Callable[[str], str]  # tile -> reduced along axis 1, keep_dims


REDUCTIONS: dict[str, ReductionKind] = {}


def register_reduction(*names: str) -> Callable[[ReductionKind], ReductionKind]:
    def register(kind: ReductionKind) -> ReductionKind:
        for name in names:
            REDUCTIONS[name] = kind
        return kind

    return register


def reduction_kind(reduction_type: str) -> ReductionKind:
    try:
        return REDUCTIONS[reduction_type]
    except KeyError:
        raise CodegenError(
            f"the Triton target has no reduction {reduction_type!r}; known: "
            f"{', '.join(sorted([*REDUCTIONS, 'argmax', 'argmin', 'welford']))}"
        ) from None


def wide_type(dtype: torch.dtype) -> str:
    """Floating accumulations run in float32 (float64 stays float64)."""
    if dtype == torch.float64:
        return "tl.float64"
    if dtype.is_floating_point:
        return "tl.float32"
    return compute_type(dtype)


def _reduce_with(fn: str) -> Callable[[str], str]:
    # helpers.py: _em_reduce_<name>(tile) = tl.reduce(tile, 1, combine, keep_dims=True)
    return lambda tile: f"_em_reduce_{fn.removeprefix('_em_')}({tile})"


register_reduction("sum")(
    ReductionKind(
        lambda dtype, src: wide_type(dtype),
        lambda dtype, src: python_literal(0, dtype),
        lambda acc, v: f"({acc} + {v})",
        lambda tile: f"tl.sum({tile}, 1, keep_dims=True)",
    )
)
register_reduction("prod")(
    ReductionKind(
        lambda dtype, src: wide_type(dtype),
        lambda dtype, src: python_literal(1, dtype),
        lambda acc, v: f"({acc} * {v})",
        _reduce_with("_em_mul"),
    )
)


def extreme(dtype: torch.dtype, largest: bool) -> str:
    """The identity of min (largest=True) or max (largest=False) for ``dtype``."""
    if dtype == torch.bool:
        return "True" if largest else "False"
    if is_integer(dtype):
        info = torch.iinfo(dtype)
        return str(info.max if largest else info.min)
    return 'float("inf")' if largest else 'float("-inf")'


register_reduction("max")(
    ReductionKind(
        lambda dtype, src: compute_type(dtype),
        lambda dtype, src: extreme(dtype, largest=False),
        lambda acc, v: f"_em_maximum({acc}, {v})",
        _reduce_with("_em_maximum"),
    )
)
register_reduction("min")(
    ReductionKind(
        lambda dtype, src: compute_type(dtype),
        lambda dtype, src: extreme(dtype, largest=True),
        lambda acc, v: f"_em_minimum({acc}, {v})",
        _reduce_with("_em_minimum"),
    )
)
register_reduction("any")(
    ReductionKind(
        lambda dtype, src: "tl.int1",
        lambda dtype, src: "False",
        lambda acc, v: f"({acc} | {v})",
        _reduce_with("_em_or"),
    )
)
register_reduction("all")(
    ReductionKind(
        lambda dtype, src: "tl.int1",
        lambda dtype, src: "True",
        lambda acc, v: f"({acc} & {v})",
        _reduce_with("_em_and"),
    )
)
register_reduction("xor_sum")(
    ReductionKind(
        lambda dtype, src: compute_type(dtype),
        lambda dtype, src: "0",
        lambda acc, v: f"({acc} ^ {v})",
        _reduce_with("_em_xor"),
    )
)

#: argmax/argmin: masked lanes and fresh accumulators hold this index, so a real element
#: always wins a tie against them
ARG_SENTINEL = 2**62
