"""The generated Python wrapper's target-neutral core, shared by the C++ and the Triton
target (each subclasses the builder; neither imports the other):

| module | job |
|---|---|
| `builder.py` | `WrapperBuilder`: input guards, allocation per the memory plan (dead storages taken over), extern calls, frees, outputs; hooks for a target's launches and storage |
| `writer.py` | `WrapperCode` and the line/namespace `Writer` |
| `library_calls.py` | what an extern calls (aten ops directly, `out=` variants, prim implementations without their meta check) |
| `held_layouts.py` | the layout each buffer's tensor is held in |
| `size_bindings.py` | symbolic sizes while a wrapper is written: per binding (`bound`) or for every binding (`symbolic`) |
| `dynamic_wrapper.py` | `SizeBinder` (where each size symbol is read), `DynamicWrapper` (a wrapper per binding), `symbolic_wrapper_call` (one for every binding) |
| `symbolic_reads.py` | the symbol reads at the top of a wrapper serving every binding |
| `runtime.py` | functions in every wrapper's namespace |
"""

from .builder import WrapperBuilder
from .runtime import pack_scalars, unpack_scalars
from .writer import WrapperCode

__all__ = ["WrapperBuilder", "WrapperCode", "pack_scalars", "unpack_scalars"]
