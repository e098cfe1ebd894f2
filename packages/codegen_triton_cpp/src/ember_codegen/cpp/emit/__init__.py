"""C++ emission: loop-IR kernel groups -> one C++ source per graph + a Python wrapper."""

from .kernel import KernelSource, build_kernel
from .source import graph_source
from .wrapper import CppWrapperBuilder

__all__ = ["CppWrapperBuilder", "KernelSource", "build_kernel", "graph_source"]
