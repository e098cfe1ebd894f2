"""How the traced function's outputs are rebuilt at run time from the graph's outputs.

Each leaf of the function's output is one of: a graph output, a graph input returned as is,
a view of a graph input (regenerated outside the graph so that it aliases the real input as
in eager), or a constant (a non-tensor value fixed at trace time).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import TreeSpec, tree_unflatten

from ember_aot_autograd.tensor_table import ViewStep


@dataclass(frozen=True)
class FromGraph:
    index: int  # among the graph's user outputs


@dataclass(frozen=True)
class SameAsInput:
    input_index: int


@dataclass(frozen=True)
class ViewOfInput:
    input_index: int
    chain: tuple[ViewStep, ...]


@dataclass(frozen=True)
class Constant:
    value: Any


Leaf = FromGraph | SameAsInput | ViewOfInput | Constant


@dataclass(frozen=True)
class OutputSpec:
    """Leaves of the function's output, and its pytree structure."""

    leaves: tuple[Leaf, ...]
    treespec: TreeSpec

    def rebuild(self, inputs: list[Any], graph_outputs: list[Any]) -> Any:
        values = []
        for leaf in self.leaves:
            if isinstance(leaf, FromGraph):
                values.append(graph_outputs[leaf.index])
            elif isinstance(leaf, SameAsInput):
                values.append(inputs[leaf.input_index])
            elif isinstance(leaf, ViewOfInput):
                tensor = inputs[leaf.input_index]
                for step in leaf.chain:
                    tensor = step.apply(tensor)
                values.append(tensor)
            else:
                values.append(leaf.value)
        return tree_unflatten(values, self.treespec)


def is_tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)
