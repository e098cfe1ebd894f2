"""`torch.utils.checkpoint.checkpoint(fn, *args, ...)`: `fn` traced inline, its nodes marked.

Activation checkpointing changes what autograd keeps, not what is computed: in eager, the
forward runs `fn` once (keeping only its inputs) and the backward runs it again to rebuild
the activations it needs, with the RNG state of the forward restored around the rerun, so
that a dropout inside draws the same mask twice. Traced inline, `fn`'s ops go into the graph
as if called directly, which gives eager's values and gradients; each node the call added
carries `node.meta["recompute"]` (a region id), so that a partitioner can recompute those
activations in the backward graph instead of saving them (the memory checkpointing is for).

What the inline trace cannot reproduce is a break, never a different result:
- Python side effects and in-place writes to tensors from outside `fn`: eager makes them
  again when the backward recomputes (a write twice, an attribute set twice).
- `preserve_rng_state=False` with random ops inside: eager's rerun draws a new mask.
- `use_reentrant=True` when no tensor argument requires grad: eager's outputs then do not
  require grad (an autograd.Function whose inputs need none), nor do parameters inside get
  gradients.
- `context_fn` (selective checkpointing policies) and `debug=True`.
Without `use_reentrant=` eager warns and takes the reentrant variant; the warning is given
once, when the call is traced.

The function is recognized by identity: `checkpoint` (wrapped by `torch._disable_dynamo`)
and the function it wraps.
"""

from __future__ import annotations

import itertools
import warnings
from typing import Any

import torch
import torch.fx
import torch.utils.checkpoint as torch_checkpoint

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.output_graph import is_mutating
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builtins import rule
from ember_bytecode_tracer.variables.tensor import TensorVariable

RECOMPUTE_META = "recompute"  # node.meta key: the id of the checkpointed region
_REGION_IDS = itertools.count(1)
_CHECKPOINTS = tuple(
    f
    for f in (
        torch_checkpoint.checkpoint,
        getattr(torch_checkpoint.checkpoint, "__wrapped__", None),
    )
    if f is not None
)
# keywords of checkpoint() itself; the others go to `fn` (non-reentrant variant)
_OWN_OPTIONS = ("use_reentrant", "context_fn", "determinism_check", "debug", "early_stop")
_NO_REENTRANT_WARNING = (
    "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. "
    "Starting in PyTorch 2.9, calling checkpoint without use_reentrant will raise an "
    "exception. use_reentrant=False is recommended, but if you need to preserve the current "
    "default behavior, you can pass use_reentrant=True. Refer to docs for more details on "
    "the differences between the two variants."
)


def _constant_option(kwargs: dict[str, VariableTracker], name: str, default: Any) -> Any:
    tracker = kwargs.pop(name, None)
    if tracker is None:
        return default
    if not tracker.is_python_constant():
        raise Unsupported(f"checkpoint({name}=...) not known at trace time")
    return tracker.as_python_constant()


def _options(kwargs: dict[str, VariableTracker]) -> tuple[bool, bool]:
    """(use_reentrant, preserve_rng_state); pops checkpoint's own keywords from `kwargs`."""
    context_fn = kwargs.pop("context_fn", None)
    if context_fn is not None:
        if not context_fn.is_python_constant():
            raise Unsupported("checkpoint(context_fn=...): selective checkpointing policies")
        if context_fn.as_python_constant() is not torch_checkpoint.noop_context_fn:
            raise Unsupported("checkpoint(context_fn=...): selective checkpointing policies")
    if _constant_option(kwargs, "debug", False):
        raise Unsupported("checkpoint(debug=True) records eager's operator trace")
    _constant_option(kwargs, "determinism_check", "default")  # the rerun is ours: checks hold
    _constant_option(kwargs, "early_stop", True)
    use_reentrant = _constant_option(kwargs, "use_reentrant", None)
    preserve = _constant_option(kwargs, "preserve_rng_state", True)
    if use_reentrant is None:
        warnings.warn(_NO_REENTRANT_WARNING, stacklevel=2)
        use_reentrant = True
    if use_reentrant and kwargs:
        raise Unsupported(f"checkpoint(use_reentrant=True) with keywords {sorted(kwargs)}")
    return bool(use_reentrant), bool(preserve)


def _check_reentrant_inputs(args: list[VariableTracker]) -> None:
    if not torch.is_grad_enabled():
        return
    if not any(isinstance(a, TensorVariable) and a.example.requires_grad for a in args):
        raise Unsupported(
            "checkpoint(use_reentrant=True) where no tensor argument requires grad: eager's "
            "outputs then do not require grad"
        )


def _effects(tx) -> tuple[int, ...]:
    effects = tx.output.side_effects
    return (len(effects.containers), len(effects.attributes), len(effects.global_writes))


def _storage_key(value: Any) -> int | None:
    if not isinstance(value, torch.Tensor):
        return None
    try:
        return value.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):
        return None


def _check_region(tx, before: set[torch.fx.Node], region: list[torch.fx.Node], preserve: bool):
    if not preserve and any(n.meta.get("draws_random") for n in region):
        raise Unsupported(
            "checkpoint(preserve_rng_state=False) around random ops: eager's backward rerun "
            "draws other numbers"
        )
    written = [n.args[0] for n in region if is_mutating(n) and n.args]
    written = [w for w in written if isinstance(w, torch.fx.Node)]
    if not written:
        return
    outside = {_storage_key(n.meta.get("example_value")) for n in before} - {None}
    for target in written:
        if _storage_key(target.meta.get("example_value")) in outside:
            raise Unsupported(
                "in-place write inside a checkpointed function to a tensor from outside it "
                "(eager writes it again when the backward recomputes)"
            )


@rule(*_CHECKPOINTS)
def _checkpoint(tx, args, kwargs):
    if not args:
        raise Unsupported("checkpoint() without a function")
    fn, fn_args = args[0], list(args[1:])
    kwargs = dict(kwargs)
    use_reentrant, preserve = _options(kwargs)
    if use_reentrant:
        _check_reentrant_inputs(fn_args)
    graph = tx.output.graph
    before = set(graph.nodes)
    effects = _effects(tx)
    result = fn.call_function(tx, fn_args, kwargs)
    if _effects(tx) != effects:
        raise Unsupported(
            "Python side effects inside a checkpointed function (eager makes them again "
            "when the backward recomputes)"
        )
    region = [n for n in graph.nodes if n not in before and n.op.startswith("call")]
    _check_region(tx, before, region, preserve)
    region_id = next(_REGION_IDS)
    for node in region:
        node.meta.setdefault(RECOMPUTE_META, region_id)  # a nested region keeps its own id
    return result
