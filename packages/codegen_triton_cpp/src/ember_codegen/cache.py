"""The on-disk kernel cache: a private directory of content-addressed, verified entries.

Layout under the root (EMBER_CACHE_DIR, else $XDG_CACHE_HOME/ember, else ~/.cache/ember):

    cpp/<key[:2]>/<key>.cpp    the kernel source (kept for debugging and output_code logs)
    cpp/<key[:2]>/<key>.so     the shared object
    cpp/<key[:2]>/<key>.json   sidecar: the entry's own key, sha256 and size of the .so bytes
    cpp/<key[:2]>/<key>.lock   advisory lock held while one process builds the entry
    toolchain/<probe>.json     the compiler probe (see cpp/toolchain.py)

Every file is written to a temporary name in its final directory and published with
os.replace, the .so before its sidecar, so a reader never sees a half-written file. An entry
is loaded only when its sidecar names its own key (an entry copied or moved under another
key's name is internally consistent but holds another library: loading it would fail on a
missing kernel, or run the wrong one) and the .so's bytes hash to the sidecar's digest;
anything else (another key, truncated, corrupt, sidecar missing or of an older format) is
deleted and rebuilt under the entry's lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import secrets
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ember_codegen.exc import CacheDirectoryError

try:  # advisory locks where the platform has them; atomic renames keep us safe elsewhere
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("ember.codegen.cache")

ENV_CACHE_DIR = "EMBER_CACHE_DIR"


def default_cache_root() -> Path:
    """EMBER_CACHE_DIR, else $XDG_CACHE_HOME/ember, else ~/.cache/ember."""
    explicit = os.environ.get(ENV_CACHE_DIR)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "ember"


def ensure_private_dir(path: Path) -> Path:
    """Creates `path` (mode 0o700) if needed, then refuses it unless it is ours and private.

    Loading a shared object runs its code, so a directory someone else can write to would
    let them run code as us: refuse one owned by another user or writable by group/world.
    """
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    check_private_dir(path)
    return path


def check_private_dir(path: Path) -> None:
    if not hasattr(os, "getuid"):  # pragma: no cover - no POSIX ownership to check
        return
    info = os.stat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise CacheDirectoryError(f"kernel cache path {path} is not a directory")
    if info.st_uid != os.getuid():
        raise CacheDirectoryError(
            f"kernel cache directory {path} is owned by uid {info.st_uid}, not by you "
            f"(uid {os.getuid()}); set {ENV_CACHE_DIR} to a directory you own"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheDirectoryError(
            f"kernel cache directory {path} is writable by group or others "
            f"(mode {stat.S_IMODE(info.st_mode):#o}); run `chmod 700 {path}` or set "
            f"{ENV_CACHE_DIR} to a private directory"
        )


def content_key(parts: Sequence[str | bytes]) -> str:
    """sha256 over length-prefixed parts, so ("ab", "c") and ("a", "bc") differ."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def atomic_write(path: Path, data: bytes) -> None:
    """Writes to a temporary file beside `path`, then renames it over `path`."""
    tmp = temporary_path(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    try:
        try:
            fd = os.open(tmp, flags, 0o600)
        except FileNotFoundError:
            # the directory was checked once per process and has since been removed (a
            # cache root deleted under a running process): make it again
            ensure_private_dir(path.parent)
            fd = os.open(tmp, flags, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def temporary_path(path: Path) -> Path:
    """A fresh name beside `path` (same directory, so os.replace stays atomic)."""
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")


@dataclass(frozen=True)
class CacheEntry:
    """The files of one cached kernel library."""

    key: str
    directory: Path

    @property
    def source_path(self) -> Path:
        return self.directory / f"{self.key}.cpp"

    @property
    def library_path(self) -> Path:
        return self.directory / f"{self.key}.so"

    @property
    def sidecar_path(self) -> Path:
        return self.directory / f"{self.key}.json"

    @property
    def lock_path(self) -> Path:
        return self.directory / f"{self.key}.lock"


class KernelCache:
    """Content-addressed store of compiled libraries under a private root directory."""

    def __init__(self, root: Path | str | None = None) -> None:
        self.root = ensure_private_dir(Path(root) if root is not None else default_cache_root())
        self._checked_dirs: set[Path] = {self.root}

    def subdirectory(self, *names: str) -> Path:
        """root/names..., each level created 0o700 and checked once per process."""
        path = self.root
        for name in names:
            path = path / name
            if path not in self._checked_dirs:
                ensure_private_dir(path)
                self._checked_dirs.add(path)
        return path

    def entry(self, key: str) -> CacheEntry:
        return CacheEntry(key, self.subdirectory("cpp", key[:2]))

    def lookup(self, key: str) -> Path | None:
        """The entry's .so path if it is present and verified, else None (never raises)."""
        entry = self.entry(key)
        return entry.library_path if self.verify(entry) else None

    def verify(self, entry: CacheEntry, *, warn: bool = True) -> bool:
        """True when the sidecar names this entry's key and the .so's bytes match its size
        and sha256."""
        try:
            sidecar = json.loads(entry.sidecar_path.read_text())
            data = entry.library_path.read_bytes()
        except (OSError, ValueError):
            return False
        if not isinstance(sidecar, dict):
            return False
        if sidecar.get("key") != entry.key:
            if warn:
                log.warning(
                    "kernel cache entry %s belongs to key %r; it will be rebuilt",
                    entry.library_path, sidecar.get("key"),
                )  # fmt: skip
            return False
        ok = len(data) == sidecar.get("size") and (
            hashlib.sha256(data).hexdigest() == sidecar.get("sha256")
        )
        if not ok and warn:
            log.warning("kernel cache entry %s is corrupt; it will be rebuilt", entry.library_path)
        return ok

    def discard(self, entry: CacheEntry) -> None:
        """Deletes a stale or corrupt entry's library and sidecar (call under its lock)."""
        for path in (entry.sidecar_path, entry.library_path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    def publish(self, entry: CacheEntry, built_library: Path, **metadata: object) -> Path:
        """Moves a freshly built .so into place, then writes its sidecar (the commit point)."""
        data = built_library.read_bytes()
        sidecar = {
            **metadata,
            "key": entry.key,  # checked on load: the entry is this key's, not a copy of another
            "sha256": hashlib.sha256(data).hexdigest(),
            "size": len(data),
        }
        os.replace(built_library, entry.library_path)
        atomic_write(entry.sidecar_path, json.dumps(sidecar, sort_keys=True).encode())
        return entry.library_path

    @contextlib.contextmanager
    def locked(self, entry: CacheEntry) -> Iterator[None]:
        """Holds the entry's advisory lock so concurrent processes build it only once.

        flock is released by the kernel if the holder dies, so a crash leaves no stale lock;
        without fcntl the lock is skipped and the last writer's atomic rename wins.
        """
        if fcntl is None:  # pragma: no cover
            yield
            return
        fd = os.open(entry.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock
