"""Each package's wheel installs alone into a fresh venv and imports.

The wheel's declared dependencies come from the constraints file, and sibling packages
from the freshly built wheels (through --find-links), so an undeclared dependency on a
sibling shows up as an ImportError here. The pinned torch (about 900 MB unpacked) is
installed once, into a venv of its own that the venv of each package needing torch reads
through a .pth file; a torch-free package's venv does not see it.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from repo_packages import CONSTRAINTS, ROOT, Package, discover, needs_torch, sibling_closure

PACKAGES = discover()
PIN_CHECKER = ROOT / "tools" / "check_wheel_pins.py"


def run(*command: str | Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [str(c) for c in command], capture_output=True, text=True, env=env, check=False
    )
    assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def wheel_of(package: Package, wheelhouse: Path) -> Path:
    (wheel,) = wheelhouse.glob(f"{package.name.replace('-', '_')}-*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheels")
    # both spellings: older pip constrains build requirements through PIP_CONSTRAINT
    env = {
        **os.environ,
        "PIP_CONSTRAINT": str(CONSTRAINTS),
        "PIP_BUILD_CONSTRAINT": str(CONSTRAINTS),
    }
    paths = [p.path for p in PACKAGES]
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, *paths, env=env)
    return out


def site_packages(venv: Path) -> Path:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return venv / "lib" / version / "site-packages"


@pytest.fixture(scope="module")
def torch_site(tmp_path_factory) -> Path:
    """site-packages of a venv holding only the pinned torch and what torch depends on."""
    venv = tmp_path_factory.mktemp("torch") / "venv"
    run(sys.executable, "-m", "venv", venv)
    run(venv / "bin" / "python", "-m", "pip", "install", "-q", "-c", CONSTRAINTS, "torch")
    yield site_packages(venv)
    shutil.rmtree(venv, ignore_errors=True)


def installed_ember_dists(python: Path) -> set[str]:
    listing = run(python, "-m", "pip", "list", "--format=freeze")
    names = {line.partition("==")[0].lower().replace("_", "-") for line in listing.splitlines()}
    return {n for n in names if n == "ember" or n.startswith("ember-")}


def test_sibling_pins_are_exact(wheelhouse):
    run(sys.executable, PIN_CHECKER, *sorted(wheelhouse.glob("*.whl")))


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.folder)
def test_wheel_installs_alone_and_imports(package, wheelhouse, tmp_path, request):
    venv = tmp_path / "venv"
    try:
        run(sys.executable, "-m", "venv", venv)
        python = venv / "bin" / "python"
        if needs_torch(package, PACKAGES):  # pip then finds torch installed, as pinned
            torch_path = request.getfixturevalue("torch_site")
            (site_packages(venv) / "pinned_torch.pth").write_text(f"{torch_path}\n")
        wheel = wheel_of(package, wheelhouse)
        run(
            python, "-m", "pip", "install", "-q", "-c", CONSTRAINTS,
            "--find-links", wheelhouse, wheel,
        )  # fmt: skip
        expected = {p.name for p in sibling_closure(package, PACKAGES)}
        assert installed_ember_dists(python) == expected
        run(python, "-c", f"import {package.import_name}")
    finally:
        # each venv holds its own torch (about 900 MB): keep at most one on disk at a time
        shutil.rmtree(venv, ignore_errors=True)
