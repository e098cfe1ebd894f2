"""Each package installs alone from the wheelhouse into a fresh venv, as its README says,
and its README example runs there, printing what the README shows.

The package is installed by name with the README's command (`pip install --find-links dist
<name>`, the wheelhouse for dist) under the constraints file, so its sibling packages come
from the freshly built wheels and an undeclared dependency on a sibling shows up as an
ImportError here. The example is the README's first python block; a `text` block right
after it (past one line of prose) is its expected output. The pinned torch (about 900 MB unpacked) is
installed once, into a venv of its own that the venv of each package needing torch reads
through a .pth file; a torch-free package's venv does not see it.
"""

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from repo_packages import CONSTRAINTS, ROOT, Package, discover, needs_torch, sibling_closure

PACKAGES = discover()
PIN_CHECKER = ROOT / "tools" / "check_wheel_pins.py"


def run(*command: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    result = subprocess.run(
        [str(c) for c in command], capture_output=True, text=True, env=env, cwd=cwd, check=False
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


def installed_ember_dists(python: Path) -> dict[str, str]:
    listing = run(python, "-m", "pip", "list", "--format=freeze")
    pairs = [line.partition("==")[::2] for line in listing.splitlines()]
    named = {name.lower().replace("_", "-"): version for name, version in pairs}
    return {n: v for n, v in named.items() if n == "ember" or n.startswith("ember-")}


def readme_example(package: Package) -> tuple[str, str | None]:
    """The README's first python block and the text block that shows its output, if any."""
    readme = (package.path / "README.md").read_text()
    found = re.search(
        r"```python\n(.*?)```\n(?:\s*[^`\n]*\n)?\s*(?:```text\n(.*?)```)?", readme, re.S
    )
    assert found, f"{package.folder}/README.md has no python example"
    return found.group(1), found.group(2)


def readme_install(package: Package) -> list[str]:
    """The README's install command, checked to be the one a user types for this stage."""
    readme = (package.path / "README.md").read_text()
    command = f"pip install --find-links dist {package.name}"
    assert f"```bash\n{command}\n```" in readme, f"{package.folder}/README.md lacks `{command}`"
    return ["--find-links", "dist", package.name]


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without this checkout on the path: only what the venv installed."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return {**env, **extra}


def test_sibling_pins_are_exact(wheelhouse):
    run(sys.executable, PIN_CHECKER, *sorted(wheelhouse.glob("*.whl")))


# CI installs the compiled frame hook's wheel alone (and checks every wheel's sibling pins
# above); each other package's wheel alone, the umbrella's too (it pulls in every sibling:
# about 50 s), is the extended session's (about 3 minutes of CI otherwise)
IN_CI = {"frame_hook"}


@pytest.mark.parametrize(
    "package",
    [p if p.folder in IN_CI else pytest.param(p, marks=pytest.mark.extended) for p in PACKAGES],
    ids=lambda p: p.folder,
)
def test_wheel_installs_alone_and_runs_its_readme(package, wheelhouse, tmp_path, request):
    venv = tmp_path / "venv"
    try:
        run(sys.executable, "-m", "venv", venv)
        python = venv / "bin" / "python"
        if needs_torch(package, PACKAGES):  # pip then finds torch installed, as pinned
            torch_path = request.getfixturevalue("torch_site")
            (site_packages(venv) / "pinned_torch.pth").write_text(f"{torch_path}\n")
        version = wheel_of(package, wheelhouse).name.split("-")[1]
        install = [str(wheelhouse) if a == "dist" else a for a in readme_install(package)]
        run(python, "-m", "pip", "install", "-q", "-c", CONSTRAINTS, *install)
        installed = installed_ember_dists(python)
        assert set(installed) == {p.name for p in sibling_closure(package, PACKAGES)}
        assert installed[package.name] == version, "not the wheelhouse's build"
        env = clean_env(EMBER_CACHE_DIR=str(tmp_path / "cache"))
        run(python, "-c", f"import {package.import_name}", env=env)
        run_readme_example(package, python, tmp_path, env)
    finally:
        # each venv holds its own torch (about 900 MB): keep at most one on disk at a time
        shutil.rmtree(venv, ignore_errors=True)


def run_readme_example(package: Package, python: Path, where: Path, env: dict) -> None:
    code, shown = readme_example(package)
    script = where / "readme_example.py"  # a name no package has: nothing is shadowed
    script.write_text(code)
    start = time.perf_counter()
    out = run(python, script, env=env, cwd=where)
    seconds = time.perf_counter() - start
    print(f"{package.folder}: README example ran in {seconds:.1f} s")
    if shown is not None:
        assert out.strip() == shown.strip(), f"{package.folder}/README.md shows another output"
