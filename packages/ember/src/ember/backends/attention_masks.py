"""Attention masks that would keep `F.scaled_dot_product_attention` off aten's fused kernels.

Two rewrites of the torch-level graph, before aot traces it (aot's trace records the kernel
aten's composite picks for the example inputs):

- **A mask that is provably all true is dropped.** Hugging Face's transformers (5.x) builds,
  while traced, a bidirectional mask `arange(L)[None, None, :, None] >= 0` expanded to
  `(B, 1, L, L)` where eager passes none. Attending where the mask is everywhere true is
  attending without a mask; without it aten picks the flash kernel on CUDA, as eager does.
  The proof is read off the graph: lower bounds of `arange` and of sums of it with constants,
  carried through views and element selections, make a comparison all true; `&` and `|`
  combine. Anything else (a mask from an input, a comparison not proven) stays.
- **A CUDA mask whose last dim is not of unit stride is made dense.** aten's fused CUDA
  kernels refuse such a mask (sdp_utils: "the last dimension of the input to have stride 1")
  and take the math path: the scores materialized in float32 (bf16 inputs are upcast),
  softmax and two batched matmuls. A dense copy of the mask (booleans, `(B, 1, L, L)` at
  most the mask's own shape) has the same values, and aten picks its memory-efficient kernel.
  The CPU flash kernel takes any mask stride: CPU graphs keep theirs.
"""

from __future__ import annotations

import logging
import numbers
import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F

from ember_bytecode_tracer.example_rules import dispatch_context, rule_for

log = logging.getLogger("ember.attention")

_SDPA_TARGETS = {F.scaled_dot_product_attention, torch._C._nn.scaled_dot_product_attention}
_SDPA_PARAMS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale")

# ---- value facts: a lower bound of every element, or "every element is true" ---------------

#: methods and functions whose result's elements are elements of their first argument
_ELEMENT_PRESERVING_METHODS = frozenset(
    {"expand", "expand_as", "view", "reshape", "unsqueeze", "squeeze", "contiguous", "clone",
     "permute", "transpose", "flatten", "unflatten", "__getitem__", "detach"}
)  # fmt: skip
_ELEMENT_PRESERVING_FUNCTIONS = frozenset(
    {operator.getitem, torch.unsqueeze, torch.squeeze, torch.reshape, torch.permute,
     torch.transpose, torch.flatten, torch.clone, torch.detach, torch.broadcast_to}
)  # fmt: skip
_ADDS = frozenset({operator.add, torch.add, "add", "__add__", "__radd__"})
#: comparison -> (proves all true given the left's lower bound lb and a constant c)
_COMPARE_LEFT: dict[Any, Callable[[float, float], bool]] = {
    operator.ge: lambda lb, c: lb >= c,
    torch.ge: lambda lb, c: lb >= c,
    "ge": lambda lb, c: lb >= c,
    "__ge__": lambda lb, c: lb >= c,
    operator.gt: lambda lb, c: lb > c,
    torch.gt: lambda lb, c: lb > c,
    "gt": lambda lb, c: lb > c,
    "__gt__": lambda lb, c: lb > c,
}
#: `c <= x` as recorded with the constant first
_COMPARE_RIGHT: dict[Any, Callable[[float, float], bool]] = {
    operator.le: lambda lb, c: lb >= c,
    operator.lt: lambda lb, c: lb > c,
}
_ANDS = frozenset({operator.and_, torch.logical_and, torch.bitwise_and, "logical_and",
                   "bitwise_and", "__and__", "__rand__"})  # fmt: skip
_ORS = frozenset({operator.or_, torch.logical_or, torch.bitwise_or, "logical_or", "bitwise_or",
                  "__or__", "__ror__"})  # fmt: skip


#: bounds beyond this are not added (int32 arithmetic could wrap)
_EXACT = 2.0**30


def _key(node: torch.fx.Node) -> Any:
    return node.target if node.op in ("call_function", "call_method") else None


def _example(node: Any) -> Any:
    return node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    return float(value)


class _Facts:
    """What is proven about the values of a graph's nodes; `used` records the nodes each
    proof read (so that, a mask dropped, the nodes only it used can go)."""

    def __init__(self) -> None:
        self.used: set[torch.fx.Node] = set()

    def lower_bound(self, node: Any) -> float | None:
        """A lower bound of every element of `node` (a constant's value), or None."""
        number = _number(node)
        if number is not None:
            return number
        if not isinstance(node, torch.fx.Node) or not isinstance(_example(node), torch.Tensor):
            return None
        if _example(node).dtype == torch.bool or _example(node).is_complex():
            return None
        found = self._lower_bound(node)
        if found is not None:
            self.used.add(node)
        return found

    def _lower_bound(self, node: torch.fx.Node) -> float | None:
        key = _key(node)
        if key is torch.arange:
            return _arange_start(node)
        if _preserves_elements(node):
            return self.lower_bound(node.args[0])
        if key in _ADDS and len(node.args) == 2 and not node.kwargs:
            bounds = [self.lower_bound(a) for a in node.args]
            if None in bounds or any(abs(b) > _EXACT for b in bounds):  # type: ignore[arg-type]
                return None  # far from any overflow of the integer dtypes an index uses
            return bounds[0] + bounds[1]  # type: ignore[operator]
        return None

    def all_true(self, node: Any) -> bool:
        """Whether every element of the bool tensor `node` is true."""
        value = _example(node)
        if not isinstance(value, torch.Tensor) or value.dtype != torch.bool:
            return False
        found = self._all_true(node)
        if found:
            self.used.add(node)
        return found

    def _all_true(self, node: torch.fx.Node) -> bool:
        key, args = _key(node), node.args
        if _preserves_elements(node):
            return self.all_true(args[0])
        if node.kwargs or len(args) != 2:
            return False
        if key in _COMPARE_LEFT and _number(args[1]) is not None:
            bound = self.lower_bound(args[0])
            return bound is not None and _COMPARE_LEFT[key](bound, _number(args[1]))
        if key in _COMPARE_RIGHT and _number(args[0]) is not None:
            bound = self.lower_bound(args[1])
            return bound is not None and _COMPARE_RIGHT[key](bound, _number(args[0]))
        if key in _ANDS:
            return all(self.all_true(a) for a in args)
        if key in _ORS:
            bools = all(
                isinstance(_example(a), torch.Tensor) and _example(a).dtype == torch.bool
                for a in args
            )
            return bools and any(self.all_true(a) for a in args)
        return False


def _preserves_elements(node: torch.fx.Node) -> bool:
    """Each element of the result is an element of the first argument (views, copies,
    selections): bounds and truth carry over. `to` only where nothing but the device moves."""
    if not node.args or not isinstance(node.args[0], torch.fx.Node):
        return False
    key = _key(node)
    if node.op == "call_method":
        if key == "to":
            same = _example(node.args[0]), _example(node)
            return all(isinstance(t, torch.Tensor) for t in same) and same[0].dtype == same[1].dtype
        if key == "view" and any(isinstance(a, torch.dtype) for a in node.args[1:]):
            return False  # a reinterpretation of the bits
        return key in _ELEMENT_PRESERVING_METHODS
    return node.op == "call_function" and key in _ELEMENT_PRESERVING_FUNCTIONS


def _arange_start(node: torch.fx.Node) -> float | None:
    """`torch.arange(end)`, `(start, end)` or `(start, end, step)` with a positive step:
    its first element bounds the rest from below (an empty range bounds vacuously)."""
    args, kwargs = node.args, node.kwargs
    if set(kwargs) - {"start", "end", "step", "device", "dtype", "requires_grad"}:
        return None
    dtype = kwargs.get("dtype")
    if dtype is not None and (dtype == torch.bool or not isinstance(dtype, torch.dtype)):
        return None
    if "start" in kwargs or "end" in kwargs or "step" in kwargs:
        return None  # keyword forms: rare, not worth the binding rules
    if len(args) == 1:
        return 0.0
    step = _number(args[2]) if len(args) == 3 else 1.0
    if step is None or step <= 0:
        return None
    return _number(args[0])


# ---- the rewrites ------------------------------------------------------------------------


def _bound(node: torch.fx.Node) -> dict[str, Any] | None:
    if len(node.args) > len(_SDPA_PARAMS) or not set(node.kwargs) <= {*_SDPA_PARAMS, "enable_gqa"}:
        return None
    bound = dict(zip(_SDPA_PARAMS, node.args, strict=False))
    bound.update(node.kwargs)
    return bound


def _set_mask(node: torch.fx.Node, mask: Any) -> None:
    """`node`'s attn_mask argument replaced by `mask` (keyword or position alike)."""
    if "attn_mask" in node.kwargs:
        node.update_kwarg("attn_mask", mask)
    else:
        node.update_arg(_SDPA_PARAMS.index("attn_mask"), mask)


def _broadcasts_into_scores(mask: torch.Tensor, query: torch.Tensor, key: torch.Tensor) -> bool:
    """The mask's shape broadcasts to the scores' `(..., L, S)` without enlarging it (else
    eager raises, or the output takes the mask's batch dims: then it must stay)."""
    scores = (*query.shape[:-1], key.shape[-2])
    if mask.ndim > len(scores):
        return False
    for m, s in zip(reversed(mask.shape), reversed(scores), strict=False):
        if isinstance(m, int) and m == 1:
            continue
        if not _same_size(m, s):
            return False
    return True


def _same_size(a: Any, b: Any) -> bool:
    """Equal as written (never a guard): both ints, or SymInts of one expression."""
    if isinstance(a, torch.SymInt) and isinstance(b, torch.SymInt):
        return a.node.expr == b.node.expr
    return type(a) is int and type(b) is int and a == b


def _drop_if_all_true(gm: torch.fx.GraphModule, node: torch.fx.Node, bound: dict) -> bool:
    mask = bound.get("attn_mask")
    if not isinstance(mask, torch.fx.Node) or bound.get("is_causal", False) is not False:
        return False  # a mask with is_causal: eager raises; leave it to raise
    query, key, value = (_example(bound.get(p)) for p in ("query", "key", "value"))
    if not all(isinstance(t, torch.Tensor) for t in (query, key, value, _example(mask))):
        return False
    if not _broadcasts_into_scores(_example(mask), query, key):
        return False
    facts = _Facts()
    if not facts.all_true(mask):
        return False
    _set_mask(node, None)
    _erase_unused(gm, facts.used)
    return True


def _erase_unused(gm: torch.fx.GraphModule, proven: set[torch.fx.Node]) -> None:
    """Erase the proof's nodes nothing reads any more (views, aranges, comparisons: pure),
    users before producers; nodes outside the proof stay (a dead random op keeps its draw)."""
    for node in reversed(list(gm.graph.nodes)):
        if node in proven and not node.users:
            gm.graph.erase_node(node)


def _dense_cuda_mask(gm: torch.fx.GraphModule, node: torch.fx.Node, bound: dict) -> bool:
    mask = bound.get("attn_mask")
    value = _example(mask)
    if not isinstance(value, torch.Tensor) or value.device.type != "cuda" or value.ndim == 0:
        return False
    size, stride = value.shape[-1], value.stride()[-1]
    if _same_size(stride, 1) or _same_size(size, 1):
        return False
    if isinstance(stride, torch.SymInt) and not isinstance(size, torch.SymInt):
        return False  # a symbolic stride of a static last dim: undecidable without a guard
    with gm.graph.inserting_before(node):
        dense = gm.graph.call_method("contiguous", (mask,))
    dense.meta.update(mask.meta)
    dense.meta["example_value"] = value.contiguous()
    _set_mask(node, dense)
    return True


def _refresh_example(node: torch.fx.Node) -> None:
    """The call's example value again, as the tracer computes it: the kernel aten now picks
    returns its output in its own layout (flash: the query's; math: contiguous). Values of
    tests (real tensors) and calls that fail keep the old one."""
    old = _example(node)
    mode = getattr(old, "fake_mode", None)
    if mode is None:
        return
    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), _example)
    try:
        thunk = rule_for("call_function", node.target, args, kwargs)
        with mode, dispatch_context(node.target, args, kwargs):
            new = thunk() if thunk else node.target(*args, **kwargs)
    except Exception as exc:  # the old value's shape and dtype are still right
        log.debug("sdpa %s: example value kept: %s: %s", node.name, type(exc).__name__, exc)
        return
    # an autocast block traced inside the graph is not active here: where the dtype would
    # differ, the traced value (its dtype is the one the graph computes) stays
    if (
        isinstance(new, torch.Tensor)
        and new.dtype == old.dtype
        and new.ndim == old.ndim
        and all(_same_size(a, b) for a, b in zip(new.shape, old.shape, strict=True))
    ):  # sizes compared as written: no guard
        node.meta["example_value"] = new


def fused_attention_masks(gm: torch.fx.GraphModule) -> int:
    """Rewrites `gm`'s sdpa calls in place as the module docstring says; returns how many
    calls changed."""
    changed = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in _SDPA_TARGETS:
            continue
        bound = _bound(node)
        if bound is None:
            continue
        if _drop_if_all_true(gm, node, bound):
            log.debug("sdpa %s: an all-true attn_mask dropped", node.name)
        elif _dense_cuda_mask(gm, node, bound):
            log.debug("sdpa %s: a CUDA attn_mask of strided last dim made dense", node.name)
        else:
            continue
        _refresh_example(node)
        changed += 1
    if changed:
        gm.recompile()
    return changed
