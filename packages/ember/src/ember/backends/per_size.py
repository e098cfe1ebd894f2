"""Backends that did not declare symbolic sizes: one compile per concrete size signature.

Under `dynamic=True`, `mark_dynamic`, or the automatic dynamic that follows a size change, the
tracer hands the backend a graph with symbolic sizes (placeholders whose example values are
SymInts or tensors of symbolic size) together with the call's concrete inputs. Ember's own
backends compile such a graph for every size; a backend that traces or specialises on its
example inputs (one built on PyTorch's `aot_module_simplified`, its inductor, an exporter)
bakes the example's sizes and ints in, and its callable would then run on other sizes and
ints: a silent wrong result. So a backend that does not declare `symbolic_sizes`
(registry.py) gets, for a symbolic graph, a callable that keys each call on the sizes,
strides and int values of the graph's symbolic inputs and calls the backend again, with a
fresh copy of the graph and the call's real inputs, for a key it has not seen. One trace,
one compile per signature, never a compile used for a size it was not made for. Static
graphs go to the backend as they are.

The compiles of one graph are an LRU of `MAX_SIZE_COMPILES`; past it the least recently used
is dropped (a warning, once per graph) and a new signature compiles again. Counted in
`ember.counters["per_size"]` (`graphs`, `compiles`, `evictions`).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

from ember.backends.registry import Backend
from ember.config import config
from ember.exc import BackendCompilerFailed
from ember.stats import counters

log = logging.getLogger("ember.backends")
MAX_SIZE_COMPILES = 64
_SYM = (torch.SymInt, torch.SymFloat, torch.SymBool)
_told: set[str] = set()  # backends whose per-size compiles were logged (once each)


def _is_symbolic(value: Any) -> bool:
    if isinstance(value, _SYM):
        return True
    if isinstance(value, torch.Tensor):
        layout = (*value.stride(), value.storage_offset()) if value.layout is torch.strided else ()
        return any(isinstance(s, _SYM) for s in (*value.shape, *layout))
    return False


def symbolic_positions(gm: torch.fx.GraphModule) -> tuple[int, ...]:
    """The positions of the placeholders whose example value is symbolic (a Sym value, or a
    tensor with a symbolic size, stride or offset); a placeholder without one counts too."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return tuple(
        k
        for k, node in enumerate(placeholders)
        if "example_value" not in node.meta or _is_symbolic(node.meta["example_value"])
    )


def _value_key(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        strided = value.layout is torch.strided
        layout = (value.stride(), value.storage_offset()) if strided else (value.layout,)
        return (tuple(value.shape), *layout, value.dtype, value.device)
    if isinstance(value, float):
        return (float, value.hex())  # nan equals itself
    if isinstance(value, (bool, int)):
        return (type(value), value)
    return type(value)


def size_key(args: Sequence[Any], positions: Sequence[int]) -> tuple:
    """What a compile made from these concrete inputs depends on, at the symbolic positions."""
    return tuple(_value_key(args[k]) for k in positions)


def fresh_copy(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A new graph module over a copy of `gm`'s graph (node meta copied, attributes shared):
    what a backend does to the graph it is given stays out of the next compile."""
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in gm.graph.nodes:
        env[node] = graph.node_copy(node, lambda n: env[n])
    graph._codegen = gm.graph._codegen
    copy = torch.fx.GraphModule(gm, graph)
    copy.meta.update(gm.meta)
    return copy


def _backend_label(backend: Any) -> str:
    inner = getattr(backend, "__wrapped__", backend)
    name = getattr(inner, "__qualname__", None) or type(inner).__qualname__
    return f"{getattr(inner, '__module__', None) or type(inner).__module__}.{name}"


class PerSizeCompiles:
    """The callable for a symbolic graph: the backend's compile for each call's signature."""

    def __init__(self, backend: Backend, gm: torch.fx.GraphModule, positions: tuple) -> None:
        self.backend = backend
        self.name = getattr(backend, "__name__", type(backend).__name__)
        self.pristine = fresh_copy(gm)  # before the backend sees (and may rewrite) gm
        self.positions = positions
        self.limit = MAX_SIZE_COMPILES
        self.compiled: OrderedDict[tuple, Callable] = OrderedDict()
        self.lock = threading.RLock()
        self.warned = False
        counters["per_size"]["graphs"] += 1

    def first(self, gm: torch.fx.GraphModule, example_inputs: list) -> PerSizeCompiles:
        """Compiles the trace's own signature now (a failure surfaces at trace time, as for
        any backend), with the graph the tracer built."""
        key = size_key(example_inputs, self.positions)
        self._store(key, self.backend(gm, example_inputs))
        return self

    def __call__(self, *args: Any) -> Any:
        key = size_key(args, self.positions)
        with self.lock:
            run = self.compiled.get(key)
            if run is None:
                run = self._compile_for(key, list(args))
            else:
                self.compiled.move_to_end(key)
        return run(*args)

    def _compile_for(self, key: tuple, args: list) -> Callable:
        log.debug("backend %s: compiling the graph again for input sizes %s", self.name, key)
        try:
            run = self.backend(fresh_copy(self.pristine), args)
        except Exception as exc:
            if not config.suppress_errors:
                where = f"a recompile for new input sizes {key}"
                raise BackendCompilerFailed(self.name, exc, where) from exc
            log.warning("backend %s failed for sizes %s (%s); running the graph eagerly",
                        self.name, key, exc)  # fmt: skip
            run = self.pristine.forward
        if not callable(run):
            raise BackendCompilerFailed(
                self.name, TypeError(f"backend returned {type(run).__name__}"), None
            )
        return self._store(key, run)

    def _store(self, key: tuple, run: Callable) -> Callable:
        counters["per_size"]["compiles"] += 1
        self.compiled[key] = run
        if len(self.compiled) > self.limit:
            self.compiled.popitem(last=False)
            counters["per_size"]["evictions"] += 1
            if not self.warned:
                self.warned = True
                log.warning(
                    "backend %s: more than %d input size signatures for one graph; the least "
                    "recently used compile is dropped and new sizes compile again (declare the "
                    "backend with ember.backends.symbolic_sizes if it handles symbolic sizes)",
                    self.name,
                    self.limit,
                )
        return run


def per_size_unless_declared(backend: Backend, declared: bool) -> Backend:
    """`backend` as is where it declared symbolic sizes; else symbolic graphs are compiled by
    it once per concrete size signature (static graphs go to it unchanged)."""
    if declared:
        return backend

    def compile_graph(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        positions = symbolic_positions(gm)
        if not positions:
            return backend(gm, example_inputs)
        label = _backend_label(backend)
        if label not in _told:
            _told.add(label)
            log.info(
                "backend %s was not declared to handle symbolic sizes: graphs with dynamic "
                "sizes are compiled by it once per concrete size. If it compiles code valid "
                "for every size, declare it: ember.backends.symbolic_sizes(backend) or "
                "ember.register_backend(name, backend, symbolic_sizes=True)",
                label,
            )
        return PerSizeCompiles(backend, gm, positions).first(gm, example_inputs)

    compile_graph.__name__ = compile_graph.__qualname__ = getattr(
        backend, "__name__", type(backend).__name__
    )
    compile_graph._ember_wrapped_backend = backend  # compilers of equal backends share code
    return compile_graph
