"""Calling a module with its parameters and buffers replaced by given tensors.

aot_module traces `gm` with its parameters and buffers as graph inputs, so that gradients
reach them and in-place buffer updates (BatchNorm running stats) are copied back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch


def module_state(module: torch.nn.Module) -> list[tuple[tuple[str, ...], torch.Tensor]]:
    """(qualified names, tensor) of each parameter then each buffer; a tensor reachable
    under several names (tied weights) appears once, with all its names."""
    names: dict[int, list[str]] = {}
    tensors: dict[int, torch.Tensor] = {}
    named = [
        *module.named_parameters(remove_duplicate=False),
        *module.named_buffers(remove_duplicate=False),
    ]
    for name, tensor in named:
        names.setdefault(id(tensor), []).append(name)
        tensors[id(tensor)] = tensor
    return [(tuple(names[key]), tensors[key]) for key in tensors]


def _owner(module: torch.nn.Module, name: str) -> tuple[torch.nn.Module, str]:
    *path, leaf = name.split(".")
    for part in path:
        module = getattr(module, part)
    return module, leaf


@contextlib.contextmanager
def swapped_state(
    module: torch.nn.Module,
    names: Sequence[tuple[str, ...]],
    tensors: Sequence[torch.Tensor],
) -> Iterator[None]:
    """Within the block, module.<name> is the given tensor, for each of its names."""
    saved = []
    try:
        for aliases, tensor in zip(names, tensors, strict=True):
            for name in aliases:
                owner, leaf = _owner(module, name)
                table = owner._parameters if leaf in owner._parameters else owner._buffers
                saved.append((table, leaf, table[leaf]))
                table[leaf] = tensor
        yield
    finally:
        for table, leaf, original in reversed(saved):
            table[leaf] = original
