"""The two targets stand on one neutral core and import one way: cpp/ and triton/ never
import each other, and the target-neutral modules import neither (read from the source's
import statements, so that a lazy import inside a function counts too)."""

from __future__ import annotations

import ast
from pathlib import Path

import ember_codegen

ROOT = Path(ember_codegen.__file__).parent
#: the target-neutral modules and packages both targets build on
NEUTRAL = [
    "wrapper",
    "segments.py",
    "code_writer.py",
    "op_registry.py",
    "dtype_support.py",
    "value_scopes.py",
    "size_printing.py",
]


def _modules(relative: str) -> list[Path]:
    path = ROOT / relative
    return sorted(path.rglob("*.py")) if path.is_dir() else [path]


def _imports(path: Path) -> set[str]:
    """Absolute names of what ``path`` imports (relative imports resolved)."""
    package = ["ember_codegen", *path.relative_to(ROOT).parent.parts]
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names |= {f"{module}.{alias.name}" for alias in node.names}
    return names


def _reaching(paths: list[Path], target: str) -> list[str]:
    return [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in paths
        for name in sorted(_imports(path))
        if name == f"ember_codegen.{target}" or name.startswith(f"ember_codegen.{target}.")
    ]


def test_the_triton_target_does_not_import_the_cpp_target():
    assert _reaching(_modules("triton"), "cpp") == []


def test_the_cpp_target_does_not_import_the_triton_target():
    assert _reaching(_modules("cpp"), "triton") == []


def test_the_neutral_core_imports_neither_target():
    neutral = [p for entry in NEUTRAL for p in _modules(entry)]
    assert len(neutral) >= len(NEUTRAL)
    assert _reaching(neutral, "cpp") + _reaching(neutral, "triton") == []


def test_the_check_sees_relative_and_absolute_imports():
    # the tests above can fail: relative imports are resolved to the package they reach
    assert "ember_codegen.cpp.emit.onednn_matmul" in _imports(ROOT / "cpp/emit/wrapper.py")
    assert _reaching([ROOT / "cpp/emit/wrapper.py"], "cpp")
    assert _reaching([ROOT / "api.py"], "cpp")  # the dispatcher imports both, by design
