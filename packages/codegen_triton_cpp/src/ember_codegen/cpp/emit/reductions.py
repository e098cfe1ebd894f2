"""Reduction accumulators: one entry per reduction type (how to declare, update, merge
per-thread partials and finish). Floating sums, products and Welford accumulate in double,
so long float32 reductions stay within eager's tolerance of its own cascade summation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ember_codegen.exc import CodegenError

from .dtypes import compute_type, cpp_literal, is_float


@dataclass(frozen=True)
class Accumulator:
    ctype: Callable[[torch.dtype, torch.dtype], str]  # (dtype, src_dtype) -> C++ type
    init: Callable[[torch.dtype, torch.dtype], str]  # -> initial value expression
    update: Callable[[str, str, str], str]  # (acc, value, linear rindex) -> new acc expr
    combine: Callable[[str, str], str]  # (lower partial, higher partial) -> merged expr
    finish: Callable[[str, torch.dtype], list[str]]  # (acc, dtype) -> result expressions


ACCUMULATORS: dict[str, Accumulator] = {}


def register_accumulator(*names: str) -> Callable[[Accumulator], Accumulator]:
    def register(acc: Accumulator) -> Accumulator:
        for name in names:
            ACCUMULATORS[name] = acc
        return acc

    return register


def accumulator(reduction_type: str) -> Accumulator:
    try:
        return ACCUMULATORS[reduction_type]
    except KeyError:
        raise CodegenError(
            f"the C++ target has no accumulator for reduction {reduction_type!r}; known: "
            f"{', '.join(sorted(ACCUMULATORS))}"
        ) from None


def _wide(dtype: torch.dtype, src_dtype: torch.dtype) -> str:
    """Floating accumulations run in double; integer and bool ones in the result type."""
    return "double" if is_float(dtype) else compute_type(dtype)


def _cast_finish(acc: str, dtype: torch.dtype) -> list[str]:
    return [f"static_cast<{compute_type(dtype)}>({acc})"]


def _sum_update(acc: str, value: str, _index: str) -> str:
    return f"{acc} + {value}"


register_accumulator("sum")(
    Accumulator(
        _wide,
        lambda dtype, src: "0" if dtype != torch.bool else "false",
        _sum_update,
        lambda a, b: f"{a} + {b}",
        _cast_finish,
    )
)
register_accumulator("prod")(
    Accumulator(
        _wide,
        lambda dtype, src: "1" if dtype != torch.bool else "true",
        lambda acc, value, _i: f"{acc} * {value}",
        lambda a, b: f"{a} * {b}",
        _cast_finish,
    )
)


def _extreme_init(largest: bool) -> Callable[[torch.dtype, torch.dtype], str]:
    def init(dtype: torch.dtype, src: torch.dtype) -> str:
        if dtype == torch.bool:
            return "true" if largest else "false"
        if is_float(dtype):
            return cpp_literal(float("inf") if largest else float("-inf"), dtype)
        info = torch.iinfo(dtype)
        return cpp_literal(info.max if largest else info.min, dtype)

    return init


register_accumulator("max")(
    Accumulator(
        lambda dtype, src: compute_type(dtype),
        _extreme_init(largest=False),
        lambda acc, value, _i: f"ember::maximum({acc}, {value})",
        lambda a, b: f"ember::maximum({a}, {b})",
        lambda acc, dtype: [acc],
    )
)
register_accumulator("min")(
    Accumulator(
        lambda dtype, src: compute_type(dtype),
        _extreme_init(largest=True),
        lambda acc, value, _i: f"ember::minimum({acc}, {value})",
        lambda a, b: f"ember::minimum({a}, {b})",
        lambda acc, dtype: [acc],
    )
)


def _arg(is_max: bool) -> Accumulator:
    flag = "true" if is_max else "false"
    return Accumulator(
        lambda dtype, src: f"ember_extra::ArgAcc<{compute_type(src)}>",
        lambda dtype, src: "{}",
        lambda acc, value, index: f"ember_extra::arg_update<{flag}>({acc}, {value}, {index})",
        lambda a, b: f"ember_extra::arg_combine<{flag}>({a}, {b})",
        lambda acc, dtype: [f"static_cast<{compute_type(dtype)}>({acc}.index)"],
    )


register_accumulator("argmax")(_arg(True))
register_accumulator("argmin")(_arg(False))
register_accumulator("any")(
    Accumulator(
        lambda dtype, src: "bool",
        lambda dtype, src: "false",
        lambda acc, value, _i: f"{acc} || {value}",
        lambda a, b: f"{a} || {b}",
        lambda acc, dtype: [acc],
    )
)
register_accumulator("all")(
    Accumulator(
        lambda dtype, src: "bool",
        lambda dtype, src: "true",
        lambda acc, value, _i: f"{acc} && {value}",
        lambda a, b: f"{a} && {b}",
        lambda acc, dtype: [acc],
    )
)
register_accumulator("xor_sum")(
    Accumulator(
        lambda dtype, src: compute_type(dtype),
        lambda dtype, src: "0",
        lambda acc, value, _i: f"{acc} ^ {value}",
        lambda a, b: f"{a} ^ {b}",
        _cast_finish,
    )
)


register_accumulator("welford")(
    Accumulator(
        lambda dtype, src: "ember::Welford<double>",
        lambda dtype, src: "{}",
        lambda acc, value, _i: f"ember::welford_update({acc}, static_cast<double>({value}))",
        lambda a, b: f"ember::welford_combine({a}, {b})",
        lambda acc, dtype: [
            f"static_cast<{compute_type(dtype)}>({acc}.{part})" for part in ("mean", "m2", "weight")
        ],
    )
)
