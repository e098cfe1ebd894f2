"""Typed errors of ember-codegen: each says what went wrong and what to do about it."""

from __future__ import annotations


class CodegenError(RuntimeError):
    """Base class of every error ember-codegen raises on purpose."""


class CompilerNotFoundError(CodegenError):
    """No usable C++ compiler: none named by CXX, none of g++/c++/clang++ on PATH."""

    def __init__(self, tried: list[str]) -> None:
        self.tried = list(tried)
        super().__init__(
            f"no C++ compiler found (tried: {', '.join(tried)}); install g++ (e.g. "
            "`apt-get install g++`) or clang++, or set CXX to the compiler's path"
        )


class CppCompileError(CodegenError):
    """The compiler rejected a kernel source; carries the command line and its output."""

    def __init__(self, command: list[str], output: str, source_path: str) -> None:
        self.command = list(command)
        self.output = output
        self.source_path = source_path
        tail = output if len(output) <= 4000 else "...\n" + output[-4000:]
        super().__init__(
            f"C++ compilation failed for {source_path}\ncommand: {' '.join(command)}\n{tail}"
        )

    def __reduce__(self):  # picklable across worker boundaries
        return (type(self), (self.command, self.output, self.source_path))


class CacheDirectoryError(CodegenError):
    """The kernel cache directory is unsafe to load code from (owner or permissions)."""


class KernelLoadError(CodegenError):
    """A compiled library could not be loaded, or lacks the kernel symbol asked for."""


class KernelArgumentError(CodegenError, TypeError):
    """A kernel was called with arguments that do not match its declared signature."""


class KernelRuntimeError(CodegenError):
    """A kernel reported an error through the runtime's error code (e.g. integer division by 0)."""


class NotRestorable(CodegenError):
    """A compiled graph that cannot be written as plain data (ember_codegen.artifact), or not
    rebuilt from it here: the caller compiles afresh (a cache bypass or miss)."""
