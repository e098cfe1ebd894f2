"""A user's saved-tensor hooks stay out of tracing.

`torch.autograd.graph.saved_tensors_hooks(pack, unpack)` around a compiled call is meant for
the tensors the program saves when it runs: eager calls `pack` once per saved tensor. Tracing
runs the program's ops on fake tensors under autograd, which would call the user's `pack` on
them (one more call per saved tensor, with a fake tensor). While a frame is traced, autograd
is told it is tracing, so it skips the default hooks; the compiled code runs outside that and
saves its tensors through the user's hooks as torch.compile's does.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

_set_tracing = getattr(torch._C._autograd, "_saved_tensors_hooks_set_tracing", None)


@contextmanager
def user_saved_tensor_hooks_suspended() -> Iterator[None]:
    if _set_tracing is None:  # a torch without the switch: nothing to suspend with
        yield
        return
    prior = _set_tracing(True)
    try:
        yield
    finally:
        _set_tracing(prior)
