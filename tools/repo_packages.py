"""Discover the stage packages under packages/*/ and their declared dependencies.

Shared by noxfile.py and integration_tests/. Needs only the standard library and
`packaging` (which nox, pytest and build all depend on).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / "constraints.txt"


@dataclass(frozen=True)
class Package:
    folder: str  # the directory name under packages/, e.g. "frame_hook"
    path: Path
    name: str  # canonical distribution name, e.g. "ember-frame-hook"
    requires: tuple[str, ...]  # canonical names of all declared runtime dependencies

    @property
    def import_name(self) -> str:
        """The import package: the one directory under src/ holding an __init__.py."""
        found = [p.parent.name for p in (self.path / "src").glob("*/__init__.py")]
        if len(found) != 1:
            raise ValueError(f"{self.path}/src must hold exactly one package, found {found}")
        return found[0]


def read_package(pyproject: Path) -> Package:
    try:
        project = tomllib.loads(pyproject.read_text())["project"]
    except (tomllib.TOMLDecodeError, KeyError) as error:
        raise ValueError(f"{pyproject}: not a valid package pyproject.toml ({error!r})") from error
    requires = tuple(
        canonicalize_name(Requirement(r).name) for r in project.get("dependencies", [])
    )
    return Package(
        folder=pyproject.parent.name,
        path=pyproject.parent,
        name=canonicalize_name(project["name"]),
        requires=requires,
    )


def discover(root: Path = ROOT) -> list[Package]:
    """All packages/<folder>/pyproject.toml, sorted by folder name."""
    return [read_package(p) for p in sorted(root.glob("packages/*/pyproject.toml"))]


def sibling_closure(package: Package, packages: list[Package]) -> list[Package]:
    """`package` plus every sibling it depends on, directly or transitively."""
    by_name = {p.name: p for p in packages}
    seen: dict[str, Package] = {}
    pending = [package]
    while pending:
        current = pending.pop()
        if current.name in seen:
            continue
        seen[current.name] = current
        pending.extend(by_name[r] for r in current.requires if r in by_name)
    return list(seen.values())


def needs_torch(package: Package, packages: list[Package]) -> bool:
    return any("torch" in p.requires for p in sibling_closure(package, packages))
