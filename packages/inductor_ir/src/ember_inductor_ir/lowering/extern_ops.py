"""Prims handed to libraries as extern kernels: matmuls, convolutions, sorts and scans.

Every prim in ember_primops' ``extern`` category (the ``linalg_*`` family included) is
treated the same way by ``GraphLowering`` even without an entry here; the entries below
also cover prims of other categories that we deliberately leave to a library.
"""

from __future__ import annotations

from typing import Any

from .registry import prim_name, register_lowering

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
    op = ctx.current_node.target
    # into planned storage where the target says so (the CPU's: no first-touch page faults;
    # the Triton target's matmuls may become templates, and GPU memory comes from a caching
    # allocator without first-touch costs)
    writes_out = ctx.target.writes_out(prim_name(op))
    return ctx.extern(op, args, kwargs, writes_out=writes_out)


for _name in LIBRARY_PRIMS:
    register_lowering(_name)(lower_as_extern)
