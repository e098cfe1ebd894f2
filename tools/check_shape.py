"""The shape budgets of the product code (DESIGN.md, "Shape of the code"), checked in lint.

Over packages/*/src (tests are not product code):

- import cycles: no strongly connected set of more than MAX_CYCLE modules inside one package.
  Every import is an edge: module-level, function-level and `if TYPE_CHECKING:` alike, and
  `from pkg import name` is an edge to `pkg/__init__.py` as well as to `pkg.name` when that
  is a module;
- function-level imports: at most MAX_LAZY imports of the project's own modules inside
  function bodies, per package;
- long functions: no function (or method) over MAX_LINES lines, decorators excluded;
- public surfaces: a package imports another one only through `ember_x` or a public
  `ember_x.sub` (not `ember_x.sub.deeper`, not `ember_x._private`).

    python tools/check_shape.py          # violations, then the figures; exit 1 on a violation
    python tools/check_shape.py --figures  # only the figures (for docs/architecture.md)
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
MAX_CYCLE = 5
MAX_LAZY = 20
MAX_LINES = 80


@dataclass
class Module:
    name: str  # dotted, e.g. ember_codegen.cpp.build
    path: Path
    is_package: bool  # an __init__.py

    @property
    def package(self) -> str:
        return self.name.split(".")[0]


@dataclass
class Findings:
    graph: nx.DiGraph = field(default_factory=nx.DiGraph)
    lazy: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    long_functions: list[tuple[int, str]] = field(default_factory=list)
    deep_imports: list[str] = field(default_factory=list)


def product_modules(root: Path) -> dict[str, Module]:
    modules = {}
    for src in sorted(root.glob("packages/*/src")):
        for path in sorted(src.rglob("*.py")):
            parts = list(path.relative_to(src).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            modules[name] = Module(name, path, is_package)
    return modules


def imported_names(module: Module, node: ast.Import | ast.ImportFrom) -> list[str]:
    """Dotted targets of one import statement: the module and, for `from m import a`, `m.a`
    (which is a module when `a` is a submodule)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level == 0:
        base = node.module or ""
    else:
        here = module.name.split(".")
        if not module.is_package:
            here = here[:-1]
        here = here[: len(here) - node.level + 1]
        base = ".".join(here + ([node.module] if node.module else []))
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def is_public_surface(target: str) -> bool:
    parts = target.split(".")
    return len(parts) <= 2 and not any(part.startswith("_") for part in parts[1:])


def scan(root: Path) -> Findings:
    modules = product_modules(root)
    packages = {m.package for m in modules.values()}
    found = Findings()
    for module in modules.values():
        tree = ast.parse(module.path.read_text(), str(module.path))
        found.graph.add_node(module.name)
        in_functions: set[int] = set()
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            length = (fn.end_lineno or fn.lineno) - fn.lineno + 1
            if length > MAX_LINES:
                where = f"{module.path.relative_to(root)}:{fn.lineno} {fn.name}"
                found.long_functions.append((length, where))
            in_functions.update(
                id(n) for n in ast.walk(fn) if isinstance(n, ast.Import | ast.ImportFrom)
            )
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            targets = imported_names(module, node)
            ours = [t for t in targets if t.split(".")[0] in packages]
            if not ours:
                continue
            where = f"{module.path.relative_to(root)}:{node.lineno}"
            if id(node) in in_functions:
                found.lazy[module.package].append(where)
            # the module a `from` names is what is imported from; its names are attributes
            named = targets[:1] if isinstance(node, ast.ImportFrom) else targets
            for target in named:
                other = target.split(".")[0]
                if other in packages and other != module.package and not is_public_surface(target):
                    found.deep_imports.append(f"{where} imports {target}")
            for target in ours:
                if (
                    target in modules
                    and target != module.name
                    and target.split(".")[0] == module.package
                ):
                    found.graph.add_edge(module.name, target)
    return found


def cycles(graph: nx.DiGraph) -> list[list[str]]:
    return sorted(
        (sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1),
        key=len,
        reverse=True,
    )


def figures(found: Findings) -> list[str]:
    loops = cycles(found.graph)
    per_package = defaultdict(int)
    for loop in loops:
        package = loop[0].split(".")[0]
        per_package[package] = max(per_package[package], len(loop))
    lines = ["| package | largest import cycle | function-level imports |", "|---|---:|---:|"]
    for package in sorted({n.split(".")[0] for n in found.graph.nodes}):
        lines.append(
            f"| {package} | {per_package.get(package, 0)} | {len(found.lazy.get(package, []))} |"
        )
    longest = max((n for n, _ in found.long_functions), default=0)
    lines.append("")
    lines.append(
        f"Functions over {MAX_LINES} lines: {len(found.long_functions)} (longest {longest}); "
        f"imports below another package's public surface: {len(found.deep_imports)}."
    )
    return lines


def violations(found: Findings) -> list[str]:
    out = []
    for loop in cycles(found.graph):
        if len(loop) > MAX_CYCLE:
            out.append(
                f"import cycle of {len(loop)} modules (budget {MAX_CYCLE}): {', '.join(loop)}"
            )
    for package, sites in sorted(found.lazy.items()):
        if len(sites) > MAX_LAZY:
            out.append(
                f"{package}: {len(sites)} function-level imports of project modules (budget "
                f"{MAX_LAZY}): {', '.join(sites)}"
            )
    for length, where in sorted(found.long_functions, reverse=True):
        out.append(f"{where}: {length} lines (budget {MAX_LINES})")
    out.extend(f"{d} (use its package's public surface)" for d in sorted(found.deep_imports))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--figures", action="store_true", help="print only the figures")
    parser.add_argument("--root", type=Path, default=ROOT)
    args = parser.parse_args()
    found = scan(args.root)
    print("\n".join(figures(found)))
    if args.figures:
        return
    problems = violations(found)
    for problem in problems:
        print(f"shape: {problem}", file=sys.stderr)
    if problems:
        sys.exit(
            f"check_shape: {len(problems)} budget violation(s); see DESIGN.md, 'Shape of the code'"
        )
    print("check_shape: every budget holds")


if __name__ == "__main__":
    main()
