"""Fail if product code reaches into PyTorch's own compiler stack.

Usage: python tools/check_forbidden_imports.py [ROOT]

Scans ROOT/packages/*/src/**/*.py (product code; tests and benchmarks live elsewhere and
may use torch.compile as the oracle). Reports, as `file:line: ...`:
- `import X`, `from X import ...` and `from P import M` naming a forbidden module X or P.M,
- `importlib.import_module("X")` / `__import__("X")` with a literal string,
- attribute uses such as `torch.compile(...)` or `torch._dynamo.reset()`, also through
  `import torch as t` aliases.
Exits 1 if anything is found. The list mirrors "Ground rules" in DESIGN.md.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

FORBIDDEN = (
    "torch._dynamo",
    "torch._inductor",
    "torch._functorch",
    "functorch",
    "torch._decomp",
    "torch._refs",
    "torch._prims",
    "torch.export",
    "torch.compile",
    "torch.fx.experimental.proxy_tensor",
    "torch.fx.experimental.symbolic_shapes",
    "torch.fx.experimental.sym_node",
    "torch._subclasses.functional_tensor",
)
IMPORT_FUNCTIONS = {"import_module", "__import__"}


def forbidden(dotted: str) -> str | None:
    """The forbidden module that `dotted` is or lies inside, or None."""
    for name in FORBIDDEN:
        if dotted == name or dotted.startswith(name + "."):
            return name
    return None


def dotted_name(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """`a.b.c` for a chain of attribute accesses on a name bound by an import."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in aliases:
        return None
    return ".".join([aliases[node.id], *reversed(parts)])


def imported_names(node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """Every module (or module.member) an import statement names."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif node.level == 0 and node.module:  # relative imports stay inside Ember
        yield node.module
        yield from (f"{node.module}.{alias.name}" for alias in node.names)


def import_aliases(tree: ast.Module) -> dict[str, str]:
    """Local names bound by `import a.b` (binds a) and `import a.b as x` (binds x)."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    top = alias.name.partition(".")[0]
                    aliases[top] = top
    return aliases


def literal_import_call(node: ast.Call) -> str | None:
    """The module named by `importlib.import_module("x")` or `__import__("x")`."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in IMPORT_FUNCTIONS or not node.args:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def violations(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, message) for each forbidden import or use in a parsed module."""
    aliases = import_aliases(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = list(imported_names(node))
        elif isinstance(node, ast.Call):
            names = [literal_import_call(node)]
        elif isinstance(node, ast.Attribute):
            name = dotted_name(node, aliases)
            hit = forbidden(name) if name else None
            # report only the outermost match: `torch._dynamo` inside `torch._dynamo.reset`
            if hit and name == hit:
                yield node.lineno, f"forbidden use {hit}"
            continue
        else:
            continue
        hits = {forbidden(n) for n in names if n} - {None}
        yield from ((node.lineno, f"forbidden import {hit}") for hit in sorted(hits))


def product_files(root: Path) -> list[Path]:
    return sorted(root.glob("packages/*/src/**/*.py"))


def check(root: Path) -> list[str]:
    problems = []
    for path in product_files(root):
        tree = ast.parse(path.read_text(), filename=str(path))
        shown = path.relative_to(root)
        problems += [f"{shown}:{line}: {message}" for line, message in sorted(violations(tree))]
    return problems


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent
    problems = check(root.resolve())
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
