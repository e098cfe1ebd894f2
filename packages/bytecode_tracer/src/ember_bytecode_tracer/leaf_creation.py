"""Tensors made into autograd leaves inside a trace: a graph break before the op.

Eager makes a tensor a leaf that requires grad where a factory is called with
`requires_grad=True` (`torch.ones(3, requires_grad=True)`) or `.requires_grad_()` is called on
a tensor that does not require grad yet. Such a leaf lives outside any graph's autograd
function: a compiled graph would hand it back detached, with the outputs computed from it
cut off from it (no grad_fn, no `.grad` after backward). The op runs eagerly at a graph break
instead, and what follows is traced with the leaf as a graph input, as eager sees it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import tree_leaves


def _name(target: Any) -> str:
    return target if isinstance(target, str) else getattr(target, "__name__", str(target))


def leaf_creation_reason(op: str, target: Any, args: tuple, kwargs: dict) -> str | None:
    """Why `target(*args, **kwargs)` (example values) would create a leaf requiring grad."""
    name = _name(target)
    if kwargs.get("requires_grad") is True:
        return f"{name}(requires_grad=True) creates an autograd leaf inside the traced region"
    if name != "requires_grad_" or not args or not isinstance(args[0], torch.Tensor):
        return None
    flag = args[1] if len(args) > 1 else kwargs.get("requires_grad", True)
    if flag and not args[0].requires_grad:
        return "Tensor.requires_grad_() makes an autograd leaf inside the traced region"
    return None


def new_leaf_reason(example: Any, args: tuple, kwargs: dict) -> str | None:
    """Why an op's result is a new leaf requiring grad (one not among its arguments).

    A view is never a new leaf: under `no_grad` a view of a parameter (`cls_token.expand`,
    `gamma.reshape`) requires grad and has no grad_fn, as in eager, yet it is no leaf of its
    own, and a graph returns it correctly (ViT and ConvNeXt inference broke at each one)."""
    given = {id(t) for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
    for t in tree_leaves(example):
        if not isinstance(t, torch.Tensor) or id(t) in given or t._is_view():
            continue
        if t.requires_grad and t.is_leaf:
            return "an op created an autograd leaf requiring grad inside the traced region"
    return None
