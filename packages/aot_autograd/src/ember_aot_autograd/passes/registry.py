"""Named graph passes over aot's prim graphs: a table filled by decorator, one pass a module.

A pass is a function over an FX graph whose nodes carry `meta["val"]`; its name is what a
pipeline prints and logs it by (`ember_aot_autograd.passes.PASSES`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["PASSES", "GraphPass", "graph_pass"]


@dataclass(frozen=True)
class GraphPass:
    """One named pass: `run` is the function itself, `doc` its first docstring line."""

    name: str
    run: Callable[..., Any]
    doc: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.run(*args, **kwargs)

    def __str__(self) -> str:
        return f"{self.name}: {self.doc}"


#: pass name -> pass, in the order the modules registered them
PASSES: dict[str, GraphPass] = {}


F = TypeVar("F", bound=Callable[..., Any])


def graph_pass(name: str) -> Callable[[F], F]:
    """Registers the decorated function under `name` (its docstring's first paragraph as the
    pass's doc); the function itself is returned unchanged."""

    def register(fn: F) -> F:
        if name in PASSES:
            raise ValueError(f"graph pass {name!r} is registered twice")
        doc = (fn.__doc__ or "").strip().split("\n\n")[0]
        PASSES[name] = GraphPass(name, fn, " ".join(doc.split()))
        return fn

    return register
