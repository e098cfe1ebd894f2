"""Prims handed to libraries as extern kernels: matmuls, convolutions, sorts and scans.

Every prim in ember_primops' ``extern`` category (the ``linalg_*`` family included) is
treated the same way by ``GraphLowering`` even without an entry here; the entries below
also cover prims of other categories that we deliberately leave to a library.
"""

from __future__ import annotations

from typing import Any

from .registry import register_lowering

LIBRARY_PRIMS = (
    "mm",
    "bmm",
    "sort",
    "cumsum",
    "cumprod",
    "logcumsumexp",
    "cummax",
    "cummin",
)


def lower_as_extern(ctx: Any, *args: Any, **kwargs: Any) -> Any:
    return ctx.extern(ctx.current_node.target, args, kwargs)


for _name in LIBRARY_PRIMS:
    register_lowering(_name)(lower_as_extern)
