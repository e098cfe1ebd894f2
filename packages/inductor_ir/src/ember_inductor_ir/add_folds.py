"""Adds that an accumulating kernel performs: ``x + index_put(zeros, I, V, accumulate=True)``
is ``index_put(x, I, V, accumulate=True)`` (and ``index_add`` alike), ``x + a @ b`` is
``addmm(x, a, b)``, and a linear layer's ``bias + a @ b`` is ``addmm(bias, a, b)`` where
the sum is handed on as is.

Both shapes are common in gradients. An embedding's gradient is a scatter-add into a
zero-filled table, and a tied embedding (a language model's input embedding that is also its
output projection) adds it to the projection's weight gradient: a table-sized fill, scatter
and add where one in-place scatter into the matmul's result does the work (the table is
50257 x 768 floats in gpt2). A weight used at every step of an unrolled loop gets one matmul
per step, summed: accumulated in place by the matmuls (beta=1), no kernel re-reads all the
partial products. Float addition is reassociated, as any accumulation order may be.

A bias (an input broadcast over the rows) added to a product that only library kernels or
the graph's output read would be a kernel of its own: one pass and one more native call
for what BLAS does in its epilogue (``torch.addmm(bias, a, b, out=)``, what eager's
``linear`` runs). Where a pointwise or reduction op reads the sum, the add fuses into that
op's kernel, which runs anyway: the product stays an ``mm``.

:func:`find_folds` only finds the candidates; the lowering (``lowering.accumulate``) decides
at lowering time whether the addend's buffer may be written, and what to do otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.fx

from ember_primops import get_prim

from .lowering.registry import prim_name
from .lowering.view_ops import INJECTIVE_VIEWS


@dataclass(frozen=True)
class Fold:
    """The add ``addend + <absorbed>`` performed by an accumulating kernel of ``kind``.

    ``absorbed`` are the nodes the fold computes (the walk skips them; each is read only by
    the next one, the last by the add), ``transposed`` marks a matmul read through a
    transpose (``addend + (a @ b).T``)."""

    kind: str
    addend: torch.fx.Node
    absorbed: tuple[torch.fx.Node, ...]
    transposed: bool = False


def _prim(node: object) -> str:
    is_op = isinstance(node, torch.fx.Node) and node.op == "call_function"
    return (
        prim_name(node.target) if is_op and isinstance(node.target, torch._ops.OpOverload) else ""
    )


def _is_prim(node: object, name: str) -> bool:
    return _prim(node) == name


def _val(node: object) -> torch.Tensor | None:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


def _same_tensor_type(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    return (
        a is not None
        and b is not None
        and a.shape == b.shape
        and a.dtype == b.dtype
        and a.device == b.device
    )


def _scatter_fold(addend: torch.fx.Node, term: torch.fx.Node) -> Fold | None:
    """``term`` is an accumulating ``index_put`` or an ``index_add`` into a ``full(..., 0)``
    read only here."""
    if _is_prim(term, "index_put"):
        accumulate = term.args[3] if len(term.args) > 3 else False
    elif _is_prim(term, "index_add"):
        accumulate = True
    else:
        return None
    if len(term.users) != 1:
        return None
    base = term.args[0]
    if accumulate is True and _is_prim(base, "full") and base.args[1] == 0:
        return Fold("scatter", addend, (term,))
    return None


#: view prims that do not map elements one to one (see INJECTIVE_VIEWS)
OTHER_VIEWS = frozenset({"broadcast_in_dim", "slice", "unfold", "as_strided", "view_element_type"})


def may_own(addend: object) -> bool:
    """Whether ``addend`` can be a buffer the add alone reads: reached through one-to-one
    views read once, from a computed value (not an input, constant, broadcast or slice)."""
    node = addend
    while _prim(node) in INJECTIVE_VIEWS and len(node.users) == 1:
        node = node.args[0]
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return False
    return len(node.users) == 1 and _prim(node) not in INJECTIVE_VIEWS | OTHER_VIEWS


def _matmul_fold(addend: torch.fx.Node, term: torch.fx.Node) -> Fold | None:
    """``term`` is a 2-d ``mm``, possibly under permutes that net to a transpose or to
    nothing, each read only by the next."""
    chain = [term]
    order = [0, 1]
    while _is_prim(chain[-1], "permute"):
        dims = list(chain[-1].args[1])
        if len(dims) != 2:
            return None
        order = [order[d % 2] for d in dims]
        chain.append(chain[-1].args[0])
    mm = chain[-1]
    if not _is_prim(mm, "mm") or any(len(n.users) != 1 for n in chain):
        return None
    val = _val(mm)
    if val is None or val.dtype not in (torch.float32, torch.float64):
        return None  # half-precision addmm accumulates differently from mm then add
    if not may_own(addend):
        return None  # a bias, an input: the add stays a (fusible) pointwise kernel
    return Fold("matmul", addend, tuple(reversed(chain)), transposed=order == [1, 0])


#: views whose readers are looked through when asking who reads a sum: they keep the
#: elements in memory order, so a library kernel reads the stored sum through them as is.
#: A permute or slice is a reader of its own: a library kernel that needs another layout
#: gets a copy kernel, which adds the bias for free (an attention's fused qkv projection
#: split into heads: addmm would cost ~1 us more than mm and save no kernel).
_LOOKED_THROUGH = INJECTIVE_VIEWS - {"permute"}


def _read_by_libraries_only(node: torch.fx.Node) -> bool:
    """Whether every reader of ``node`` (through views) is the graph's output or a library
    kernel (an extern prim: it reads a stored buffer, so the value is stored anyway)."""
    for user in node.users:
        if user.op == "output":
            continue
        name = _prim(user)
        if name in _LOOKED_THROUGH:
            if not _read_by_libraries_only(user):
                return False
        elif not name or get_prim(user.target).category != "extern":
            return False
    return True


def _bias_fold(addend: torch.fx.Node, term: torch.fx.Node) -> Fold | None:
    """``term`` is a float32/float64 ``mm`` read only by the add, ``addend`` a graph input
    (a parameter) broadcast over the product's rows, and the sum is stored for library
    kernels or the output only (see the module docstring)."""
    if not _is_prim(term, "mm") or len(term.users) != 1 or not _is_prim(addend, "broadcast_in_dim"):
        return None
    val = _val(term)
    if val is None or val.dtype not in (torch.float32, torch.float64):
        return None  # half-precision addmm rounds once where mm then add rounds twice
    bias = addend.args[0]
    bias_val = _val(bias)
    if not isinstance(bias, torch.fx.Node) or bias.op not in ("placeholder", "get_attr"):
        return None  # a computed addend would be stored for addmm: the add kernel is cheaper
    if bias_val is None or bias_val.dtype != val.dtype:
        return None
    # numpy-style broadcast: the bias's dims are the product's trailing ones
    dims = list(addend.args[2])
    if dims != list(range(2 - bias_val.dim(), 2)):
        return None
    if not _read_by_libraries_only(next(iter(term.users))):
        return None
    return Fold("bias", addend, (term,))


def find_folds(graph: torch.fx.Graph, *, matmuls: bool = True) -> dict[torch.fx.Node, Fold]:
    """``{add node: Fold}`` for each add of two same-typed tensors where one term is a
    foldable kernel (the second term is tried first: a chain of sums grows on the left).
    ``matmuls=False`` leaves adds of matmul products alone."""
    finders = (_scatter_fold, _matmul_fold, _bias_fold) if matmuls else (_scatter_fold,)
    folds: dict[torch.fx.Node, Fold] = {}
    absorbed: set[torch.fx.Node] = set()
    for node in graph.nodes:
        if not _is_prim(node, "add") or len(node.args) != 2 or node.kwargs:
            continue
        out = _val(node)
        for k in (1, 0):
            term, addend = node.args[k], node.args[1 - k]
            if term is addend or term in absorbed or addend in absorbed:
                continue
            if not (_same_tensor_type(_val(term), out) and _same_tensor_type(_val(addend), out)):
                continue
            fold = next((f for find in finders if (f := find(addend, term))), None)
            if fold is not None:
                folds[node] = fold
                absorbed.update(fold.absorbed)
                break
    return folds
