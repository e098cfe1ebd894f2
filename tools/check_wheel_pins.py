"""Check that built wheels pin their sibling Ember packages exactly.

Usage: python tools/check_wheel_pins.py WHEEL [WHEEL ...]

Every dependency on an `ember` / `ember-*` distribution must be `name==version`, where
version is the version of that sibling's wheel in the same set. Prints one line per
problem and exits 1 if there is any.
"""

from __future__ import annotations

import sys
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def read_metadata(wheel: Path) -> Message:
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        return Parser().parsestr(zf.read(name).decode())


def is_ember(name: str) -> bool:
    return name == "ember" or name.startswith("ember-")


def pin_problem(requirement: Requirement, versions: dict[str, str]) -> str | None:
    """Why `requirement` on a sibling is not an exact pin to its current version, or None."""
    name = canonicalize_name(requirement.name)
    if name not in versions:
        return f"depends on {requirement}, which is not one of the wheels built here"
    expected = f"{name}=={versions[name]}"
    specs = list(requirement.specifier)
    if len(specs) != 1 or specs[0].operator != "==" or specs[0].version != versions[name]:
        return f"dependency '{requirement}' must be the exact pin '{expected}'"
    return None


def check(wheels: list[Path]) -> list[str]:
    metadata = [read_metadata(w) for w in wheels]
    versions = {canonicalize_name(m["Name"]): m["Version"] for m in metadata}
    problems = []
    for wheel, meta in zip(wheels, metadata, strict=True):
        for line in meta.get_all("Requires-Dist") or []:
            requirement = Requirement(line)
            if not is_ember(canonicalize_name(requirement.name)):
                continue
            problem = pin_problem(requirement, versions)
            if problem:
                problems.append(f"{wheel.name}: {problem}")
    return problems


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    wheels = [Path(a) for a in argv]
    problems = check(wheels)
    for problem in problems:
        print(problem)
    if not problems:
        print(f"sibling pins OK in {len(wheels)} wheel(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
