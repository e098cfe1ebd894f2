"""One trace: fake inputs in, a tracer running the function, outputs collected, a module out.

Shared by the inference trace (trace.py) and the joint trace (joint.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.utils._pytree import tree_flatten

from ember_aot_autograd.errors import InputMutationError
from ember_aot_autograd.graph_checks import clean
from ember_aot_autograd.outputs import (
    Constant,
    FromGraph,
    OutputSpec,
    SameAsInput,
    size_output,
    view_of_input,
)
from ember_aot_autograd.symbolic import static_fake, symbol_readers, symbolic_dispatch
from ember_aot_autograd.tensor_table import storage_key
from ember_aot_autograd.tracer import DecompositionTable, FunctionalTracer, TraceReport


@dataclass
class TraceInfo:
    """What the runtime wrapper needs besides the graph: inputs, mutations, outputs."""

    tensor_inputs: list[int]  # positions of the function's inputs that are graph placeholders
    mutated_inputs: list[int]  # inputs written by the function, in graph-output order
    output_spec: OutputSpec
    num_user_outputs: int  # graph outputs after the mutated inputs' new values
    report: TraceReport

    @property
    def num_fw_outputs(self) -> int:
        return len(self.mutated_inputs) + self.num_user_outputs


@dataclass
class Collected:
    mutated_inputs: list[int]
    mutation_nodes: list[torch.fx.Node]
    user_tensors: list[torch.Tensor]
    user_nodes: list[torch.fx.Node]
    output_spec: OutputSpec


class TraceSession:
    def __init__(
        self, decompositions: DecompositionTable | None, strict: bool, shape_env: Any = None
    ) -> None:
        # symbolic example values: a fake mode over the env their SymInts belong to (its
        # dispatch cache keys SymInts through PyTorch's own ShapeEnv internals: off)
        self.fake_mode = FakeTensorMode(allow_non_fake_inputs=True, shape_env=shape_env)
        if shape_env is not None:
            self.fake_mode.cache_enabled = False
        self.tracer = FunctionalTracer(self.fake_mode, decompositions, strict=strict)
        self.inputs: list[Any] = []
        self.tensor_inputs: list[int] = []
        self.grad_leaves: dict[int, torch.Tensor] = {}  # input index -> the leaf grads are for
        # input index -> the history its alias starts with: a write recorded under no_grad
        # (an optimizer step) leaves it, one recorded by autograd replaces it
        self.entry_grad_fns: dict[int, Any] = {}
        # inputs sharing storage with another input where one of them requires grad: its
        # alias is a clone (own storage), so a write could not reach the others
        self.grad_aliased: list[int] = []

    def make_inputs(
        self, example_inputs: Sequence[Any], requires_grad: Sequence[bool], prefix: str
    ) -> list[Any]:
        """Fake leaves (placeholders) for tensor inputs; other values are specialized."""
        sharing: dict[int, list[int]] = {}  # storage -> tensor inputs viewing it
        for index, value in enumerate(example_inputs):
            if isinstance(value, torch.Tensor) and value.layout == torch.strided:
                sharing.setdefault(storage_key(value), []).append(index)
        self.grad_aliased = [
            i
            for group in sharing.values()
            if len(group) > 1 and any(requires_grad[k] for k in group)
            for i in group
        ]
        for index, (value, grad) in enumerate(zip(example_inputs, requires_grad, strict=True)):
            if isinstance(value, torch.SymInt):  # a symbolic int input: a placeholder
                self.tracer.add_symint_input(value, f"{prefix}_{len(self.tensor_inputs)}")
                self.tensor_inputs.append(index)
                self.inputs.append(value)
                continue
            if not isinstance(value, torch.Tensor):
                self.inputs.append(value)
                continue
            fake = self._fake(value)
            if grad:
                # The function sees a non-leaf alias, so that it may write the input in place
                # as eager lets it write a non-leaf; gradients are taken at the leaf, i.e. for
                # the value the input had when the function was called. (Untraced: the clone
                # happens outside the tracer.)
                leaf = fake.requires_grad_(True)
                with torch.enable_grad():
                    fake = leaf.clone()
                self.grad_leaves[index] = leaf
                self.entry_grad_fns[index] = fake.grad_fn
            self.tracer.add_input(fake, f"{prefix}_{len(self.tensor_inputs)}", index)
            self.tensor_inputs.append(index)
            self.inputs.append(fake)
        return self.inputs

    def dispatch(self) -> contextlib.AbstractContextManager:
        """How the trace dispatches: the Python dispatcher where an input has symbolic sizes
        (symbolic.symbolic_dispatch) or where the trace reads scalars from tensors (their
        unbacked values reach C++ composites as sizes: interpolate's), else as usual."""
        scalars = getattr(self.fake_mode.shape_env, "allow_scalar_outputs", False)
        return symbolic_dispatch(self.inputs, always=scalars)

    def _fake(self, value: torch.Tensor) -> torch.Tensor:
        if isinstance(value, FakeTensor) or value.device.type == "meta":
            with self.fake_mode:
                return torch.empty_strided(
                    value.shape, value.stride(), dtype=value.dtype, device=value.device
                )
        return static_fake(self.fake_mode, value.detach())

    def collect(self, output: Any) -> Collected:
        """Graph values for the mutated inputs and the output leaves (read, not recorded)."""
        tracer = self.tracer
        mutated, mutation_nodes = [], []
        for index in self.tensor_inputs:
            fake = self.inputs[index]
            if not isinstance(fake, torch.Tensor):
                continue  # a SymInt input
            state = tracer.table.get(fake).storage
            if not state.mutated:
                continue
            if index in self.grad_aliased:
                raise InputMutationError(
                    index, "written while sharing storage with another input (one requires grad)"
                )
            if state.input_index != index:
                continue  # an alias of the owner: its write comes back with the owner's
            mutated.append(index)
            mutation_nodes.append(tracer.read(fake))
        leaves, treespec = tree_flatten(output)
        spec_leaves, user_tensors, user_nodes = [], [], []
        for leaf in leaves:
            if isinstance(leaf, torch.SymInt | torch.SymFloat | torch.SymBool):
                if self._read_in_graph(leaf):  # a scalar read from a tensor (item()): the
                    spec_leaves.append(FromGraph(len(user_nodes)))  # graph computes it
                    user_tensors.append(leaf)
                    user_nodes.append(tracer.symbols.node_of(leaf))
                    continue
                spec_leaves.append(size_output(leaf, self.inputs))  # from the inputs' sizes
                continue
            if not isinstance(leaf, torch.Tensor):
                spec_leaves.append(Constant(leaf))
                continue
            entry = tracer.table.get(leaf) or tracer.lift_unknown(leaf)
            owner = entry.storage.input_index
            if owner is not None and leaf is self.inputs[owner]:
                spec_leaves.append(SameAsInput(owner))
            elif owner is not None and not _custom_history(leaf):
                # a view of an input: rebuilt from the real input so that it aliases it
                spec_leaves.append(view_of_input(owner, entry.chain, self.inputs))
            else:
                spec_leaves.append(FromGraph(len(user_nodes)))
                user_tensors.append(leaf)
                user_nodes.append(tracer.read(leaf))
        spec = OutputSpec(tuple(spec_leaves), treespec)
        return Collected(mutated, mutation_nodes, user_tensors, user_nodes, spec)

    def _read_in_graph(self, value: torch.SymInt | torch.SymFloat | torch.SymBool) -> bool:
        """Whether `value` depends on a scalar an op of the graph reads from a tensor
        (`_local_scalar_dense`): an output the graph computes, not the inputs' sizes."""
        expr = value.node.shape_env.simplify(value.node.expr)
        missing = expr.free_symbols - symbol_readers(self.inputs).keys()
        return bool(missing) and missing <= self.tracer.symbols.roots.keys()

    def info(self, collected: Collected) -> TraceInfo:
        return TraceInfo(
            tensor_inputs=list(self.tensor_inputs),
            mutated_inputs=collected.mutated_inputs,
            output_spec=collected.output_spec,
            num_user_outputs=len(collected.user_nodes),
            report=self.tracer.report,
        )

    def build_module(self, outputs: list[torch.fx.Node | None]) -> torch.fx.GraphModule:
        graph = self.tracer.graph
        graph.output(tuple(outputs))
        clean(graph)
        root = torch.nn.Module()
        for name, constant in self.tracer.constants.items():
            root.register_buffer(name, constant)
        return torch.fx.GraphModule(root, graph)


def _custom_history(leaf: torch.Tensor) -> bool:
    """Whether the autograd history of `leaf` (a view of an input) passes through a user's
    autograd.Function (which returned its input, or a view of it): regenerating the view
    from the real input would give it the view's own gradient, not the user's backward, so
    it leaves the graph as an output of its own."""
    todo, seen = [leaf.grad_fn], 0
    while todo and seen < _HISTORY_LIMIT:
        node = todo.pop()
        if node is None:
            continue
        if isinstance(node, torch.autograd.function.BackwardCFunction):
            return True
        seen += 1
        todo.extend(next_node for next_node, _ in node.next_functions)
    return False


_HISTORY_LIMIT = 64  # autograd nodes looked at, from a view output back towards its input
