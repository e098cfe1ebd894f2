"""Plain-data descriptions of compiler objects for the trace: code objects, graphs."""

from __future__ import annotations

import types
from typing import Any

import torch


def code_info(code: types.CodeType) -> dict[str, Any]:
    """Name, file and the line range the code object covers in its file."""
    lines = [line for _, _, line in code.co_lines() if line is not None]
    first = code.co_firstlineno
    return {
        "name": code.co_name,
        "qualname": getattr(code, "co_qualname", code.co_name),
        "file": code.co_filename,
        "line": first,
        "last_line": max([first, *lines]),
    }


def _target(node: torch.fx.Node) -> str:
    target = node.target
    if isinstance(target, str):
        return target
    return getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or str(target)


def _meta(node: torch.fx.Node) -> str:
    value = node.meta.get("example_value", node.meta.get("val"))
    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
    if isinstance(value, list | tuple):
        return ", ".join(_meta_of(v) for v in value)
    return _meta_of(value) if value is not None else ""


def _meta_of(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
    return type(value).__name__


def _where(node: torch.fx.Node) -> str:
    trace = (node.meta.get("stack_trace") or "").strip().splitlines()
    for line in reversed(trace):
        line = line.strip()
        if line.startswith("File "):
            return line
    return ""


def graph_rows(gm: torch.fx.GraphModule) -> list[list[str]]:
    """One row per node: op, name, target, args, kwargs, value (dtype[shape]), user line."""
    return [
        [
            node.op,
            node.name,
            _target(node),
            str(node.args),
            str(node.kwargs),
            _meta(node),
            _where(node),
        ]
        for node in gm.graph.nodes
    ]
