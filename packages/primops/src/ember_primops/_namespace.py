"""``prims``: attribute access to every prim's OpOverload (``prims.add``)."""

from __future__ import annotations

import torch

from ._registry import all_prims, get_prim


class PrimNamespace:
    """``prims.<name>`` is ``torch.ops.ember_prims.<name>.default``."""

    def __getattr__(self, name: str) -> torch._ops.OpOverload:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return get_prim(name).overload
        except KeyError:
            raise AttributeError(f"ember_prims has no prim named {name!r}") from None

    def __dir__(self) -> list[str]:
        return [p.name for p in all_prims()]

    def __repr__(self) -> str:
        return f"<ember prims: {len(all_prims())} operators>"


prims = PrimNamespace()
