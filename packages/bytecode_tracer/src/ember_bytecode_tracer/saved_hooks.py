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


# `torch.autograd.graph.disable_saved_tensors_hooks` as graph ops: the runner puts the state
# back when a graph raises between the two (its `finally` in eager code).
_autograd = torch._C._autograd
DISABLE_SWITCHES = (_autograd._saved_tensors_hooks_disable, _autograd._saved_tensors_hooks_enable)


def disabled_message() -> str | None:
    """The error saved-tensor hooks raise now (None: they are enabled)."""
    return _autograd._saved_tensors_hooks_get_disabled_error_message()


def restore_disabled(message: str | None) -> None:
    if message is None:
        _autograd._saved_tensors_hooks_enable()
    else:
        _autograd._saved_tensors_hooks_disable(message)
