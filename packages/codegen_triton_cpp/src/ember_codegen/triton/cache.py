"""Kernel modules on disk, keyed by content hash, and Triton's own cache beside them.

Layout under ``default_cache_root()`` (EMBER_CACHE_DIR, ...):

    triton/kernels/<key[:2]>/<key>.py    one graph's kernel module (imported from there:
                                          Triton reads a kernel's source from its file)
    triton/cache/                         TRITON_CACHE_DIR (compiled binaries), unless set
    triton/autotune/<key>.json            max-autotune winners (autotune.py)
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from ember_codegen.cache import atomic_write, content_key, default_cache_root, ensure_private_dir

from .helpers import HELPERS
from .shared_kernels import share_identical

MODULE_HEADER = """import triton
import triton.language as tl
from triton.language.extra import libdevice
"""


def interpreting() -> bool:
    """Whether Triton runs kernels with its CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def interpreter_source() -> bool:
    """Whether generated kernels take the interpreter's forms (bfloat16 rounding by integer
    arithmetic, masked-off lanes' addresses pointed at element 0): under the interpreter,
    unless EMBER_TRITON_SOURCE=gpu asks for the GPU's forms there too (tools/triton_plan.py
    generates a GPU's kernels on the CPU without running them)."""
    return interpreting() and os.environ.get("EMBER_TRITON_SOURCE", "") != "gpu"


def triton_root(root: Path | None = None) -> Path:
    return ensure_private_dir((root or default_cache_root()) / "triton")


def configure_triton_cache(root: Path | None = None) -> None:
    """Point Triton's binary cache under ours, unless the user chose one."""
    if "TRITON_CACHE_DIR" not in os.environ:
        os.environ["TRITON_CACHE_DIR"] = str(ensure_private_dir(triton_root(root) / "cache"))


def module_source(kernel_sources: list[str]) -> str:
    """The kernels' module: each kernel that repeats an earlier one is an alias of it
    (shared_kernels.py), so that Triton builds it once."""
    shared, _ = share_identical(kernel_sources)
    return "\n".join([MODULE_HEADER, HELPERS, *[k + "\n\n" for k in shared]])


def load_module(source: str, root: Path | None = None) -> tuple[ModuleType, Path]:
    """Write ``source`` under its content hash (once) and import it."""
    key = content_key(["ember-triton-module", source])
    directory = ensure_private_dir(triton_root(root) / "kernels" / key[:2])
    path = directory / f"{key}.py"
    if not path.exists() or path.read_text() != source:
        atomic_write(path, source.encode())
    name = f"ember_triton_{key[:24]}"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    if interpreting():  # the shims need numpy, a dependency of the interpreter alone
        from .interpreter_math import libdevice_shim
        from .interpreter_reduce import REDUCE_SHIMS

        module.libdevice = libdevice_shim  # the interpreter cannot call libdevice
        for name, shim in REDUCE_SHIMS.items():  # nor run tl.reduce(combine) at speed
            setattr(module, name, shim)
    return module, path
