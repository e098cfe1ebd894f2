"""Cross-lane reductions for kernels run by Triton's CPU interpreter.

The interpreter runs ``tl.reduce`` with a custom combine function one element at a time in
Python (minutes for a few long rows), so under TRITON_INTERPRET=1 the ``_em_reduce_*``
helpers of a kernel module (helpers.py) are replaced by these numpy versions with the same
semantics: NaN-propagating max/min, argmax/argmin taking NaN as the extreme and the lowest
index on ties, and the Welford merge of lane partials. The combine functions themselves
still run as Triton code in the lane-wise updates of looped reductions.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _tensor(data: np.ndarray, like: Any) -> Any:
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    scalar = like.dtype.scalar
    data = np.ascontiguousarray(data.astype(like.handle.data.dtype, copy=False))
    return tl.core.tensor(TensorHandle(data, scalar), tl.block_type(scalar, list(data.shape)))


def _axis_reduce(fn: Any) -> Any:
    def reduce(x: Any, _semantic: Any = None, **_: Any) -> Any:
        return _tensor(fn(x.handle.data), x)

    return reduce


def _arg(largest: bool) -> Any:
    def reduce(v: Any, i: Any, _semantic: Any = None, **_: Any) -> Any:
        values, index = v.handle.data, i.handle.data
        if values.dtype.kind == "f":
            nan = np.isnan(values)
            extreme = (np.nanmax if largest else np.nanmin)(
                np.where(nan, -np.inf if largest else np.inf, values), axis=1, keepdims=True
            )
            row_nan = nan.any(axis=1, keepdims=True)
            winners = np.where(row_nan, nan, values == extreme)
            best = np.where(row_nan, np.nan, extreme)
        else:
            extreme = (np.max if largest else np.min)(values, axis=1, keepdims=True)
            winners, best = values == extreme, extreme
        big = np.iinfo(index.dtype).max
        idx = np.where(winners, index, big).min(axis=1, keepdims=True)
        return _tensor(best, v), _tensor(idx, i)

    return reduce


def _welford(mean: Any, m2: Any, w: Any, _semantic: Any = None, **_: Any) -> Any:
    m, s, n = mean.handle.data, m2.handle.data, w.handle.data
    total = n.sum(axis=1, keepdims=True)
    safe = np.where(total == 0, 1, total)
    new_mean = np.where(total == 0, 0, (n * m).sum(axis=1, keepdims=True) / safe)
    new_m2 = s.sum(axis=1, keepdims=True) + (n * (m - new_mean) ** 2).sum(axis=1, keepdims=True)
    return _tensor(new_mean, mean), _tensor(new_m2, m2), _tensor(total, w)


def _trip(n: Any, _semantic: Any = None, **_: Any) -> Any:
    """A loop bound passed as a kernel argument, as the Python int the interpreter's range()
    needs (it holds the argument as a one-element array)."""
    return int(np.asarray(n.handle.data).reshape(-1)[0]) if hasattr(n, "handle") else n


REDUCE_SHIMS = {
    "_em_trip": _trip,  # not a reduction: the same module attribute swap
    "_em_reduce_maximum": _axis_reduce(lambda d: np.max(d, axis=1, keepdims=True)),
    "_em_reduce_minimum": _axis_reduce(lambda d: np.min(d, axis=1, keepdims=True)),
    "_em_reduce_mul": _axis_reduce(lambda d: np.prod(d, axis=1, keepdims=True, dtype=d.dtype)),
    "_em_reduce_or": _axis_reduce(lambda d: np.any(d, axis=1, keepdims=True)),
    "_em_reduce_and": _axis_reduce(lambda d: np.all(d, axis=1, keepdims=True)),
    "_em_reduce_xor": _axis_reduce(lambda d: np.bitwise_xor.reduce(d, axis=1, keepdims=True)),
    "_em_reduce_argmax": _arg(largest=True),
    "_em_reduce_argmin": _arg(largest=False),
    "_em_reduce_welford": _welford,
}
