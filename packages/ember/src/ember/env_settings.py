"""EMBER_* environment settings, checked where a compile starts: a malformed one raises a
`ConfigurationError` naming the variable, its value and what to set instead, rather than
failing later inside a stage as an anonymous error ("backend failed: FileExistsError")."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ember.exc import ConfigurationError


def _directory(name: str, value: str) -> None:
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise ConfigurationError(
            f"{name}={value} is a file, not a directory: set it to a directory or unset it"
        )
    blocking = next((p for p in path.parents if p.exists()), None)
    if blocking is not None and not blocking.is_dir():
        raise ConfigurationError(
            f"{name}={value} lies under {blocking}, which is a file, not a directory: "
            "set it to a directory or unset it"
        )


def _choice(*allowed: str) -> Callable[[str, str], None]:
    def check(name: str, value: str) -> None:
        if value.strip().lower() not in allowed:
            raise ConfigurationError(
                f"{name}={value!r} is not one of {', '.join(allowed)}: set one of them or unset it"
            )

    return check


def _count(name: str, value: str) -> None:
    try:
        ok = int(value) >= 0
    except ValueError:
        ok = False
    if not ok:
        raise ConfigurationError(
            f"{name}={value!r} is not a whole number >= 0: set one or unset it"
        )


# the settings a user may get wrong, keyed by name; each check raises naming its setting
CHECKS: dict[str, Callable[[str, str], None]] = {
    "EMBER_CACHE_DIR": _directory,
    "EMBER_TRACE_DIR": _directory,
    "EMBER_COMPILE_WORKERS": _count,
    "EMBER_CPU_POOL_MB": _count,
    "EMBER_NATIVE_GUARDS": _choice("0", "1", "verify"),
    "EMBER_CHANNELS_LAST": _choice("auto", "1", "on", "true", "inference", "0", "off", "false"),
    # EMBER_INDUCTOR_TARGET and EMBER_LOGS are checked where they are read, naming themselves
    "EMBER_TRITON_MATMUL": _choice("auto", "template", "aten"),
    "EMBER_TRITON_COMBINE": _choice("0", "1"),
    "EMBER_TRITON_BUILD_PROCESSES": _choice("0", "1"),
}


def check_environment(environ: dict[str, str] | None = None) -> None:
    """Raises ConfigurationError for the first malformed EMBER_* setting."""
    environ = os.environ if environ is None else environ
    for name, check in CHECKS.items():
        value = environ.get(name)
        if value:
            check(name, value)
