"""Import torchvision (and so timm, which imports it) where its compiled ops cannot load.

The registry's torchvision wheels for Linux are CUDA builds: against a CPU-only torch their
ops library (`torchvision/_C.so`, linked to libc10_cuda) does not load, and torchvision
0.28's import then fails while registering a fake kernel for `torchvision::nms`. The suites
use only the model definitions, none of the detection ops, so where that happens the two op
schemas it registers against are declared (with no kernel) and the import is retried. Where
the ops library loads (the GPU host), this does nothing.
"""

from __future__ import annotations

import sys
from types import ModuleType

import torch

_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)
_declared: list[torch.library.Library] = []  # kept alive: a Library drops its ops when freed


def import_torchvision() -> ModuleType:
    try:
        import torchvision
    except RuntimeError as exc:
        if "torchvision::nms" not in str(exc):
            raise
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        lib = torch.library.Library("torchvision", "FRAGMENT")
        for schema in _SCHEMAS:
            lib.define(schema)
        _declared.append(lib)
        import torchvision
    return torchvision


def import_timm() -> ModuleType:
    import_torchvision()
    import timm

    return timm
