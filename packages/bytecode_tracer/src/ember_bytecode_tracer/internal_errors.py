"""Errors of Ember's own code at trace time, told apart from the user's.

A Python error while tracing becomes a graph break before the instruction (the instruction
then runs eagerly and raises the user's own error, if it is one). When the error came from
Ember itself (an attribute a newer torch no longer has, a tracer bug), that break silently
leaves code uncompiled: on torch 2.14 every frame ran eagerly with nothing above DEBUG. Such
errors are reported once each at WARNING, naming the torch version, so that a compile that
captured nothing says why.
"""

from __future__ import annotations

import logging
import sys
import traceback
from pathlib import Path

import torch

log = logging.getLogger("ember.tracer")

# exception types that, raised by Ember's own frames, mean Ember is wrong (a TypeError or
# ValueError there is usually the user's: `range(2.0)` evaluated on constants)
_INTERNAL_TYPES = (AttributeError, ImportError, NameError, AssertionError, NotImplementedError)
_EMBER_ROOT = Path(__file__).resolve().parent.parent  # the folder holding the ember_* packages
_reported: set[tuple[str, str]] = set()


def raised_by_ember(exc: BaseException) -> bool:
    """Whether `exc` is one of the internal kinds and its innermost frame is Ember's code."""
    if not isinstance(exc, _INTERNAL_TYPES) or exc.__traceback__ is None:
        return False
    innermost = traceback.extract_tb(exc.__traceback__)[-1].filename
    path = Path(innermost).resolve()
    return path.is_relative_to(_EMBER_ROOT) and path.parts[len(_EMBER_ROOT.parts)].startswith(
        "ember"
    )


def report_once(exc: BaseException, location: str | None) -> None:
    """One WARNING per distinct internal error: what failed, where in the user's code, and
    the versions to report."""
    where = traceback.extract_tb(exc.__traceback__)[-1]
    key = (f"{where.filename}:{where.lineno}", type(exc).__name__)
    if key in _reported:
        return
    _reported.add(key)
    log.warning(
        "ember: internal error while tracing%s: %s: %s (at %s:%s). The code runs eagerly "
        "from there (a graph break). This is an Ember bug or an unsupported torch release "
        "(torch %s, Python %d.%d); please report it.",
        f" {location}" if location else "", type(exc).__name__, exc,
        Path(where.filename).name, where.lineno, torch.__version__, *sys.version_info[:2],
    )  # fmt: skip
