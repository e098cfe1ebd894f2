"""Ember codegen: loop IR -> C++/OpenMP and Triton kernels with an on-disk cache. See README.md.

This layer (C++ build): C++ source -> cached, verified shared object -> ctypes-loaded kernels.
Importing it registers its two targets' capability records (``CPP_TARGET``, ``TRITON_TARGET``,
targets.py) with ember_inductor_ir, so that ``lower(..., target="cpp")`` resolves.
"""

from ember_codegen._version import __version__
from ember_codegen.api import compile_graph
from ember_codegen.cache import KernelCache, default_cache_root
from ember_codegen.cpp.build import (
    BuildResult,
    CppBuilder,
    compile_many,
    compile_source,
    kernel_key,
)
from ember_codegen.cpp.loader import (
    Bool,
    Float32,
    Float64,
    Int32,
    Int64,
    KernelSignature,
    LoadedKernelLibrary,
    Pointer,
)
from ember_codegen.cpp.toolchain import RUNTIME_DIR, Toolchain, discover_toolchain
from ember_codegen.exc import (
    CacheDirectoryError,
    CodegenError,
    CompilerNotFoundError,
    CppCompileError,
    KernelArgumentError,
    KernelLoadError,
    KernelRuntimeError,
)
from ember_codegen.targets import CPP_TARGET, TRITON_TARGET
from ember_codegen.triton.prebuild import start_build_workers

__all__ = [
    "CPP_TARGET",
    "RUNTIME_DIR",
    "TRITON_TARGET",
    "Bool",
    "BuildResult",
    "CacheDirectoryError",
    "CodegenError",
    "CompilerNotFoundError",
    "CppBuilder",
    "CppCompileError",
    "Float32",
    "Float64",
    "Int32",
    "Int64",
    "KernelArgumentError",
    "KernelCache",
    "KernelLoadError",
    "KernelRuntimeError",
    "KernelSignature",
    "LoadedKernelLibrary",
    "Pointer",
    "Toolchain",
    "__version__",
    "compile_graph",
    "compile_many",
    "compile_source",
    "default_cache_root",
    "discover_toolchain",
    "kernel_key",
    "start_build_workers",
]
