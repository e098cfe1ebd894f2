"""The C++ tensor check (tensor_check.cpp): TENSOR_MATCH in one native call.

Without it a native guard reads a tensor's metadata through five attribute getters
(guards/native.py); with it, one CHECK_NATIVE instruction reads the at::Tensor. It is
compiled against the installed torch with torch.utils.cpp_extension, which takes a minute,
so it is never built behind the user's back: `build()` (or
`python -m ember_bytecode_tracer.guards.native_tensor`) compiles it into a cache folder
keyed by the torch version, Python, the source and the plug-in header, and every later
process loads it from there at once. `EMBER_NATIVE_TENSOR_GUARDS=0` leaves it unused.
The plug-in ABI (capsule name, check signature) comes from the frame hook's public header
`ember_frame_hook.h` (in `ember_frame_hook.get_include()`), not from a copy here.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import sys
from pathlib import Path
from typing import Any

import torch

import ember_frame_hook as fh
from ember_bytecode_tracer.guards.checks import _contiguity_decides_strides
from ember_bytecode_tracer.guards.tensor_spec import DYNAMIC_MIN_SIZE, TensorSpec

_SOURCE = Path(__file__).with_name("tensor_check.cpp")
_HEADER = Path(fh.get_include(), "ember_frame_hook.h")  # the CHECK_NATIVE plug-in ABI
_NAME = "ember_tensor_check"
_EXACT_TYPES = (torch.Tensor, torch.nn.Parameter)  # classes whose getters it reproduces
_loaded: dict[str, Any] = {}
log = logging.getLogger(__name__)


def cache_dir() -> Path:
    """Where the build lives: one folder per torch version, Python, source text and the
    frame hook's plug-in header."""
    key = hashlib.sha256(_SOURCE.read_bytes() + _HEADER.read_bytes()).hexdigest()[:16]
    tag = f"torch{torch.__version__}-py{sys.version_info.major}{sys.version_info.minor}-{key}"
    root = os.environ.get("EMBER_CACHE_DIR") or os.path.join(Path.home(), ".cache", "ember")
    return Path(root, "tensor_check", tag.replace("+", "_"))


def capsule() -> Any | None:
    """The CHECK_NATIVE capsule if the check is built (and not disabled), else None."""
    if os.environ.get("EMBER_NATIVE_TENSOR_GUARDS", "1") == "0":
        return None
    if "capsule" not in _loaded:
        built = sorted(cache_dir().glob(f"{_NAME}*.so"))
        _loaded["capsule"] = None
        if built:
            try:
                _loaded["capsule"] = _import(built[0]).capsule()
            except Exception as exc:  # a broken build: tensor matches read attributes
                log.warning("ember: cannot load the C++ tensor check %s: %s", built[0], exc)
    return _loaded["capsule"]


def build(verbose: bool = False) -> Any:
    """Compile the check now (about a minute) and return its capsule."""
    from torch.utils.cpp_extension import load_inline

    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    module = load_inline(
        _NAME,
        cpp_sources=[_SOURCE.read_text()],
        functions=["capsule"],
        extra_cflags=["-O2"],
        extra_include_paths=[fh.get_include()],
        build_directory=str(folder),
        verbose=verbose,
    )
    _loaded["capsule"] = module.capsule()
    return _loaded["capsule"]


def _import(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(_NAME, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def spec_data(spec: TensorSpec) -> tuple | None:
    """The tuple tensor_check.cpp reads, or None where it does not apply (other classes)."""
    if spec.tensor_type not in _EXACT_TYPES:
        return None
    strides_checked = spec.strides is not None and any(s is not None for s in spec.strides)
    return (
        spec.dtype,
        spec.device,
        None if strides_checked else spec.layout,
        spec.requires_grad,
        tuple(-1 if d is None else d for d in spec.sizes),
        None
        if spec.strides is None or not strides_checked
        else tuple(-1 if s is None else s for s in spec.strides),
        _contiguity_decides_strides(spec),
        spec.dtype.is_complex,
        DYNAMIC_MIN_SIZE if None in spec.sizes else -1,
    )


if __name__ == "__main__":
    build(verbose="-v" in sys.argv)
    print(f"built into {cache_dir()}")
