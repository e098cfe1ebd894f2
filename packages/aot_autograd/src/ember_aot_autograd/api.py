"""aot_function / aot_module: trace, partition, compile, and wrap, one variant per call kind."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch
import torch.fx

from ember_aot_autograd.aliasing import SharingCheck, alias_pattern
from ember_aot_autograd.errors import BadArgumentError
from ember_aot_autograd.joint import JointGraph, trace_joint
from ember_aot_autograd.module_state import module_state, swapped_state
from ember_aot_autograd.partition import (
    Partition,
    PartitionReport,
    default_partition,
    min_cut_rematerialization_partition,
)
from ember_aot_autograd.plan import RunnerPlan
from ember_aot_autograd.regions import has_regions, run_marking_regions
from ember_aot_autograd.runtime import (
    Compiler,
    inference_plan,
    inference_runner,
    training_plan,
    training_runner,
)
from ember_aot_autograd.saved_values import without_hook_switches
from ember_aot_autograd.symbolic import (
    SYM_TYPES,
    DynamicSignature,
    env_of,
    is_symbolic_value,
    symbol_readers,
)
from ember_aot_autograd.trace import META_KEY, trace_to_aten
from ember_aot_autograd.tracer import DecompositionTable

log = logging.getLogger("ember.aot")
PartitionFn = Callable[[JointGraph], Partition]


def _signature(args: Sequence[Any]) -> tuple:
    """What a compiled variant depends on: grad mode, each input's kind, and which inputs
    share a storage (aliasing.py).

    Computed on every call (~0.4 us a tensor): one comprehension, sizes kept as torch.Size
    (a tuple, equal to and hashed like one) rather than copied."""
    return (
        torch.is_grad_enabled(),
        tuple(
            [
                (v.shape, v.dtype, v.device, v.requires_grad)
                if isinstance(v, _Tensor)
                else _value_key(v)
                for v in args
            ]
        ),
        alias_pattern(args),
    )


_Tensor = torch.Tensor


def _value_key(value: Any) -> tuple:
    return ("value", type(value), value if _hashable(value) else id(value))


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


class AotFunction:
    """The callable aot_function returns: compiles a variant per signature, then runs it."""

    def __init__(
        self,
        fn: Callable,
        fw_compiler: Compiler,
        bw_compiler: Compiler | None,
        decompositions: DecompositionTable | None,
        partition_fn: PartitionFn,
        strict: bool,
        artifact_store: ArtifactStore | None = None,
        example_values: Sequence[Any] | None = None,
    ) -> None:
        if not callable(fn) or not callable(fw_compiler):
            raise BadArgumentError("aot_function needs a callable fn and a callable fw_compiler")
        self.fn = fn
        self.fw_compiler = fw_compiler
        self.bw_compiler = bw_compiler or fw_compiler
        self.decompositions = decompositions
        self.partition_fn = partition_fn
        self.strict = strict
        self.artifact_store = artifact_store
        self.variants: dict[tuple, Callable] = {}
        self.traces = {"inference": 0, "joint": 0}
        # symbolic example values (fake tensors with SymInt sizes, SymInts): every variant
        # is traced on them, so that one compiled variant serves every size in their range
        self.shape_env = env_of(example_values or ())
        self.example_values = list(example_values) if self.shape_env is not None else None
        self.signature = (
            DynamicSignature(self.example_values) if self.example_values else _signature
        )
        if self.example_values is not None:
            self.artifact_store = None  # the on-disk store keys concrete shapes
        self.static_variants: dict[tuple, Callable] = {}
        self.scalar_env: Any = None  # unbacked scalars of item() under static inputs

    def __call__(self, *args: Any) -> Any:
        key = self.signature(args)
        runner = self.variants.get(key)
        if runner is None:
            runner = self.variants[key] = self._compile_late(args)
        return runner(args)

    def _compile_late(self, args: Sequence[Any]) -> Callable:
        """A variant compiled at call time. A symbolic trace may record shape guards (a
        decomposition branching on a size) after the caller built its guard function from
        the env: those are checked here on each call; where one fails, the call runs a
        static variant traced for its own sizes."""
        env = self.shape_env
        before = len(env.guards()) if env is not None else 0
        runner = self._compile(args)
        late = env.guards()[before:] if env is not None else []
        if not late:
            return runner
        log.info(
            "symbolic variant recorded %d shape guards after compile: checked per call", len(late)
        )
        return LateGuardedRunner(runner, [g.expr for g in late], self)

    def _run_static(self, args: Sequence[Any]) -> Any:
        return self._compile_static(args)(args)

    def _compile_static(self, args: Sequence[Any]) -> Callable:
        """A variant traced on `args` themselves (their sizes), keyed by them."""
        key = _signature(args)
        runner = self.static_variants.get(key)
        if runner is None:
            values, self.example_values = self.example_values, None
            try:
                runner = self.static_variants[key] = self._compile(args)
            finally:
                self.example_values = values
        return runner

    def _compile(self, args: Sequence[Any]) -> Callable:
        if self.example_values is not None and alias_pattern(args) is not None:
            # inputs sharing storage: the symbolic example values do not (each input has a
            # fake of its own), so a write through one would not reach the others; these
            # calls run static variants, traced on each call's own tensors
            return self._run_static
        if self.artifact_store is not None and alias_pattern(args) is None:
            runner = self.artifact_store.load(args)
            if runner is not None:
                recompute = getattr(runner, "recompute", None)  # a create_graph backward's
                if recompute is not None and recompute.fn is None:
                    recompute.fn = self.fn
                return runner
        requires_grad = [isinstance(a, torch.Tensor) and a.requires_grad for a in args]
        training = torch.is_grad_enabled() and any(requires_grad)
        env = self.shape_env if self.shape_env is not None else self.scalar_env
        traced = self._trace_values(args)
        if training:
            self.traces["joint"] += 1
            joint = trace_joint(
                self.fn,
                traced,
                self.decompositions,
                strict=self.strict,
                requires_grad=requires_grad,
                shape_env=env,
            )
            if joint.tangent_outputs and joint.grad_inputs:
                log.debug("compiling training variant of %s", self.fn)
                partition = self.partition_fn(joint)
                runner = training_runner(
                    joint, partition, args, self.fw_compiler, self.bw_compiler, self.fn
                )
                if self.artifact_store is not None and alias_pattern(args) is None:
                    plan = training_plan(joint, partition)
                    self.artifact_store.save(args, plan, partition.fw_gm, partition.bw_gm)
                return runner
        self.traces["inference"] += 1
        gm = trace_to_aten(self.fn, traced, self.decompositions, strict=self.strict, shape_env=env)
        runner = inference_runner(gm, gm.meta[META_KEY], args, self.fw_compiler)
        if self.artifact_store is not None and alias_pattern(args) is None:
            self.artifact_store.save(args, inference_plan(gm.meta[META_KEY]), gm, None)
        return runner

    def _trace_values(self, args: Sequence[Any]) -> Sequence[Any]:
        """What the trace runs on: the symbolic example values where given, else `args`."""
        if self.example_values is None:
            return args
        return [
            value if is_symbolic_value(value) else arg
            for arg, value in zip(args, self.example_values, strict=True)
        ]


class LateGuardedRunner:
    """A symbolic variant whose trace recorded shape guards nobody else checks: each call
    binds the size symbols from its arguments and checks them; a call they reject runs a
    static variant for its sizes."""

    def __init__(self, runner: Callable, conditions: list, owner: AotFunction) -> None:
        self.runner = runner
        self.conditions = conditions
        self.owner = owner
        self.readers = symbol_readers(owner.example_values)

    def __call__(self, args: Sequence[Any]) -> Any:
        values = {symbol: read(args) for symbol, read in self.readers.items()}
        if all(_holds(c.xreplace(values)) for c in self.conditions):
            return self.runner(args)
        return self.owner._compile_static(args)(args)


def _holds(condition: Any) -> bool:
    """A guard with every symbol bound: true or false (unbound symbols: not proven)."""
    return not getattr(condition, "free_symbols", None) and bool(condition)


class ArtifactStore(Protocol):
    """An on-disk cache of compiled variants (see ember's inductor backend): `load` returns a
    ready runner (built with runtime.plan_runner) or None; `save` is called after a variant
    was traced and compiled, with its plan and its forward (and backward) graphs."""

    def load(self, args: Sequence[Any]) -> Callable | None: ...

    def save(
        self,
        args: Sequence[Any],
        plan: RunnerPlan,
        forward: torch.fx.GraphModule,
        backward: torch.fx.GraphModule | None,
    ) -> None: ...


def aot_function(
    fn: Callable,
    fw_compiler: Compiler,
    bw_compiler: Compiler | None = None,
    decompositions: DecompositionTable | None = None,
    partition_fn: PartitionFn = default_partition,
    *,
    strict: bool = False,
    artifact_store: ArtifactStore | None = None,
    example_values: Sequence[Any] | None = None,
    scalar_env: Any = None,
) -> AotFunction:
    """Compiles `fn` through functional aten graphs: a forward/backward pair wrapped in an
    autograd.Function when an input requires grad under grad mode, else one inference graph.
    Traced lazily, once per (grad mode, input shapes, dtypes, devices, requires_grad).

    `example_values` (one per input) with symbolic sizes (fake tensors whose sizes are
    SymInts, SymInts for int inputs) make the traces symbolic: variants are then keyed
    without sizes, and SymInt inputs are passed as ints at run time.

    `scalar_env`: the ShapeEnv that makes the unbacked symbols of scalars read from tensors
    (`item()`, `aten._local_scalar_dense`) where the inputs are static (else their own env)."""
    compiled = AotFunction(
        fn,
        fw_compiler,
        bw_compiler,
        decompositions,
        partition_fn,
        strict,
        artifact_store,
        example_values,
    )
    if scalar_env is not None:
        compiled.scalar_env = scalar_env
        compiled.artifact_store = None  # the on-disk store keys static graphs of tensors
    return compiled


def _flat_call(module: torch.nn.Module, names: list[str]) -> Callable:
    """`module` as a function of (its state named `names`..., its inputs...). A graph with
    checkpointed regions runs node by node, so the ops traced know their region."""
    marked = has_regions(module)

    def flat(*args: Any) -> Any:
        with swapped_state(module, names, args[: len(names)]):
            if marked:
                return run_marking_regions(module, args[len(names) :])
            return module(*args[len(names) :])

    return flat


def aot_module(
    gm: torch.nn.Module,
    example_inputs: Sequence[Any],
    fw_compiler: Compiler,
    bw_compiler: Compiler | None = None,
    decompositions: DecompositionTable | None = None,
    partition_fn: PartitionFn = default_partition,
    *,
    strict: bool = False,
    artifact_store: ArtifactStore | None = None,
    inputs_guarded: bool = False,
) -> Callable:
    """The Dynamo-backend-shaped entry: `gm(*inputs)` compiled; returns `compiled(*inputs)`.

    The module's own parameters and buffers (if any) become graph inputs, read at each call,
    so gradients reach them and buffer updates are written back. `artifact_store` (see
    ArtifactStore) is asked for each variant before tracing and handed each compiled one. The variant for
    `example_inputs` under the current grad mode is compiled now; others on first use.

    `inputs_guarded=True` is the caller's promise, as a tracer's guards give it, that every
    call passes inputs of the example inputs' kinds (shapes, dtypes, devices, requires_grad);
    then a call in the same grad mode runs the compiled variant without computing its
    signature: at once where that variant writes no input (storage sharing between inputs
    cannot change its result), after comparing the inputs' storage sharing with the example
    inputs' where it does. Other calls take the checked path.
    """
    if not isinstance(gm, torch.nn.Module):
        raise BadArgumentError(f"aot_module needs an nn.Module/GraphModule, got {type(gm)}")
    gm = without_hook_switches(gm)  # the compiled program runs without them
    state = module_state(gm)
    names = [name for name, _ in state]

    flat = _flat_call(gm, names)

    values = _example_values(gm)
    compiled = aot_function(
        flat,
        fw_compiler,
        bw_compiler,
        decompositions,
        partition_fn,
        strict=strict,
        artifact_store=artifact_store,
        example_values=None if values is None else [*(t for _, t in state), *values],
        scalar_env=_scalar_env(gm),
    )

    tensors = tuple(tensor for _, tensor in state)  # the same objects on every call
    variant, shares_as_traced = _warm(compiled, list(tensors), example_inputs)
    if inputs_guarded:
        run = _guarded_run(compiled, variant, tensors, shares_as_traced)
    elif tensors:

        def run(*args: Any) -> Any:
            return compiled(*tensors, *args)

    else:

        def run(*args: Any) -> Any:
            return compiled(*args)

    run.aot_function = compiled  # type: ignore[attr-defined]
    return run


def _guarded_run(
    compiled: AotFunction,
    variant: Callable,
    tensors: tuple,
    shares_as_traced: SharingCheck | None,
) -> Callable:
    """`run(*args)` for inputs_guarded: the warmed variant straight away in its grad mode
    (which a guarded caller may still change: checked, one C call) and, for a variant that
    writes inputs (an optimizer step, batch norm's running statistics), with its inputs'
    storage sharing (one storage lookup per tensor); other calls take the checked path."""
    grad_mode = torch.is_grad_enabled()
    grad_enabled = torch.is_grad_enabled
    if shares_as_traced is not None:

        def run_writing(*args: Any) -> Any:
            full = (*tensors, *args)
            if grad_enabled() == grad_mode and shares_as_traced(full):
                return variant(full)
            return compiled(*full)

        return run_writing
    if tensors:

        def run(*args: Any) -> Any:
            if grad_enabled() == grad_mode:
                return variant((*tensors, *args))
            return compiled(*tensors, *args)

    else:

        def run(*args: Any) -> Any:
            if grad_enabled() == grad_mode:
                return variant(args)
            return compiled(*args)

    return run


def _scalar_env(gm: torch.nn.Module) -> Any | None:
    """The env of a scalar the graph reads from a tensor (`t.item()` in the tracer's graph:
    an unbacked SymInt/SymFloat/SymBool example value), which the trace's fake mode needs
    to read it again; None where no node reads one."""
    if not isinstance(gm, torch.fx.GraphModule):
        return None
    for node in gm.graph.nodes:
        value = node.meta.get("example_value", node.meta.get("val"))
        if node.op != "placeholder" and isinstance(value, SYM_TYPES):
            env = value.node.shape_env
            if getattr(env, "allow_scalar_outputs", False):
                return env
    return None


def _example_values(gm: torch.nn.Module) -> list[Any] | None:
    """The placeholders' example values when any is symbolic (the tracer's meta)."""
    if not isinstance(gm, torch.fx.GraphModule):
        return None
    values = [
        node.meta.get("example_value", node.meta.get("val"))
        for node in gm.graph.nodes
        if node.op == "placeholder"
    ]
    return values if any(is_symbolic_value(v) for v in values) else None


def _warm(
    compiled: AotFunction, state: list[torch.Tensor], example_inputs: Sequence[Any]
) -> tuple[Callable, SharingCheck | None]:
    """Compiles the variant the example inputs call for, without running it; returns it with
    the check of storage sharing a guarded caller's call must pass to run it unchecked
    (aliasing.py): None for a variant that writes no input (plan_runner marks that), since
    storage sharing cannot change what it computes, else the example inputs' sharing. A symbolic
    variant compiled here, while the caller compiles, has its shape guards in the caller's
    guard function (only variants compiled later, at call time, need LateGuardedRunner)."""
    args = [*state, *example_inputs]
    key = compiled.signature(args)
    if key not in compiled.variants:
        compiled.variants[key] = compiled._compile(args)
    variant = compiled.variants[key]
    if getattr(variant, "writes_inputs", True) is False:
        return variant, None
    return variant, SharingCheck(args, alias_pattern(args))


def partition_report(
    fn: Callable,
    example_inputs: Sequence[Any],
    decompositions: DecompositionTable | None = None,
) -> dict[str, PartitionReport]:
    """Bytes saved for backward by each partitioner on `fn(*example_inputs)` (a module's
    parameters count as inputs). Keys: 'default', 'min_cut'."""
    if isinstance(fn, torch.nn.Module):
        state = module_state(fn)
        names = [name for name, _ in state]
        example_inputs = [*[t for _, t in state], *example_inputs]
        fn = _flat_call(fn, names)
    joint = trace_joint(fn, example_inputs, decompositions)
    return {
        "default": default_partition(joint).report,
        "min_cut": min_cut_rematerialization_partition(joint).report,
    }
