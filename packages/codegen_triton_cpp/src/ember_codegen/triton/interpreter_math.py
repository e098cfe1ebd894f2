"""``libdevice`` for kernels run by Triton's CPU interpreter (TRITON_INTERPRET=1).

The interpreter cannot call libdevice (an NVIDIA/AMD bitcode library), so a kernel module
loaded under the interpreter gets this shim as its ``libdevice``: each function applies the
eager torch CPU function to the interpreter's numpy data. On a GPU the real libdevice is used.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import numpy as np
import torch


def _wrap(fn: Callable[..., torch.Tensor]) -> Callable[..., Any]:
    def apply(*args: Any, _semantic: Any = None, **_: Any) -> Any:
        import triton.language as tl
        from triton.runtime.interpreter import TensorHandle

        first = next(a for a in args if isinstance(a, tl.core.tensor))
        datas = [
            a.handle.data
            if isinstance(a, tl.core.tensor)
            else np.asarray(a, first.handle.data.dtype)
            for a in args
        ]
        result = fn(*[torch.from_numpy(np.ascontiguousarray(d)) for d in datas]).numpy()
        result = result.astype(first.handle.data.dtype, copy=False)
        scalar = first.dtype.scalar
        shape = list(result.shape)
        ty = tl.block_type(scalar, shape) if shape else scalar
        return tl.core.tensor(TensorHandle(result, scalar), ty)

    return apply


#: the libdevice functions the kernels call that torch spells the same way
_SAME_NAME = (
    "expm1", "log10", "log1p", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
    "tanh", "asinh", "acosh", "atanh", "erfc", "erfinv", "lgamma", "trunc", "fmod", "pow",
    "atan2", "hypot", "copysign", "nextafter",
)  # fmt: skip
_FUNCTIONS: dict[str, Callable[..., torch.Tensor]] = {
    **{name: getattr(torch, name) for name in _SAME_NAME},
    "nearbyint": torch.round,  # round half to even, as libdevice's nearbyint
}

libdevice_shim = types.SimpleNamespace(**{name: _wrap(fn) for name, fn in _FUNCTIONS.items()})
