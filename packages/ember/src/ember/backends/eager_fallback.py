"""A graph the stages declare they cannot compile runs as the torch-level graph it came in as.

Two kinds of limitation are declared, never discovered by catching whatever a stage raises:

- tensor kinds the stages do not trace (sparse, mkldnn, ... anything not strided; dtypes the
  prims do not take, such as complex32), read from the graph's example values before
  compiling;
- ember-aot-autograd's ``UnsupportedOpError``: an op it refuses by design (one that reads
  tensor data into Python, such as the info check of aten's linalg composites), and
  ember-primops' ``DataDependentIndex`` (a boolean-mask index: no prim has its shape);
- ember-symbolic-shapes' ``DataDependentError``: a stage must decide a condition on a value
  only the run knows (a decomposition branching on `t.item()`'s value);
- control-flow operators (a graph node calling a ``HigherOrderOperator`` with subgraphs)
  the graph cannot be cut around (operator_split.py: ``cond`` and ``map_impl`` are; another
  operator, or a write across the cut, is not): the aot stage does not trace into their
  bodies, so the graph holding one runs as it is (eager runs the operator, autograd
  included), counted by the operator (``"higher_order.while_loop"``);
- ember-inductor-ir's ``ScalarReadUnsupported``: a `t.item()` read the loop IR does not bind
  on the host (a read of a computed value, a bool; see its lowering/scalar_reads.py);

Such a graph runs eagerly: the same ops in the same order, so the results are eager's. Each
one is counted in ``ember.counters["graph_fallbacks"]`` by the op refused or the layout met
(``"aten.item.default"``, ``"torch.sparse_coo"``) and logged as a warning.
Any other exception from a stage is checked against eager (eager_probe.py): if eager raises on
the same graph too, the error is the user's (an op eager refuses by dtype) and the graph runs
eagerly so that the call raises eager's exception, counted in ``ember.counters["eager_errors"]``
by its type; if eager runs it, the stage has a bug: it surfaces as ``BackendCompilerFailed``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch

from ember.backends.eager_probe import eager_error
from ember.backends.operator_split import split_at_operators
from ember.stats import counters
from ember.trace.hooks import emit
from ember_aot_autograd import UnsupportedOpError
from ember_inductor_ir import ScalarReadUnsupported
from ember_symbolic import DataDependentError

log = logging.getLogger("ember.backends")

#: tensor layouts the aot, decomposition and lowering stages handle
TRACED_LAYOUTS = frozenset({torch.strided})
#: dtypes no prim takes (eager's support for them is partial and experimental)
UNTRACED_DTYPES = frozenset({torch.complex32})


def _limitations() -> tuple[type[BaseException], ...]:
    # ember_primops keeps its decomposition table unloaded until a backend asks for it (the
    # first compile, not `import ember`): so does this, the only import of it here
    from ember_primops.decompositions import DataDependentIndex

    return (UnsupportedOpError, DataDependentIndex, DataDependentError, ScalarReadUnsupported)


def untraced_tensor(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> str | None:
    """The first input or value of a layout or dtype the stages do not trace, described;
    else None."""
    values = [*example_inputs, *(n.meta.get("example_value") for n in gm.graph.nodes)]
    for value in values:
        for leaf in torch.utils._pytree.tree_leaves(value):
            if not isinstance(leaf, torch.Tensor):
                continue
            if leaf.layout not in TRACED_LAYOUTS:
                return f"{leaf.layout} tensor {tuple(leaf.shape)}"
            if leaf.dtype in UNTRACED_DTYPES:
                return f"{leaf.dtype} tensor {tuple(leaf.shape)}"
    return None


def untraced_operator(gm: torch.fx.GraphModule) -> str | None:
    """The first higher-order operator (a control-flow op over subgraphs) the graph calls,
    named as `higher_order.<name>`; else None."""
    for node in gm.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, torch._ops.HigherOrderOperator):
            return f"higher_order.{node.target.name()}"
    return None


def _fall_back(backend: str, key: str, reason: str) -> None:
    counters["graph_fallbacks"][key] += 1
    emit("fallback", kind="graph", backend=backend, op=key, reason=reason)
    log.warning("%s: this graph runs eagerly (a stage limitation): %s", backend, reason)


def _refused(backend: str, reason: BaseException) -> None:
    _fall_back(backend, str(getattr(reason, "op", type(reason).__name__)), str(reason))


def _first_line(error: BaseException) -> str:
    return (str(error).splitlines() or [""])[0]  # without the notes fx's Interpreter adds


def _users_error(backend: str, gm: torch.fx.GraphModule, inputs: Any, failure: Exception) -> bool:
    """Whether eager raises on `gm` too (then the graph runs eagerly, raising as eager);
    counted and logged."""
    error = eager_error(gm, inputs)
    if error is None:
        return False
    counters["eager_errors"][type(error).__name__] += 1
    emit("fallback", kind="eager_error", backend=backend, op=type(error).__name__)
    log.warning(
        "%s: eager raises on this graph too (%s: %s); it runs eagerly so that the call raises "
        "eager's error (the stage said: %s: %s)",
        backend, type(error).__name__, _first_line(error), type(failure).__name__, failure,
    )  # fmt: skip
    return True


def eager_on_limitation(backend: str, compile_fn: Callable) -> Callable:
    """``compile_fn(gm, example_inputs)`` wrapped: a declared limitation at compile time, or
    while a later call traces a new variant (grad mode, shapes), runs the graph eagerly."""

    def compile_graph(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable:
        limitations = _limitations()
        untraced = untraced_tensor(gm, example_inputs)
        if untraced is not None:
            _fall_back(backend, untraced.split(" tensor")[0], f"{untraced}: not traced")
            return gm.forward
        operator = untraced_operator(gm)
        split = None if operator is None else split_at_operators(gm, compile_graph)
        if split is not None:  # the rest compiled around the operators, bodies compiled
            return split
        if operator is not None:
            _fall_back(backend, operator, f"{operator}: its subgraphs are not traced")
            return gm.forward
        try:
            compiled = compile_fn(gm, example_inputs)
        except limitations as reason:
            _refused(backend, reason)
            return gm.forward
        except Exception as failure:
            if not _users_error(backend, gm, example_inputs, failure):
                raise
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
            except Exception as failure:  # a new variant's trace, or the compiled graph
                if not _users_error(backend, gm, args, failure):
                    raise
                return gm.forward(*args)  # raises as eager does (the graphs are functional)

        run.__dict__.update(getattr(compiled, "__dict__", {}))  # e.g. aot_module's aot_function
        return run

    return compile_graph
