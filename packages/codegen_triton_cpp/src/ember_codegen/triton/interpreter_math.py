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


_FUNCTIONS: dict[str, Callable[..., torch.Tensor]] = {
    "expm1": torch.expm1,
    "log10": torch.log10,
    "log1p": torch.log1p,
    "sin": torch.sin,
    "cos": torch.cos,
    "tan": torch.tan,
    "asin": torch.asin,
    "acos": torch.acos,
    "atan": torch.atan,
    "sinh": torch.sinh,
    "cosh": torch.cosh,
    "tanh": torch.tanh,
    "asinh": torch.asinh,
    "acosh": torch.acosh,
    "atanh": torch.atanh,
    "erfc": torch.erfc,
    "erfinv": torch.erfinv,
    "lgamma": torch.lgamma,
    "trunc": torch.trunc,
    "nearbyint": torch.round,
    "fmod": torch.fmod,
    "pow": torch.pow,
    "atan2": torch.atan2,
    "hypot": torch.hypot,
    "copysign": torch.copysign,
    "nextafter": torch.nextafter,
}

libdevice_shim = types.SimpleNamespace(**{name: _wrap(fn) for name, fn in _FUNCTIONS.items()})
