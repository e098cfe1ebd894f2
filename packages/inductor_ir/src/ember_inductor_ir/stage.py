"""``lower(gm, example_inputs, target=...)``: the loop-IR stage's entry point. Resolves the
code generator's capability record (target.py), rewrites the graph where the record asks
for it, lowers it (graph.py), verifies the result and logs its dump."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.fx
from torch.utils._pytree import tree_flatten

from .broadcast_matmuls import matmuls_over_broadcast_rows
from .dump import log_lowering
from .errors import DynamicShapeUnsupported
from .graph import GraphLowering, has_symbolic_layout
from .matmul_batching import batch_step_matmuls
from .matmul_padding import pad_matmul_dims
from .narrow_stores import narrow_stores
from .target import Target, resolve_target, target_for_device
from .verifier import verify


def has_symbolic_sizes(gm: torch.fx.GraphModule) -> bool:
    for node in gm.graph.nodes:
        for leaf in tree_flatten(node.meta.get("val"))[0]:
            if isinstance(leaf, torch.SymInt):
                return True
            if isinstance(leaf, torch.Tensor) and has_symbolic_layout(leaf):
                return True
    return False


def graph_device_type(example_inputs: Sequence[Any]) -> str:
    """The device type of the first tensor input ("cpu" for a graph without one)."""
    for value in example_inputs:
        if isinstance(value, torch.Tensor):
            return value.device.type
    return "cpu"


def lower(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    *,
    target: Target | str | None = None,
    input_writes: Sequence[tuple[int, int]] = (),
) -> GraphLowering:
    """Lower a functional prim-level FX graph (nodes carry ``meta['val']``) to loop IR.

    ``target``: the capability record of the code generator the IR is for (target.py), or
    the name it is registered under ("cpp", "triton" once ember_codegen is imported); by
    default the one registered for the inputs' device type (REFERENCE where none is).
    Lowering choices read its fields: a target that runs library calls for what its loops
    do poorly (the C++ one) gets an add of a matmul product folded into ``addmm``, a cat of
    many inputs as aten's copy and the matmuls over the steps of one tensor batched; one
    that fuses pointwise epilogues into its own matmul template (Triton) keeps those as
    loop IR.

    ``input_writes``: (output index, placeholder position) pairs whose output the caller
    copies into that input after each call: the memory plan may write it there directly
    (GraphLowering.donate)."""
    if target is None:
        record = target_for_device(graph_device_type(example_inputs))
    else:
        record = resolve_target(target)
    if not record.symbolic_sizes and has_symbolic_sizes(gm):
        raise DynamicShapeUnsupported(
            f"the {record.name} code generator takes static sizes only; this graph has "
            "symbolic ones"
        )
    gm = matmuls_over_broadcast_rows(gm)
    gm = pad_matmul_dims(gm, record.matmul_alignment_bytes)
    if record.batch_step_matmuls:  # a Triton template could not fuse a sliced product's readers
        gm = batch_step_matmuls(gm)
    try:
        lowering = GraphLowering(gm, example_inputs, target=record).run()
        lowering.donate(input_writes)
        if record.narrow_stores:  # after donate: a donated output is never narrowed
            narrow_stores(lowering)
        verify(lowering)
    except (TypeError, NotImplementedError) as exc:
        # a lowering that needs a static size met a symbol (int() of a sympy expression):
        # declared as such, so that the caller may compile static specializations
        if not has_symbolic_sizes(gm):
            raise
        raise DynamicShapeUnsupported(f"a lowering needs static sizes: {exc}") from exc
    log_lowering(lowering)
    return lowering


__all__ = ["graph_device_type", "has_symbolic_sizes", "lower"]
