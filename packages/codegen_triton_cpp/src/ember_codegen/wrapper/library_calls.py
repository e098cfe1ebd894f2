"""What a wrapper calls for an extern kernel (a library op), on either target."""

from __future__ import annotations

from typing import Any

import torch

from ember_inductor_ir.extern import ExternKernel
from ember_primops import get_prim

#: Library prims whose aten op takes the same arguments: the wrapper calls aten directly.
#: The prim's own kernel re-checks its arguments on meta tensors every call (~40 us, an
#: extern's whole cost at small sizes); compilation checked them once, and the inputs are
#: guarded. The result's layout is still checked (``_adopt``).
DIRECT_ATEN_CALLS: dict[str, Any] = {
    "mm": torch.ops.aten.mm.default,
    "bmm": torch.ops.aten.bmm.default,
    "convolution": torch.ops.aten.convolution.default,
    "convolution_backward": torch.ops.aten.convolution_backward.default,
}


#: Library prims (OUT_VARIANT_PRIMS) -> the function writing the result into a given buffer
#: (``out=``): aten's out overload through torch's own binding, ~0.55 us cheaper a call than
#: the OpOverload's ``_op`` (which boxes its arguments). Runtime names (runtime_namespace).
OUT_VARIANTS: dict[str, str] = {
    "mm": "_mm_out",
    "bmm": "_bmm_out",
    "cat": "_cat_out",
    "addmm": "_addmm_out",  # a linear layer's bias in BLAS's epilogue (add_folds)
}
#: Library prims called through torch's own binding when their result is not written into
#: a planned buffer (the Triton target's matmuls, every convolution): the binding parses its
#: arguments in C++, where the OpOverload's ``_op`` boxes them (~2-3 us a call on the GPU
#: hosts: a BERT training step makes 222 such matmul calls). Runtime names, as above.
BINDING_CALLS: dict[str, str] = {
    "mm": "_mm_out",
    "bmm": "_bmm_out",
    "addmm": "_addmm_out",  # a half-precision linear layer (primops keeps eager's addmm)
    "convolution": "_convolution",
}
#: what those names are in every wrapper's namespace (the C++ and the Triton target's)
OUT_FUNCTIONS: dict[str, Any] = {
    "_mm_out": torch.mm,
    "_bmm_out": torch.bmm,
    "_cat_out": torch.cat,
    "_addmm_out": torch.addmm,
    "_convolution": torch.convolution,
}


#: Of those, the ops whose results are fresh tensors (storage offset 0) whose sizes and dtype
#: the (guarded) inputs fix: only the strides of their results are checked.
FRESH_RESULTS = frozenset({*DIRECT_ATEN_CALLS, "addmm"})


class _PrimImplementations(dict):
    """prim OpOverload -> its implementation, called without the per-call meta check that
    the prim's registered kernel runs first (~40-80 us: the arguments converted to meta
    tensors and the meta function run). Compilation ran that meta function on the same
    metadata and the wrapper's inputs are guarded; the result's layout is still checked."""

    def __missing__(self, op: Any) -> Any:
        impl = self[op] = get_prim(op).impl
        return impl


PRIM_IMPLEMENTATIONS = _PrimImplementations()


def library_call(extern: ExternKernel) -> Any:
    """What the wrapper calls for ``extern``: its aten op where one matches, else the op."""
    if extern.fallback:
        return extern.kernel
    return DIRECT_ATEN_CALLS.get(extern.kernel_name, extern.kernel)
