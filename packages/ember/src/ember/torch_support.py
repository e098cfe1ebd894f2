"""The torch releases Ember is tested on, and a loud refusal outside them.

A compiler that silently stops compiling after a torch upgrade is the worst failure a user can
meet (torch 2.14 once left every frame eager with nothing logged above DEBUG). Outside the
tested range `ember.compile` raises `UnsupportedTorchVersion`, naming the version and the range;
with `config.suppress_errors` (or EMBER_ALLOW_UNTESTED_TORCH=1, to try a newer release
anyway) it warns once and carries on.
"""

from __future__ import annotations

import logging
import os

import torch

from ember.exc import UnsupportedTorchVersion

log = logging.getLogger("ember")

# [oldest, first untested): the range CI runs (noxfile: the torch-oldest, pinned and
# torch-newest sessions) and every package's metadata states (torch>=2.11,<2.16)
OLDEST = "2.11"
FIRST_UNTESTED = "2.16"
ALLOW_ENV = "EMBER_ALLOW_UNTESTED_TORCH"

_warned: set[str] = set()


def torch_release() -> str:
    """`2.14.1` of `2.14.1+cu130`: the release, without the local build label."""
    return str(torch.__version__).split("+")[0]


def supported(version: str) -> bool:
    release = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    oldest = tuple(int(p) for p in OLDEST.split("."))
    first_untested = tuple(int(p) for p in FIRST_UNTESTED.split("."))
    return oldest <= release < first_untested


def check_torch(*, suppress_errors: bool) -> None:
    """Raise (or warn once, when errors are suppressed or the override is set) if the
    installed torch is outside the tested range."""
    version = torch_release()
    if supported(version):
        return
    message = (
        f"ember supports torch >={OLDEST},<{FIRST_UNTESTED}; this is torch {torch.__version__}. "
        f"Install a supported torch (pip install 'torch>={OLDEST},<{FIRST_UNTESTED}'), or set "
        f"{ALLOW_ENV}=1 to try this release anyway (untested: some code may run eagerly)."
    )
    if not (suppress_errors or os.environ.get(ALLOW_ENV) == "1"):
        raise UnsupportedTorchVersion(message)
    if version not in _warned:
        _warned.add(version)
        log.warning("ember: %s", message)
