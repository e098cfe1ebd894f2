"""A graph the stages declare they cannot compile runs as the torch-level graph it came in as.

Two kinds of limitation are declared, never discovered by catching whatever a stage raises:

- tensor kinds the stages do not trace (sparse, mkldnn, ... anything not strided), read from
  the graph's example values before compiling;
- ember-aot-autograd's ``UnsupportedOpError``: an op it refuses by design (one that reads
  tensor data into Python, such as the info check of aten's linalg composites), and
  ember-primops' ``DataDependentIndex`` (a boolean-mask index: no prim has its shape).

Such a graph runs eagerly: the same ops in the same order, so the results are eager's. Each
one is counted in ``ember.counters["graph_fallbacks"]`` by the op refused or the layout met
(``"aten.item.default"``, ``"torch.sparse_coo"``) and logged as a warning.
Any other exception from a stage is a bug: it surfaces as ``BackendCompilerFailed``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch

from ember.stats import counters

log = logging.getLogger("ember.backends")

#: tensor layouts the aot, decomposition and lowering stages handle
TRACED_LAYOUTS = frozenset({torch.strided})


def _limitations() -> tuple[type[BaseException], ...]:
    from ember_aot_autograd import UnsupportedOpError
    from ember_primops.decompositions.indexing import DataDependentIndex

    return (UnsupportedOpError, DataDependentIndex)


def untraced_layout(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> str | None:
    """The first input or value of a layout the stages do not trace, described; else None."""
    values = [*example_inputs, *(n.meta.get("example_value") for n in gm.graph.nodes)]
    for value in values:
        for leaf in torch.utils._pytree.tree_leaves(value):
            if isinstance(leaf, torch.Tensor) and leaf.layout not in TRACED_LAYOUTS:
                return f"{leaf.layout} tensor {tuple(leaf.shape)}"
    return None


def _fall_back(backend: str, key: str, reason: str) -> None:
    counters["graph_fallbacks"][key] += 1
    log.warning("%s: this graph runs eagerly (a stage limitation): %s", backend, reason)


def _refused(backend: str, reason: BaseException) -> None:
    _fall_back(backend, str(getattr(reason, "op", type(reason).__name__)), str(reason))


def eager_on_limitation(backend: str, compile_fn: Callable) -> Callable:
    """``compile_fn(gm, example_inputs)`` wrapped: a declared limitation at compile time, or
    while a later call traces a new variant (grad mode, shapes), runs the graph eagerly."""

    def compile_graph(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable:
        limitations = _limitations()
        untraced = untraced_layout(gm, example_inputs)
        if untraced is not None:
            _fall_back(backend, untraced.split(" tensor")[0], f"{untraced}: not traced")
            return gm.forward
        try:
            compiled = compile_fn(gm, example_inputs)
        except limitations as reason:
            _refused(backend, reason)
            return gm.forward
        eager = []  # set once a new variant hits a limitation: eager from then on

        def run(*args: Any) -> Any:
            if eager:
                return gm.forward(*args)
            try:
                return compiled(*args)
            except limitations as reason:  # raised while tracing, before anything ran
                _refused(backend, reason)
                eager.append(reason)
                return gm.forward(*args)

        run.__dict__.update(getattr(compiled, "__dict__", {}))  # e.g. aot_module's aot_function
        return run

    return compile_graph
