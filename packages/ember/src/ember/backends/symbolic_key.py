"""The codegen artifact key of a prim graph with symbolic sizes, and the guards its entry needs.

A symbolic graph's compiled code (kernels taking the size symbols as arguments, one wrapper
reading them from the inputs) serves every size its shape env admits, so its key holds what
the code depends on, never the example sizes:

* the graph's code, its lifted constant tensors (layout and a hash of their bytes), and
  each node's value in symbolic form (sizes, strides and offsets as
  expressions over the symbols: what duck sizing shared, what 0/1 specialized, what a
  divisibility guard simplified);
* each symbol's kind (size or int), how it was marked, and its range (the declared one
  narrowed by the guards);
* the source guards: which input sizes share a symbol, which specialized to a constant.

The condition guards (a branch on a size in the program, a decomposition or the
partitioner, or the backend itself) are not in the key: which of them get recorded depends
on the path the example sizes took (the min-cut partitioner compares capacities on them),
so two processes tracing the same graph may hold different sets. The entry saves those its
compile ran under instead; a hit needs each to hold on this process's sizes (else a miss)
and records it in this env, so the caller guards on them as after a fresh compile (code
compiled under fewer guards is valid under more). The ranges they narrowed are in the key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import sympy
import torch

from ember_aot_autograd import NotSerializable, encode_tensor

_SYM = (torch.SymInt, torch.SymFloat, torch.SymBool)
#: globals the FX code of a prim graph may name (anything else is not in the key)
# `np`: the tracer registers NumPy with FX (NumPy scalars in graph code), so it is among
# every graph's globals
_SAFE_GLOBALS = {"torch", "device", "inf", "nan", "NoneType", "fx_pytree", "pytree", "np"}


class SymbolicUncacheable(Exception):
    """Something a symbolic graph depends on that the key cannot capture."""


def shape_env_of(gm: torch.fx.GraphModule) -> Any | None:
    """The env of the graph's symbolic example values (None when every size is static)."""
    for node in gm.graph.nodes:
        for leaf in torch.utils._pytree.tree_leaves(node.meta.get("val")):
            values = (leaf,) if isinstance(leaf, _SYM) else ()
            if isinstance(leaf, torch.Tensor):
                values = (*leaf.shape, *leaf.stride(), leaf.storage_offset())
            for value in values:
                if isinstance(value, _SYM):
                    return value.node.shape_env
    return None


def _expr(value: Any) -> str:
    if isinstance(value, _SYM):
        return str(value.node.expr)
    return repr(value)


def _describe_value(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        if value.layout != torch.strided:
            raise SymbolicUncacheable(f"a {value.layout} value")
        sizes = ", ".join(_expr(s) for s in value.shape)
        strides = ", ".join(_expr(s) for s in value.stride())
        offset = _expr(value.storage_offset())
        return f"{value.dtype}@{value.device}[{sizes}]/[{strides}]+{offset}"
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_describe_value(v) for v in value) + ")"
    if value is None or isinstance(value, (*_SYM, bool, int, float)):
        return _expr(value)
    raise SymbolicUncacheable(f"a node value of type {type(value).__name__}")


def _source_name(source: Any) -> str:
    expr = getattr(source, "expr", None)
    return expr() if callable(expr) else repr(source)


def _env_state(env: Any, symbols: Sequence[sympy.Symbol]) -> list[str]:
    lines = [
        f"{s}: {'int' if s.is_positive is not True else 'size'} range={env.ranges.get(s)} "
        f"dynamic={getattr(env.var_to_dynamic.get(s), 'name', None)}"
        for s in symbols
    ]
    lines += [f"replace {k} -> {v}" for k, v in sorted(env.replacements.items(), key=str)]
    sources = [
        f"source {_source_name(g.source)} == {g.expr}" for g in env.guards() if g.source is not None
    ]
    lines += sorted(set(sources))  # structural: which sizes share a symbol or specialized
    lines += [f"assert {g.expr}" for g in env.deferred_asserts]
    return lines


def symbolic_identity(gm: torch.fx.GraphModule, env: Any) -> str:
    """Everything the compiled code of a symbolic graph depends on (SymbolicUncacheable
    where something is not captured: submodules, attributes, unknown globals, unbacked)."""
    if env.unbacked:
        raise SymbolicUncacheable("data-dependent (unbacked) sizes")
    constants = [_describe_constant(gm, node) for node in gm.graph.nodes if node.op == "get_attr"]
    for node in gm.graph.nodes:
        if node.op == "call_module":
            raise SymbolicUncacheable(f"the graph calls submodule {node.target!r}")
    code = gm.graph.python_code(root_module="self")
    for name, value in code.globals.items():
        if name not in _SAFE_GLOBALS:
            raise SymbolicUncacheable(f"the graph's code names global {name}={value!r}")
    values = [
        f"{node.name}: {_describe_value(node.meta.get('val'))}"
        for node in gm.graph.nodes
        if node.op != "output"
    ]
    symbols = sorted(env.var_to_val, key=lambda s: (len(s.name), s.name))
    return "\n".join([code.src, *constants, *values, *_env_state(env, symbols)])


def _describe_constant(gm: torch.fx.GraphModule, node: torch.fx.Node) -> str:
    """A lifted constant tensor by its layout and the hash of its bytes."""
    value = getattr(gm, node.target, None) if "." not in node.target else None
    if not isinstance(value, torch.Tensor):
        raise SymbolicUncacheable(f"the graph reads attribute {node.target!r} (not a tensor)")
    try:
        data = encode_tensor(value, f"constant {node.target}")
    except NotSerializable as reason:
        raise SymbolicUncacheable(str(reason)) from reason
    meta = sorted((k, v) for k, v in data.items() if k != "data")
    digest = hashlib.sha256(data["data"].encode()).hexdigest()
    return f"constant {node.target} {meta} {digest}"


def condition_guards(env: Any) -> list[str]:
    """The env's condition guards (not the source ones), each once, in recording order."""
    if env is None:
        return []
    return list(dict.fromkeys(str(g.expr) for g in env.guards() if g.source is None))


def replay_guards(env: Any, texts: Sequence[str]) -> bool:
    """Records the saved condition guards in `env` when each holds on its current sizes
    (those it already holds record nothing); False (nothing recorded) when one does not
    hold or cannot be read back."""
    if not texts:
        return True
    if env is None:
        return False
    names = {s.name: s for s in (*env.var_to_val, *env.ranges)}
    try:
        exprs = [sympy.sympify(text, locals=names) for text in texts]
        holds = [bool(e.xreplace(env.var_to_val)) for e in exprs]
    except (sympy.SympifyError, TypeError, ValueError):
        return False
    if not all(holds):
        return False
    for expr in exprs:
        env.evaluate(expr)  # recorded (unless already implied), as the fresh compile did
    return True
