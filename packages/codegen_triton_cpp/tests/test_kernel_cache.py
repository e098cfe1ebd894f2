"""The cache directory: location, privacy checks, atomic writes, verified entries."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from ember_codegen import CacheDirectoryError, KernelCache, default_cache_root
from ember_codegen.cache import atomic_write, content_key, ensure_private_dir

posix_only = pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX ownership checks")


def test_content_key_separates_parts():
    assert content_key(["ab", "c"]) != content_key(["a", "bc"])
    assert content_key(["x", b"y"]) == content_key([b"x", "y"])
    assert len(content_key(["x"])) == 64


def test_default_root_prefers_ember_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_root() == tmp_path / "explicit"


def test_default_root_falls_back_to_xdg_then_home(monkeypatch, tmp_path):
    monkeypatch.delenv("EMBER_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_root() == tmp_path / "xdg" / "ember"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_root() == tmp_path / "home" / ".cache" / "ember"


@posix_only
def test_cache_directories_are_created_private(tmp_path):
    cache = KernelCache(tmp_path / "a" / "root")
    entry = cache.entry("ab" + "0" * 62)
    for path in (cache.root, cache.root / "cpp", entry.directory):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o700, path


@posix_only
@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777])
def test_group_or_world_writable_directory_is_refused(tmp_path, mode):
    root = tmp_path / "shared"
    root.mkdir()
    os.chmod(root, mode)
    with pytest.raises(CacheDirectoryError, match="writable by group or others"):
        KernelCache(root)


@posix_only
def test_read_only_for_others_is_accepted(tmp_path):
    root = tmp_path / "readable"
    root.mkdir()
    os.chmod(root, 0o755)
    assert KernelCache(root).root == root


@posix_only
def test_directory_of_another_user_is_refused(tmp_path, monkeypatch):
    root = tmp_path / "theirs"
    root.mkdir(mode=0o700)
    real_uid = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: real_uid + 1)  # as if someone else owned it
    with pytest.raises(CacheDirectoryError, match="owned by uid"):
        ensure_private_dir(root)


def test_a_file_in_place_of_the_directory_is_refused(tmp_path):
    path = tmp_path / "file"
    path.write_text("")
    with pytest.raises((CacheDirectoryError, FileExistsError)):
        KernelCache(path)


def test_atomic_write_replaces_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "x.json"
    atomic_write(target, b"one")
    atomic_write(target, b"two")
    assert target.read_bytes() == b"two"
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_a_cache_directory_removed_under_a_running_process_is_made_again(tmp_path):
    """Directories are checked once per process: one removed since (pytest's tmp_path of a
    passed test, reused by name for the next one) must not turn writes into errors."""
    cache = KernelCache(tmp_path / "root")
    wrappers = cache.subdirectory("wrapper")
    shutil.rmtree(tmp_path / "root")
    atomic_write(cache.subdirectory("wrapper") / "w.py", b"code")
    assert (wrappers / "w.py").read_bytes() == b"code"
    assert stat.S_IMODE(os.stat(wrappers).st_mode) == 0o700


def _publish_fake(cache: KernelCache, key: str, payload: bytes) -> Path:
    entry = cache.entry(key)
    built = entry.directory / "built.so"
    built.write_bytes(payload)
    return cache.publish(entry, built)


def test_published_entry_verifies(fresh_cache):
    key = content_key(["published"])
    path = _publish_fake(fresh_cache, key, b"\x7fELF fake library bytes")
    assert fresh_cache.lookup(key) == path
    sidecar = json.loads(fresh_cache.entry(key).sidecar_path.read_text())
    assert sidecar["size"] == len(b"\x7fELF fake library bytes")


@pytest.mark.parametrize("damage", ["truncate", "flip", "drop_sidecar", "garble_sidecar"])
def test_damaged_entry_is_not_found(fresh_cache, damage):
    key = content_key(["damaged", damage])
    path = _publish_fake(fresh_cache, key, b"0123456789" * 100)
    entry = fresh_cache.entry(key)
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:500])
    elif damage == "flip":
        data = bytearray(path.read_bytes())
        data[10] ^= 0xFF
        path.write_bytes(bytes(data))
    elif damage == "drop_sidecar":
        entry.sidecar_path.unlink()
    else:
        entry.sidecar_path.write_text("{not json")
    assert fresh_cache.lookup(key) is None
    fresh_cache.discard(entry)
    assert not path.exists() and not entry.sidecar_path.exists()


def test_entry_copied_under_another_key_is_not_found(fresh_cache):
    x, y = content_key(["entry-x"]), content_key(["entry-y"])
    _publish_fake(fresh_cache, x, b"library x")
    _publish_fake(fresh_cache, y, b"library y")
    ex, ey = fresh_cache.entry(x), fresh_cache.entry(y)
    ey.library_path.write_bytes(ex.library_path.read_bytes())
    ey.sidecar_path.write_bytes(ex.sidecar_path.read_bytes())
    assert fresh_cache.lookup(x) == ex.library_path
    assert fresh_cache.lookup(y) is None
