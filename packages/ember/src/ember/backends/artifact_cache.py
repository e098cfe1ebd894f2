"""The on-disk artifact cache shared by the inductor backend's two levels.

Entries live beside the kernel cache (EMBER_CACHE_DIR, same private-directory checks) as

    artifacts/<level>/<key[:2]>/<key>.json   {"format", "key", "sha256", "payload"}

written atomically (temporary file + rename). An entry whose key, format or checksum does not
match, or that does not parse, is deleted and treated as a miss, so it is rebuilt.
Keys include `code_fingerprint()`: torch's version and a hash of every source file of the
ember stages, so a changed stage never reads an artifact another version wrote.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import torch

from ember.stats import counters
from ember.trace.hooks import emit
from ember_codegen import KernelCache
from ember_codegen.cache import atomic_write

log = logging.getLogger("ember.cache")

ENTRY_FORMAT = 1
ENV_DISABLE = "EMBER_ARTIFACT_CACHE"  # "0" turns the artifact cache off (kernels stay cached)
STAGE_PACKAGES = (
    "ember_aot_autograd",
    "ember_primops",
    "ember_inductor_ir",
    "ember_codegen",
    "ember.backends",
)
_SOURCE_SUFFIXES = {".py", ".h", ".hpp", ".c", ".cpp"}
_fingerprint: str | None = None


def enabled() -> bool:
    return os.environ.get(ENV_DISABLE, "1") not in ("0", "false", "off")


def count(event: str, level: str = "") -> None:
    """cache_hits / cache_misses / cache_bypasses under counters['inductor'] (level-prefixed
    for the codegen level)."""
    counters["inductor"][f"{level}cache_{event}"] += 1
    emit("cache", level=level.rstrip("_") or "aot", result=event)


def code_fingerprint() -> str:
    """torch and Python versions plus a hash of the stages' source files (once per process)."""
    global _fingerprint
    if _fingerprint is None:
        digest = hashlib.sha256()
        digest.update(f"{torch.__version__}|{sys.version_info[:2]}".encode())
        for name in STAGE_PACKAGES:
            root = Path(importlib.import_module(name).__file__).parent
            for path in sorted(p for p in root.rglob("*") if p.suffix in _SOURCE_SUFFIXES):
                digest.update(str(path.relative_to(root)).encode())
                digest.update(path.read_bytes())
        _fingerprint = digest.hexdigest()
    return _fingerprint


def _payload_digest(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class ArtifactDir:
    """JSON entries of one level under the private cache root."""

    def __init__(self, level: str) -> None:
        self.cache = KernelCache()
        self.level = level

    def path(self, key: str) -> Path:
        return self.cache.subdirectory("artifacts", self.level, key[:2]) / f"{key}.json"

    def load(self, key: str) -> Any | None:
        """The payload saved under `key`, or None (missing, or corrupt and now deleted)."""
        path = self.path(key)
        try:
            entry = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            entry = None
        ok = (
            isinstance(entry, dict)
            and entry.get("format") == ENTRY_FORMAT
            and entry.get("key") == key
            and entry.get("sha256") == _payload_digest(entry.get("payload"))
        )
        if not ok:
            log.warning("artifact cache entry %s is corrupt; it will be rebuilt", path)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            return None
        return entry["payload"]

    def save(self, key: str, payload: Any) -> None:
        entry = {
            "format": ENTRY_FORMAT,
            "key": key,
            "sha256": _payload_digest(payload),
            "payload": payload,
        }
        atomic_write(self.path(key), json.dumps(entry, sort_keys=True).encode())
