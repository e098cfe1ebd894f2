"""Run-time wrappers around compiled graphs: inference, and training as an autograd.Function.

Both copy the new values of written inputs back into the real inputs (`copy_` under
no_grad, which bumps their version counters as eager's in-place op would) and rebuild the
function's output (views of inputs regenerated from the real inputs, constants, ...).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx
from torch.utils._pytree import tree_structure

from ember_aot_autograd.aliasing import storage_id
from ember_aot_autograd.double_backward import EagerRecompute, differentiating_raises
from ember_aot_autograd.graph_checks import assert_functional, assert_has_val
from ember_aot_autograd.joint import JointGraph
from ember_aot_autograd.missing_tangents import TangentPresence, tangent_masks
from ember_aot_autograd.op_kinds import is_random
from ember_aot_autograd.outputs import FromGraph
from ember_aot_autograd.partition.common import Partition
from ember_aot_autograd.plan import RunnerPlan
from ember_aot_autograd.session import TraceInfo
from ember_events import emit

Compiler = Callable[[torch.fx.GraphModule, list], Callable]
increment_version = torch.autograd.graph.increment_version
#: ``gm.meta`` key of an inference graph handed to a compiler: (output index, placeholder
#: position) for each output the runtime copies into that input after the call. A compiler
#: may write the output into the input itself and return the input: the copy is skipped
#: (the version counter still moves, as eager's in-place op moves it).
INPUT_WRITES_META = "ember_input_writes"
graph_log = logging.getLogger("ember.aot_graphs")
#: A traced graph holds autocast's casts as explicit ops; run under the caller's autocast,
#: its ops would be cast again: a product the user kept in float32 (an autocast-disabled
#: block: Llama's rotary embedding) computed in bfloat16, and a library call's result not
#: of the dtype the compiled code planned its buffers for (read as float32: garbage on the
#: CPU, an illegal memory access on the GPU). Compiled graphs run with autocast off.
any_autocast = torch._C._is_any_autocast_enabled
autocast_off = torch._C._DisableAutocast


class _Code:
    """Formats a graph's code only if the log record is emitted."""

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        self.gm = gm

    def __str__(self) -> str:
        return self.gm.code


def _checked(gm: torch.fx.GraphModule, kind: str = "inference") -> torch.fx.GraphModule:
    assert_functional(gm)
    assert_has_val(gm)
    graph_log.debug("%s graph:%s", kind, _Code(gm))
    emit("graph", gm=gm, stage=f"aot_{kind}")  # prim level: decomposed while traced
    return gm


def _placeholder_vals(gm: torch.fx.GraphModule) -> list:
    return [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]


def _write_back(target: torch.Tensor, value: torch.Tensor) -> None:
    if value.requires_grad:
        # the written value has a history (a ReLU(inplace) on an activation): copy it in
        # under autograd, so that the input's later readers differentiate through it
        target.copy_(value)
    else:
        with torch.no_grad():
            target.copy_(value)


def _distinct_storages(targets: Sequence[torch.Tensor]) -> bool:
    """No two written inputs share a storage (else the writes keep their order, one by one).
    A tensor without a storage of its own (a wrapper subclass, a sparse layout) says no."""
    try:
        pointers = {t.untyped_storage().data_ptr() for t in targets}
    except (RuntimeError, NotImplementedError, TypeError):
        return False
    return len(pointers) == len(targets)


class _WriteBack:
    """Copies the new values of a variant's written inputs into the real inputs.

    How is the same on every call of one variant, since its key fixes the inputs' dtypes,
    devices, requires_grad and storage sharing: it is decided on the first call. Values
    without autograd history written to inputs that share no storage go in one
    multi-tensor copy per dtype and device (a training step writes every batch norm's
    running statistics, ResNet-50: 159 buffers; an optimizer every parameter and both its
    moments: ~5 us of Python and a copy kernel each, one by one); values with a history are
    copied in under autograd; inputs that share a storage are written one by one, in order."""

    def __init__(self, mutated_inputs: Sequence[int]) -> None:
        self.mutated_inputs = tuple(mutated_inputs)
        self.one_by_one: list[tuple[int, int]] | None = None  # (input, output)
        self.batches: list[tuple[list[int], list[int]]] = []  # (inputs, outputs)

    def _decide(self, args: Sequence[Any], outputs: Sequence[Any]) -> None:
        pairs = [(index, k) for k, index in enumerate(self.mutated_inputs)]
        targets = [args[index] for index in self.mutated_inputs]
        if len(pairs) < 2 or not _distinct_storages(targets):
            self.one_by_one = pairs
            return
        self.one_by_one = [(index, k) for index, k in pairs if outputs[k].requires_grad]
        groups: dict[tuple, tuple[list[int], list[int]]] = {}
        for index, k in pairs:
            target, value = args[index], outputs[k]
            if value.requires_grad:
                continue
            # one dtype and device per copy: a list mixing them (float running statistics
            # and int64 batch counters) makes CUDA's multi-tensor copy fall back to one each
            key = (target.dtype, value.dtype, target.device, value.device)
            group = groups.setdefault(key, ([], []))
            group[0].append(index)
            group[1].append(k)
        self.batches = list(groups.values())

    def __call__(self, args: Sequence[Any], outputs: Sequence[Any]) -> None:
        if self.one_by_one is None:
            self._decide(args, outputs)
        in_place = []
        for index, k in self.one_by_one:
            target, value = args[index], outputs[k]
            if value is target:  # written in place by the compiled graph (INPUT_WRITES_META)
                in_place.append(target)
            else:
                _write_back(target, value)
        if in_place:  # one call for all (an optimizer writes every parameter in place)
            increment_version(in_place)
        if not self.batches:
            return
        with torch.no_grad():
            for inputs, values in self.batches:
                targets = [args[i] for i in inputs]
                news = [outputs[k] for k in values]
                written = [t for t, v in zip(targets, news, strict=True) if v is t]
                if written:  # the version bump eager's in-place op makes
                    increment_version(written)
                    kept = [(t, v) for t, v in zip(targets, news, strict=True) if v is not t]
                    targets, news = [t for t, _ in kept], [v for _, v in kept]
                if targets:
                    torch._foreach_copy_(targets, news)


def _finisher(plan: RunnerPlan) -> Callable[[Sequence[Any], Sequence[Any]], Any]:
    """`finish(args, fw_outputs)` for this plan: the written inputs copied back and the
    function's output rebuilt, or for the common output (a flat tuple of the graph's
    outputs in order, no input written) just that tuple."""
    leaves = plan.output_spec.leaves
    n = len(leaves)
    flat = (
        not plan.mutated_inputs
        and all(isinstance(leaf, FromGraph) and leaf.index == k for k, leaf in enumerate(leaves))
        and plan.output_spec.treespec == tree_structure((0,) * n)
    )
    if flat:
        return lambda args, fw_outputs: tuple(fw_outputs[:n])
    n_mutated = len(plan.mutated_inputs)
    write_back = _WriteBack(plan.mutated_inputs)
    rebuild = plan.output_spec.rebuild

    def finish(args: Sequence[Any], fw_outputs: Sequence[Any]) -> Any:
        if n_mutated:
            write_back(args, fw_outputs)
        return rebuild(list(args), list(fw_outputs[n_mutated:]))

    return finish


def _selector(tensor_inputs: Sequence[int]) -> Callable[[Sequence[Any]], Sequence[Any]]:
    """`select(args)`: the graph inputs among the function's inputs (a slice when they lead)."""
    n = len(tensor_inputs)
    if tuple(tensor_inputs) == tuple(range(n)):
        return lambda args: args[:n]
    return lambda args: [args[i] for i in tensor_inputs]


def input_writes(
    tensor_inputs: Sequence[int], mutated_inputs: Sequence[int]
) -> tuple[tuple[int, int], ...]:
    """INPUT_WRITES_META of an inference graph: (graph output, placeholder position) for
    each written input (the graph returns their new values first, in order)."""
    position = {index: p for p, index in enumerate(tensor_inputs)}
    return tuple((k, position[i]) for k, i in enumerate(mutated_inputs) if i in position)


def inference_plan(info: TraceInfo) -> RunnerPlan:
    return RunnerPlan(
        "inference", tuple(info.tensor_inputs), tuple(info.mutated_inputs), info.output_spec
    )


def training_plan(joint: JointGraph, partition: Partition) -> RunnerPlan:
    info = joint.info
    primal_of_input = {index: p for p, index in enumerate(info.tensor_inputs)}
    grad_slots = [
        primal_of_input[index]
        for index, has in zip(joint.grad_inputs, partition.bw_grad_mask, strict=True)
        if has
    ]
    return RunnerPlan(
        "training",
        tuple(info.tensor_inputs),
        tuple(info.mutated_inputs),
        info.output_spec,
        num_fw_outputs=partition.num_fw_outputs,
        tangent_outputs=tuple(joint.tangent_outputs),
        grad_slots=tuple(grad_slots),
        symbolic_saved=tuple(partition.symbolic_saved),
        num_saved=partition.num_saved,
        grad_masks=tangent_masks(partition.bw_gm, partition.num_saved),
        stale_saved=joint.stale_saved,
        draws_random=any(is_random(node.target) for node in partition.fw_gm.graph.nodes),
    )


def inference_runner(
    gm: torch.fx.GraphModule, info: TraceInfo, example_inputs: Sequence[Any], compiler: Compiler
) -> Callable[[Sequence[Any]], Any]:
    gm.meta[INPUT_WRITES_META] = input_writes(info.tensor_inputs, info.mutated_inputs)
    compiled = compiler(_checked(gm), [example_inputs[i] for i in info.tensor_inputs])
    return plan_runner(inference_plan(info), compiled)


def training_runner(
    joint: JointGraph,
    partition: Partition,
    example_inputs: Sequence[Any],
    fw_compiler: Compiler,
    bw_compiler: Compiler,
    eager_fn: Callable | None = None,
) -> Callable[[Sequence[Any]], Any]:
    """`eager_fn` (the traced function) serves a backward under create_graph=True."""
    info = joint.info
    compiled_fw = fw_compiler(
        _checked(partition.fw_gm, "forward"), [example_inputs[i] for i in info.tensor_inputs]
    )
    compiled_bw = bw_compiler(
        _checked(partition.bw_gm, "backward"), _placeholder_vals(partition.bw_gm)
    )
    return plan_runner(training_plan(joint, partition), compiled_fw, compiled_bw, eager_fn)


def plan_runner(
    plan: RunnerPlan,
    compiled_fw: Callable,
    compiled_bw: Callable | None = None,
    eager_fn: Callable | None = None,
) -> Callable[[Sequence[Any]], Any]:
    """The runtime wrapper of compiled graphs: `run(args)` with the function's own inputs.

    Built from plain data only, so an artifact cache can rebuild it without tracing.
    A training runner's `recompute` (double_backward.py) runs a backward under
    create_graph=True through `eager_fn`, which its owner may set later (`recompute.fn`)."""
    select = _selector(plan.tensor_inputs)
    finish = _finisher(plan)
    if plan.kind == "inference":
        return _inference_run(plan, compiled_fw, select, finish)
    if compiled_bw is None:
        raise ValueError("a training plan needs a compiled backward graph")
    recompute = EagerRecompute(plan, eager_fn)
    function = _compiled_function(plan, compiled_fw, _backward(plan, compiled_bw), recompute)

    def run(args: Sequence[Any]) -> Any:
        return finish(args, function.apply(args, *select(args)))

    run.writes_inputs = bool(plan.mutated_inputs)
    run.recompute = recompute
    return run


def _inference_run(
    plan: RunnerPlan, compiled_fw: Callable, select: Callable, finish: Callable
) -> Callable[[Sequence[Any]], Any]:
    grad_enabled = torch.is_grad_enabled
    no_grad = torch.no_grad

    def run_inference(args: Sequence[Any]) -> Any:
        if any_autocast():
            with autocast_off():
                return run_inference(args)  # autocast off inside: the plain paths below
        if not grad_enabled():
            return finish(args, compiled_fw(*select(args)))
        # Grad mode is on but nothing the graph makes is differentiable (else this
        # would be a training variant; an optimizer step writing parameters under
        # no_grad is one): run it as eager's no_grad ops would, recording no history
        # (out= kernels refuse inputs that require grad; written leaves must not get one)
        with no_grad():
            outputs = compiled_fw(*select(args))
        return finish(args, outputs)

    run_inference.writes_inputs = bool(plan.mutated_inputs)  # see aot_module's inputs_guarded
    run_inference.recompute = None  # no backward
    return run_inference


def _backward(plan: RunnerPlan, compiled_bw: Callable) -> Callable:
    """`run_backward(ctx, *grad_outputs)`: the compiled backward on the saved values and the
    present tangents, its gradients placed in the primals' slots. A compiled backward that
    `owns_arguments` is called with one list of them, which it empties as it uses them,
    and the context lets go of the saved values first (unless the graph is retained): the
    activations then die one by one while the gradients are made, not all at its end."""
    owns_arguments = getattr(compiled_bw, "owns_arguments", False)
    grad_slots = list(plan.grad_slots)
    n_primals = len(plan.tensor_inputs)
    symbolic_saved = set(plan.symbolic_saved)  # saved values that are sizes (ints)
    n_saved = plan.num_saved
    tangent_outputs = list(plan.tangent_outputs)
    presence = TangentPresence(tangent_outputs, plan.grad_masks or (0,) * len(grad_slots))
    all_present = (1 << len(tangent_outputs)) - 1
    stale_saved = plan.stale_saved

    def run_backward(ctx, *grad_outputs):
        saved = ctx.saved_tensors  # raises like eager on a second backward
        if symbolic_saved:
            tensors = iter(saved)
            saved = [ctx.sizes[k] if k in ctx.sizes else next(tensors) for k in range(n_saved)]
        tangents, present = presence.tangents(ctx, grad_outputs)
        for mask, message in stale_saved:  # eager's backward reads a written saved tensor
            if mask & present:
                raise RuntimeError(message)
        if owns_arguments:
            args = [*saved, *tangents]
            del saved, tangents
            ctx.maybe_clear_saved_tensors()  # a no-op under retain_graph=True
            if any_autocast():  # a backward under autocast (see any_autocast)
                with autocast_off():
                    grads = compiled_bw(args)
            else:
                grads = compiled_bw(args)
        elif any_autocast():
            with autocast_off():
                grads = compiled_bw(*saved, *tangents)
        else:
            grads = compiled_bw(*saved, *tangents)
        result: list[torch.Tensor | None] = [None] * n_primals
        if present == all_present:
            for slot, grad in zip(grad_slots, grads, strict=True):
                result[slot] = grad
        else:  # gradients reached only from absent tangents stay None, as eager's
            for slot, grad, keep in zip(grad_slots, grads, presence.kept(present), strict=True):
                if keep:
                    result[slot] = grad
        return tuple(result)

    return run_backward


def _kept_for_backward(written: Sequence[int]) -> Callable:
    """`kept(primals, saved)`: a saved value sharing storage with a primal the wrapper
    writes afterwards is saved as a copy: the write would otherwise change what the backward
    reads. The common case, no such value (ResNet-50: 160 written buffers, ~300 saved
    values), is two C-level passes over storage identities."""

    def kept_for_backward(primals: Sequence[Any], saved: Sequence[Any]) -> Sequence[Any]:
        storages = set(map(storage_id, [primals[p] for p in written]))
        tensors = [t for t in saved if isinstance(t, torch.Tensor)]
        if storages.isdisjoint(map(storage_id, tensors)):
            return saved
        return [
            t.clone() if isinstance(t, torch.Tensor) and storage_id(t) in storages else t
            for t in saved
        ]

    return kept_for_backward


_NOT_DETERMINISTIC = (
    "This compiled backward function is being run with torch.use_deterministic_algorithms"
    "(True), but it was compiled with its forward while deterministic algorithms were off, so "
    "its kernels may not be deterministic. Run the forward under the same setting (the "
    "function is compiled again for it)."
)


def _compiled_function(
    plan: RunnerPlan, compiled_fw: Callable, run_backward: Callable, recompute: EagerRecompute
) -> type[torch.autograd.Function]:
    """The autograd.Function of a training plan: the compiled forward saving what the
    backward reads, `run_backward` as its backward (`recompute`'s under create_graph)."""
    n_fw = plan.num_fw_outputs
    tangent_outputs = list(plan.tangent_outputs)
    non_differentiable = [k for k in range(n_fw) if k not in set(tangent_outputs)]
    written = [plan.tensor_inputs.index(i) for i in plan.mutated_inputs]  # primals written after
    kept_for_backward = _kept_for_backward(written)
    symbolic_saved = set(plan.symbolic_saved)  # saved values that are sizes (ints)
    Tensor = torch.Tensor
    grad_enabled = torch.is_grad_enabled
    differentiable = _differentiable_backward(plan, run_backward, recompute)
    # the backward's kernels were chosen with the forward, under this setting
    compiled_deterministic = torch.are_deterministic_algorithms_enabled()

    class CompiledFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, args, *primals):
            # an output the loss did not use gets None, not zeros (missing_tangents.py)
            ctx.set_materialize_grads(False)
            # the call's own inputs, for a backward under create_graph (double_backward.py)
            ctx.call_args, ctx.primals = args, primals
            ctx.versions = [p._version for p in primals if isinstance(p, Tensor)]
            if any_autocast():  # see any_autocast
                with autocast_off():
                    outputs = compiled_fw(*primals)
            else:
                outputs = compiled_fw(*primals)
            saved = outputs[n_fw:]
            if symbolic_saved:  # sizes the backward needs: ints, kept beside the tensors
                ctx.sizes = {k: saved[k] for k in symbolic_saved}
                saved = [t for k, t in enumerate(saved) if k not in ctx.sizes]
            ctx.save_for_backward(*(kept_for_backward(primals, saved) if written else saved))
            # A compiled graph may return views of its own storage; to autograd, a view made
            # inside a custom Function may not be written in place (a ReLU(inplace) reading
            # the output), so outputs leave as plain aliases, as eager's ops return them.
            fw_outputs = tuple(
                [
                    o.detach() if isinstance(o, Tensor) and o._is_view() else o
                    for o in outputs[:n_fw]
                ]
            )
            if non_differentiable:
                ctx.mark_non_differentiable(
                    *[
                        fw_outputs[k]
                        for k in non_differentiable
                        if isinstance(fw_outputs[k], Tensor)
                    ]
                )
            return fw_outputs

        @staticmethod
        def backward(ctx, *grad_outputs):
            if not compiled_deterministic and torch.are_deterministic_algorithms_enabled():
                raise RuntimeError(_NOT_DETERMINISTIC)
            # The compiled backward is not differentiable: under create_graph=True (grad
            # mode on) the gradients come from an eager recomputation, which is
            # (double_backward.py); in a plain backward grad mode is off.
            if grad_enabled():
                return (None, *differentiable(ctx, grad_outputs))
            return (None, *run_backward(ctx, *grad_outputs))

    return CompiledFunction


def _differentiable_backward(
    plan: RunnerPlan, run_backward: Callable, recompute: EagerRecompute
) -> Callable:
    """`backward(ctx, grad_outputs)` under create_graph=True: gradients with eager's
    history, or the compiled ones marked so that differentiating them raises."""

    def backward(ctx, grad_outputs):
        primals = ctx.primals
        reason = recompute.refusal(primals, ctx.versions)
        if reason is None:
            grads = recompute.grads(ctx.call_args, primals, grad_outputs)
            if grads is not None:
                result: list[Any] = [None] * len(primals)
                for slot, grad in zip(plan.grad_slots, grads, strict=True):
                    result[slot] = grad
                return tuple(result)
            reason = "its eager recomputation returned other outputs"
        with torch.no_grad():
            result = list(run_backward(ctx, *grad_outputs))
        present = [k for k, g in enumerate(result) if isinstance(g, torch.Tensor)]
        if present:
            marked = differentiating_raises([result[k] for k in present], reason)
            for k, grad in zip(present, marked, strict=True):
                result[k] = grad
        return tuple(result)

    return backward
