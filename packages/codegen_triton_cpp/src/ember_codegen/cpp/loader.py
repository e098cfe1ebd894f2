"""Loads a compiled kernel library with ctypes and exposes its kernels as Python callables.

No extension module is built: the .so exports plain `extern "C"` functions and the caller
declares each one's signature (`KernelSignature([Pointer(torch.float32), Int64, ...])`).
For each kernel a tiny Python function is generated from the signature, e.g.

    def kernel(a0, a1, a2):
        _fn(a0.data_ptr(), a1.data_ptr(), a2)

with the ctypes argtypes set once, so a call costs one data_ptr() per tensor plus the
ctypes call itself (see README for measured figures). Argument checks (tensor, dtype, CPU)
are opt-in (`check_args=True` or EMBER_CHECK_KERNEL_ARGS=1) since the generated wrapper
already knows what it passes.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

from ember_codegen.exc import KernelArgumentError, KernelLoadError, KernelRuntimeError

ENV_CHECK_ARGS = "EMBER_CHECK_KERNEL_ARGS"

# Error codes the runtime header's ember::set_error writes; keep in sync with ErrorCode.
ERROR_MESSAGES = {
    1: "ZeroDivisionError: integer division or remainder by zero",
}


@dataclass(frozen=True)
class Pointer:
    """A tensor argument: passed as its data pointer (the kernel indexes it itself)."""

    dtype: torch.dtype
    ctype: ClassVar[type] = ctypes.c_void_p

    def convert(self, name: str) -> str:
        return f"{name}.data_ptr()"

    def check(self, value: object, position: int) -> None:
        if not isinstance(value, torch.Tensor):
            raise KernelArgumentError(
                f"argument {position}: expected a {self.dtype} tensor, got {type(value).__name__}"
            )
        if value.dtype != self.dtype or value.device.type != "cpu":
            raise KernelArgumentError(
                f"argument {position}: expected a CPU tensor of {self.dtype}, got "
                f"{value.dtype} on {value.device}"
            )


@dataclass(frozen=True)
class Scalar:
    """A number passed by value."""

    name: str
    ctype: type
    accepts: tuple[type, ...]

    def convert(self, name: str) -> str:
        return name

    def check(self, value: object, position: int) -> None:
        if not isinstance(value, self.accepts) or isinstance(value, bool) != (bool in self.accepts):
            raise KernelArgumentError(
                f"argument {position}: expected {self.name}, got {type(value).__name__} {value!r}"
            )


Int64 = Scalar("int64", ctypes.c_int64, (int,))
Int32 = Scalar("int32", ctypes.c_int32, (int,))
Float64 = Scalar("float64", ctypes.c_double, (float, int))
Float32 = Scalar("float32", ctypes.c_float, (float, int))
Bool = Scalar("bool", ctypes.c_bool, (bool,))

ArgKind = Pointer | Scalar


@dataclass(frozen=True)
class KernelSignature:
    """The C parameter list of a kernel; `raises` makes calls check the library's error code."""

    args: tuple[ArgKind, ...]
    raises: bool = False

    def __init__(self, args: Sequence[ArgKind], raises: bool = False) -> None:
        object.__setattr__(self, "args", tuple(args))
        object.__setattr__(self, "raises", raises)
        for position, kind in enumerate(self.args):
            if not isinstance(kind, Pointer | Scalar):
                raise TypeError(
                    f"KernelSignature argument {position}: {kind!r} is not an argument kind; "
                    "use Pointer(dtype), Int64, Int32, Float64, Float32 or Bool"
                )


class LoadedKernelLibrary:
    """A compiled library (dlopen'ed once) and the kernels taken from it."""

    def __init__(self, path: Path | str, *, key: str = "", source_path: Path | None = None):
        self.path = Path(path)
        self.key = key
        self.source_path = source_path
        try:
            self.cdll = ctypes.CDLL(str(self.path), mode=getattr(os, "RTLD_LOCAL", 0))
        except OSError as error:
            raise KernelLoadError(
                f"could not load kernel library {self.path}: {error}; delete it (or the cache "
                "directory) to have it rebuilt"
            ) from error
        try:
            self._error_code: ctypes.c_int | None = ctypes.c_int.in_dll(
                self.cdll, "ember_error_code"
            )
        except ValueError:  # built without the runtime header: it cannot report errors
            self._error_code = None

    def __repr__(self) -> str:
        return f"LoadedKernelLibrary({str(self.path)!r})"

    def take_error(self) -> int:
        """The library's error code (0 when fine), reset to 0."""
        if self._error_code is None:
            return 0
        code = self._error_code.value
        self._error_code.value = 0
        return code

    def raise_if_error(self, kernel_name: str) -> None:
        code = self.take_error()
        if code:
            message = ERROR_MESSAGES.get(code, f"unknown error code {code}")
            raise KernelRuntimeError(f"kernel {kernel_name} ({self.path.name}): {message}")

    def kernel(
        self, name: str, signature: KernelSignature, *, check_args: bool | None = None
    ) -> Callable[..., None]:
        """The exported function `name` as a Python callable taking tensors and numbers."""
        try:
            function = self.cdll[name]
        except AttributeError:
            raise KernelLoadError(
                f"kernel library {self.path} has no exported function {name!r}; kernels must be "
                'declared EMBER_KERNEL (extern "C", default visibility)'
            ) from None
        function.argtypes = [kind.ctype for kind in signature.args]
        function.restype = None
        if check_args is None:
            check_args = os.environ.get(ENV_CHECK_ARGS, "") not in ("", "0")
        return _make_caller(name, function, signature, self, check_args)


def _make_caller(
    name: str,
    function: Any,
    signature: KernelSignature,
    library: LoadedKernelLibrary,
    check_args: bool,
) -> Callable[..., None]:
    """Generates the per-signature call shim (no loops or dispatch on the hot path)."""
    params = [f"a{i}" for i in range(len(signature.args))]
    lines = [f"def kernel({', '.join(params)}):"]
    if check_args:
        lines += [f"    _kinds[{i}].check({p}, {i})" for i, p in enumerate(params)]
    converted = ", ".join(kind.convert(p) for kind, p in zip(signature.args, params, strict=True))
    lines.append(f"    _fn({converted})")
    if signature.raises:
        lines.append("    if _error is not None and _error.value:")
        lines.append("        _library.raise_if_error(_name)")
    namespace: dict[str, Any] = {
        "_fn": function,
        "_kinds": signature.args,
        "_error": library._error_code,
        "_library": library,
        "_name": name,
    }
    exec(compile("\n".join(lines), f"<ember kernel {name}>", "exec"), namespace)
    caller = namespace["kernel"]
    caller.__name__ = caller.__qualname__ = name
    caller.signature = signature
    caller.library = library
    return caller
