"""Dead-code elimination: drop operations whose results nothing live reads."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from ..extern import ExternKernel
from .dependencies import Operation, reads_of, writes_of

log = logging.getLogger("ember.fusion")

#: Extern kernels with effects beyond their outputs (they advance generator state).
IMPURE_KERNELS = frozenset({"next_seed"})


def eliminate_dead_code(
    ops: Sequence[Operation],
    live_outputs: Iterable[str],
    reads: Callable[[Operation], Iterable[str]] = reads_of,
) -> list[Operation]:
    live = set(live_outputs)
    kept: list[Operation] = []
    for op in reversed(ops):
        impure = isinstance(op, ExternKernel) and op.kernel_name in IMPURE_KERNELS
        if impure or any(name in live for name in writes_of(op)):
            kept.append(op)
            live.update(reads(op))
        else:
            log.info("dead code: %s is never read; removed", op.name)
    kept.reverse()
    return kept
