"""Nox sessions for the Ember repository.

Plain `nox` runs lint, the per-package test sessions and the integration tests.
`demo`, `bench`, `build`, `conformance` and the like run only when named (`nox -s bench`).
See README.md.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "tools"))

from repo_packages import CONSTRAINTS, Package, discover, needs_torch, sibling_closure  # noqa: E402

MAIN_PYTHON = "3.11"
ALL_PYTHONS = ["3.11", "3.12"]  # torch-free packages only: the CPU torch wheel is cp311
ZOO = ROOT / "benchmarks" / "zoo"
FRAME_HOOK = "./packages/frame_hook"

PACKAGES = discover(ROOT)

# A missing interpreter is a skip, not a failure (nox turns this on when CI is set), and
# never a download of a standalone Python.
nox.options.error_on_missing_interpreters = False
nox.options.download_python = "never"
nox.options.reuse_venv = "yes"


def checked_session(**options: object) -> Callable[[Callable], Callable]:
    """nox.session for the sessions CI runs. Under CI the session's venv is deleted when the
    session ends: a clean clone never reuses one, and kept together the torch venvs fill
    about 15 GB of a disk CI shares."""

    def register(func: Callable[[nox.Session], None]) -> Callable:
        @functools.wraps(func)
        def run_then_drop_venv(session: nox.Session) -> None:
            try:
                func(session)
            finally:
                location = getattr(session.virtualenv, "location", None)
                if os.environ.get("CI") and location:
                    shutil.rmtree(location, ignore_errors=True)

        return nox.session(**options)(run_then_drop_venv)

    return register


# Sessions' venvs are made and filled by uv where ./dev's tools venv has it (pinned in
# constraints.txt), else by virtualenv and pip. uv links each wheel from its cache: a torch
# install is about 3 s instead of pip's 12-25, paid by each of the dozen torch sessions.
nox.options.default_venv_backend = "uv|virtualenv"


def _pip_config() -> dict[str, str]:
    """pip's settings as `pip config list` prints them (files and PIP_* variables), keyed
    by the option name (`find-links`, `extra-index-url`, ...)."""
    try:
        listing = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return {}
    settings = {}
    for line in listing.splitlines():
        key, _, value = line.partition("=")
        settings[key.rpartition(".")[2]] = value.strip().strip("'\"")
    return settings


def _uv_environment() -> None:
    """uv reads no pip configuration: the indexes and wheel folders pip is told about (this
    machine's registry mirrors, the local CPU torch wheel) are handed to uv, and uv may take
    a pinned version from whichever index has it, as pip does. uv never downloads a Python."""
    pip = _pip_config()
    for pip_key, uv_key in [
        ("index-url", "UV_DEFAULT_INDEX"),
        ("extra-index-url", "UV_EXTRA_INDEX_URL"),
        ("find-links", "UV_FIND_LINKS"),
    ]:
        if pip.get(pip_key) and uv_key not in os.environ:
            os.environ[uv_key] = pip[pip_key]
    os.environ.setdefault("UV_INDEX_STRATEGY", "unsafe-best-match")
    os.environ.setdefault("UV_PYTHON_DOWNLOADS", "never")
    # pip in every venv: integration_tests/test_wheels.py builds and installs wheels with it
    os.environ.setdefault("UV_VENV_SEED", "1")


_uv_environment()


def install_pinned(session: nox.Session, constraints: Path | str, *args: str) -> None:
    """pip (or uv pip) install with every requirement and build requirement pinned by
    `constraints`. pip is told not to byte-compile (for torch alone a third of its install
    time; Python compiles what a test imports); uv does not unless asked."""
    if session.venv_backend == "uv":
        flags = ["-c", str(constraints), "--build-constraints", str(constraints)]
    else:
        flags = ["--no-compile", "-c", str(constraints), "--build-constraint", str(constraints)]
    session.install(*flags, *args)


def local(path: Path) -> str:
    """A path pip reads as a local project, relative to the repo root for readable logs."""
    return f"./{path.relative_to(ROOT)}"


def install(session: nox.Session, *args: str) -> None:
    """install_pinned with constraints.txt."""
    install_pinned(session, CONSTRAINTS, *args)


def zoo_paths() -> list[str]:
    return [local(ZOO)] if (ZOO / "pyproject.toml").exists() else []


# pytest-xdist over the machine's cores for the long runs (integration tests, the torch
# sessions' package tests): each test file stays in one worker (module-scoped state and
# fixtures), and the compile-heavy files spread. A 2-core CI machine finishes the
# integration tests in about 60% of the serial time.
PARALLEL = ["-n", "auto", "--dist", "loadfile"]

# Builds a package's tests need that are never made behind a user's back. The C++ tensor
# check compiles against the installed torch in about 30 s of CPU, once per torch, Python
# and source (cached under ~/.cache/ember); without it three guard tests skip.
BEFORE_TESTS: dict[str, list[tuple[str, ...]]] = {
    "bytecode_tracer": [
        (
            "python",
            "-c",
            "from ember_bytecode_tracer.guards import native_tensor; native_tensor.build()",
        ),
    ],
}


def register_tests(package: Package) -> None:
    """Session tests-<folder>: the package plus only what it declares, then its tests."""
    pythons = [MAIN_PYTHON] if needs_torch(package, PACKAGES) else ALL_PYTHONS

    def tests(session: nox.Session) -> None:
        closure = sibling_closure(package, PACKAGES)
        # The package under test with its `test` extra (what its tests need beyond pytest).
        paths = [local(p.path) + ("[test]" if p is package else "") for p in closure]
        # the torch packages' tests over the cores (each passes under `-n 2 --dist loadfile`)
        parallel = PARALLEL if needs_torch(package, PACKAGES) else []
        install(session, *paths, "pytest", *(["pytest-xdist"] if parallel else []))
        for step in BEFORE_TESTS.get(package.folder, ()):
            session.run(*step)
        session.run("pytest", *parallel, local(package.path / "tests"), *session.posargs)

    tests.__doc__ = f"Unit tests of {package.name}, installed with only its declared deps."
    checked_session(name=f"tests-{package.folder}", python=pythons)(tests)


for _package in PACKAGES:
    register_tests(_package)

# plain `nox`: everything that checks correctness; demo, bench and build only when named
nox.options.sessions = [
    "lint",
    *(f"tests-{p.folder}" for p in PACKAGES),
    "bytecode_layer",
    "integration",
    "torch-3.12",
    "torch-oldest",
    "torch-newest",
    "hf_latest",
    "vision",
]


@checked_session(python=ALL_PYTHONS)
def bytecode_layer(session: nox.Session) -> None:
    """The tracer's torch-free bytecode layer on 3.11 and 3.12 (its package needs torch,
    which has no 3.12 CPU build here, so these tests run from source)."""
    install(session, "pytest")
    src = str(ROOT / "packages" / "bytecode_tracer" / "src")
    session.run(
        "pytest",
        "packages/bytecode_tracer/tests/bytecode",
        *session.posargs,
        env={"PYTHONPATH": src},
    )


@checked_session(python=MAIN_PYTHON)
def integration(session: nox.Session) -> None:
    """Cross-package tests: every package, the zoo, torch and transformers installed."""
    packages = [local(p.path) for p in PACKAGES]
    # expecttest, hypothesis: imported by torch's OpInfo database (integration_tests/opinfo);
    # triton, numpy: the zoo through the Triton target in Triton's CPU interpreter
    install(
        session, *packages, *zoo_paths(), "torch", "transformers", "pytest", "pytest-xdist",
        "expecttest", "hypothesis", "triton", "numpy",
    )  # fmt: skip
    zoo_tests = [local(ZOO / "tests")] if (ZOO / "tests").is_dir() else []
    session.run(
        "pytest", *PARALLEL, "--durations=15", "-m", "not extended", "integration_tests",
        *zoo_tests, *session.posargs,
    )  # fmt: skip


@nox.session(python=MAIN_PYTHON)
def extended(session: nox.Session) -> None:
    """The integration tests left out of CI's bounded run (marked ``extended``): each
    package's wheel installed alone, long Triton-interpreter training runs."""
    install(
        session, *(local(p.path) for p in PACKAGES), *zoo_paths(), "torch", "transformers",
        "pytest", "pytest-xdist", "triton", "numpy",
    )  # fmt: skip
    session.run("pytest", *PARALLEL, "-m", "extended", "integration_tests", *session.posargs)


@nox.session(python=MAIN_PYTHON)
def conformance(session: nox.Session) -> None:
    """PyTorch's own Dynamo test files run by torch.compile and by Ember (not in plain `nox`):
    conformance/run.py, where the files are in conformance/upstream/ (or `-- --upstream DIR`);
    where they are not, how to fetch them. posargs go to the runner. See docs/conformance.md."""
    upstream = ROOT / "conformance" / "upstream"
    if not any(upstream.rglob("test_*.py")) and "--upstream" not in session.posargs:
        session.log((ROOT / "conformance" / "fetch.md").read_text())
        session.skip("no upstream test files present: see conformance/fetch.md")
    packages = [local(p.path) for p in PACKAGES]
    # expecttest, hypothesis, numpy: imported by PyTorch's test files and torch.testing._internal
    install(session, *packages, "torch", "pytest", "expecttest", "hypothesis", "numpy")
    session.run("python", "conformance/run.py", *session.posargs)


def rewritten_constraints(session: nox.Session, pins: dict[str, str | None]) -> Path:
    """constraints.txt with the pins of `pins`' keys replaced by their values; None drops the
    pin (pip then resolves the newest release)."""
    lines = []
    for line in CONSTRAINTS.read_text().splitlines():
        name = line.split("==")[0].strip().lower()
        if name not in pins:
            lines.append(line)
        elif pins[name] is not None:
            lines.append(pins[name])
    path = Path(session.create_tmp()) / f"constraints-{session.name}.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


@checked_session(python=MAIN_PYTHON)
def vision(session: nox.Session) -> None:
    """timm and torchvision models through the suite runner at CPU size (pass and one graph
    each): the integration session cannot install torchvision (the registry's is a CUDA build
    whose import fails beside a CPU torch once transformers imports it), so they run here,
    without transformers."""
    packages = [local(p.path) for p in PACKAGES]
    install(session, *packages, "torch", "timm", "torchvision", "pytest")
    session.run(
        "pytest", "-q", "-p", "no:cacheprovider", "integration_tests/test_benchmark_suites.py",
        "-k", "timm or torchvision", *session.posargs,
    )  # fmt: skip


@checked_session(python=MAIN_PYTHON)
def hf_latest(session: nox.Session) -> None:
    """The HF integration tests (library defaults, one graph per family) against the newest
    transformers release pip resolves, everything else pinned; prints the version tested."""
    newest = ("transformers", "huggingface-hub", "tokenizers", "safetensors")
    pins = str(rewritten_constraints(session, dict.fromkeys(newest)))
    packages = [local(p.path) for p in PACKAGES]
    install_pinned(session, pins, *packages, "torch", "pytest")
    install_pinned(session, pins, "--upgrade", "transformers")
    session.run(
        "python", "-c", "import transformers; print('transformers', transformers.__version__)"
    )
    session.run("pytest", "-q", "integration_tests/test_hf_defaults.py", *session.posargs)


# the registry's cp312 torch is the CUDA build (about 4.7 GB with its nvidia wheels); it runs
# on the CPU, and it brings the triton release it was built against
PY312_PINS = {"torch": "torch==2.13.0", "triton": None}


@checked_session(name="torch-3.12", python="3.12")
def torch_312(session: nox.Session) -> None:
    """Every torch package's unit tests and a slice of the integration tests on CPython 3.12 (the
    tracer's 3.12 bytecode path end to end), in one venv so the big wheel installs once."""
    pins = str(rewritten_constraints(session, PY312_PINS))
    packages = [local(p.path) + "[test]" for p in PACKAGES]
    install_pinned(
        session, pins, *packages, *zoo_paths(), "torch", "transformers", "pytest",
        "pytest-xdist", "expecttest", "hypothesis", "numpy",
    )  # fmt: skip
    tests = [
        local(p.path / "tests")
        for p in PACKAGES
        if needs_torch(p, PACKAGES) and p.path.name not in TORCH_312_SKIP_PACKAGES
    ]
    # each package's tests in its own pytest process: their conftest files share names
    for path in tests:
        skipped = [
            f"--ignore={path}/{name}" for name in TORCH_312_SKIP.get(Path(path).parent.name, ())
        ]
        session.run("pytest", "-q", *PARALLEL, *skipped, path, *session.posargs)
    # The integration tests on 3.12: a bounded slice, the files that drive the tracer's
    # bytecode path end to end (Python semantics, idioms, containers, contexts, frames, the
    # zoo through the tracer, a training step's resume functions). The rest
    # test nothing the Python version changes and run in `integration` on 3.11 (the whole
    # folder on 3.12 took 6-7 of the 13 minutes of this session).
    deselected = [f"--deselect={t}" for t in [*SLICE_DESELECT, TRITON_TRAINING_TEST]]
    session.run(
        "pytest", "-q", *PARALLEL, "--durations=10", "-m", "not extended", *deselected,
        *TORCH_312_INTEGRATION,
        *session.posargs,
    )  # fmt: skip


# Test files left out on 3.12 (they run on 3.11 in the package's own session): the umbrella's
# that run second processes building C++ kernels cold (the artifact store, autotune
# decisions, the HTML report, the progress line on a terminal), about 3 of the session's 4
# minutes there, and the C++ emitter's; none reads bytecode or anything else the Python
# version changes.
TORCH_312_SKIP = {
    "ember": [
        "backends/test_artifact_cache.py",
        "backends/test_artifact_cache_rebuilds.py",
        "backends/test_autotune.py",
        "report",
        "test_progress.py",
    ],
    # the C++ emitter and build layer: C++ source compiled and run, nothing Python-version
    # specific (the generated Python wrappers and the Triton interpreter still run on 3.12)
    "codegen_triton_cpp": ["cpp", "cpp_emit"],
}

# Packages whose tests run on 3.11 only: the prim decompositions, the loop IR, the joint
# forward/backward tracing and the symbolic sizes are torch graphs and sympy, with no frame,
# bytecode or generated Python the interpreter version changes (about 100 s of this
# session); their code still runs on 3.12 through the umbrella's, codegen's and the
# integration slice's tests.
TORCH_312_SKIP_PACKAGES = {"primops", "inductor_ir", "aot_autograd", "symbolic_shapes"}

# Left out of the integration slices of torch-3.12, torch-oldest and torch-newest (they run in
# `integration`): a compile-time bound over a thousand parameters (about 40 s a run) reads
# nothing the Python or torch version changes. On 3.12 also the Triton-interpreter training
# step (about 30 s; the codegen tests run the interpreter on 3.12); the newest torch keeps
# it, since that torch brings a newer Triton.
SLICE_DESELECT = [
    "integration_tests/test_training_step.py::test_an_optimizer_step_over_many_parameters_compiles"
]
TRITON_TRAINING_TEST = (
    "integration_tests/test_training_step.py"
    "::test_optimizer_updates_are_written_into_the_parameters_on_the_triton_target"
)

TORCH_312_INTEGRATION = [  # the zoo through every backend and dynamic shapes: torch-oldest/newest
    "integration_tests/test_zoo_tracer.py",
    "integration_tests/test_toy_example.py",
    "integration_tests/test_training_step.py",
    "integration_tests/test_python_semantics.py",
    "integration_tests/test_python_idioms.py",
    "integration_tests/test_eager_semantics.py",
    "integration_tests/test_traced_containers.py",
    "integration_tests/test_context_managers.py",
    "integration_tests/test_frame_counts.py",
    "integration_tests/test_returned_closures.py",
]


# The torch releases CI tests beside the pin (constraints.txt): the oldest Ember supports and
# the newest the registry serves, resolved at run time (as hf_latest does for transformers)
# with a floor at the newest release we know of (tools/requirements/torch-newest.txt).
# The range is the packages' metadata and ember/torch_support.py. Each runs the packages whose
# code reads torch internals (the tracer, aot, primops' decompositions) and a bounded slice of
# the integration tests: every zoo model through inductor, dynamic shapes, a training step.
NEWEST_FLOOR = ROOT / "tools" / "requirements" / "torch-newest.txt"
TORCH_RELEASES = {
    "torch-oldest": "torch==2.11.0",
    "torch-newest": next(
        line.strip() for line in NEWEST_FLOOR.read_text().splitlines() if line.startswith("torch")
    ),
}
TORCH_RELEASE_TESTS = ["packages/bytecode_tracer/tests", "packages/aot_autograd/tests"]
TORCH_RELEASE_INTEGRATION = [
    "integration_tests/test_zoo_backends.py",
    "integration_tests/test_dynamic_shapes.py",
    "integration_tests/test_toy_example.py",
    "integration_tests/test_training_step.py",
]


def torch_release_session(name: str, pin: str | None) -> None:
    def run(session: nox.Session) -> None:
        # torch brings the triton it was built with; 2.11 also caps setuptools (<82)
        unpinned = {"torch": pin, "triton": None, "setuptools": None}
        pins = str(rewritten_constraints(session, unpinned))
        packages = [local(p.path) + "[test]" for p in PACKAGES]
        install_pinned(
            session, pins, *packages, *zoo_paths(), "torch", "transformers", "pytest",
            "pytest-xdist", "expecttest", "hypothesis", "numpy",
        )  # fmt: skip
        session.run("python", "-c", "import torch; print('torch', torch.__version__)")
        for path in TORCH_RELEASE_TESTS:  # separate processes: the conftest files share names
            session.run(
                "pytest", "-q", "-p", "no:cacheprovider", *PARALLEL, path, *session.posargs
            )  # fmt: skip
        session.run(
            "pytest", "-q", "-p", "no:cacheprovider", *PARALLEL, "-m", "not extended",
            *(f"--deselect={t}" for t in SLICE_DESELECT), *TORCH_RELEASE_INTEGRATION,
            *session.posargs,
        )  # fmt: skip

    run.__doc__ = f"The tracer, aot and an integration slice on {pin or 'the newest torch'}."
    checked_session(name=name, python=MAIN_PYTHON)(run)


for _name, _pin in TORCH_RELEASES.items():
    torch_release_session(_name, _pin)


@nox.session(python=MAIN_PYTHON)
def opinfo(session: nox.Session) -> None:
    """The exhaustive OpInfo sweeps (not in plain `nox`, which runs a representative subset):
    every op_db entry through ember-primops' decompositions, then through the aot_eager and
    inductor backends when integration_tests/opinfo exists. Prints coverage tables."""
    packages = [local(p.path) for p in PACKAGES]
    primops = next(p for p in PACKAGES if p.folder == "primops")
    install(session, *packages, local(primops.path) + "[test]", "pytest")
    env = {"EMBER_OPINFO": "full"}
    session.run("python", "packages/primops/tests/opinfo/sweep.py", *session.posargs, env=env)
    if (ROOT / "integration_tests" / "opinfo" / "sweep.py").exists():
        session.run("python", "integration_tests/opinfo/sweep.py", *session.posargs, env=env)


@nox.session(python=MAIN_PYTHON)
def fuzz(session: nox.Session) -> None:
    """The long tracer fuzzer run (not in plain `nox`; integration_tests/test_fuzz_tracer.py
    is the bounded one): generated programs compiled vs eager. posargs go to
    tools/fuzz_tracer.py, e.g. `nox -s fuzz -- --count 2000 --seed 7 --jobs 4`."""
    install(session, *(local(p.path) for p in PACKAGES))
    args = session.posargs or ["--count", "10000", "--seed", "0", "--jobs", "2"]
    session.run("python", "tools/fuzz_tracer.py", "--out", "fuzz_out", *args)


@nox.session(python=MAIN_PYTHON)
def suites(session: nox.Session) -> None:
    """The public-suite runner (benchmarks/suites/run.py; not in plain `nox`): timm, Hugging
    Face and torchvision models, eager vs torch.compile vs Ember interleaved, one JSON line
    per model. posargs go to run.py, e.g. `nox -s suites -- --suite timm --models
    resnet50 --out suites.jsonl`; then `python benchmarks/suites/summary.py suites.jsonl`."""
    packages = [local(p.path) for p in PACKAGES]
    install(session, *packages, "torch", "transformers", "timm", "torchvision")
    args = session.posargs or ["--suite", "huggingface", "--models", "BertForMaskedLM"]
    session.run("python", "benchmarks/suites/run.py", *args)


@checked_session(python=MAIN_PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check, ruff format --check, the forbidden-import checker and the shape budgets
    (import cycles, function-level imports, long functions, public surfaces)."""
    install(session, "ruff", "networkx")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("python", "tools/check_forbidden_imports.py")
    session.run("python", "tools/check_shape.py")


@nox.session(python=MAIN_PYTHON)
def demo(session: nox.Session) -> None:
    """The frame-hook demo, real models through the hook and the tracer, then a real model
    compiled end to end (inductor backend, C++ kernels) with its speedup over eager."""
    install(session, *(local(p.path) for p in PACKAGES), *zoo_paths(), "torch", "transformers")
    session.run("python", "examples/frame_hook_demo.py")
    session.run("python", "examples/tracer_demo.py", *session.posargs)
    session.run("python", "examples/inductor_demo.py")


@nox.session(python=MAIN_PYTHON)
def bench(session: nox.Session) -> None:
    """Frame-hook overhead, guard and tracer overhead and first-call time vs torch.compile,
    bytes saved for backward per partitioner, eager vs torch.compile vs Ember (inductor and
    autotune) on the zoo
    (posargs go to the zoo benchmark), SDPA, tracer x backend crossed (stage_ab.py), per-call
    overhead of tiny models (call_overhead.py), a varying-length stream (dynamic shapes), then
    compile time cold and warm."""
    install(session, *(local(p.path) for p in PACKAGES), *zoo_paths(), "torch", "transformers")
    session.run("python", "benchmarks/frame_hook_overhead.py")
    session.run("python", "benchmarks/tracer_overhead.py")
    session.run("python", "benchmarks/guard_overhead.py")
    session.run("python", "benchmarks/saved_activations.py")
    session.run(
        "python", "benchmarks/zoo_baseline.py", "--size", "real",
        "--compilers", "eager,torch.compile,ember,ember-autotune", *session.posargs,
    )  # fmt: skip
    session.run("python", "benchmarks/sdpa.py")
    # tracer x backend crossed (Ember's and PyTorch's), and per-call overhead of tiny models
    session.run("python", "benchmarks/stage_ab.py", "--size", "tiny")
    session.run("python", "benchmarks/call_overhead.py")
    # a stream of varying sequence lengths: total time and steady per-call time (issue 13)
    session.run("python", "benchmarks/dynamic_shapes.py")
    # first call in fresh processes, cold and with the cache the cold run filled
    session.run(
        "python", "benchmarks/compile_time.py", "--models", "mlp,gpt2,t5", "--mode", "train"
    )  # fmt: skip


@nox.session(python=MAIN_PYTHON)
def build(session: nox.Session) -> None:
    """Wheel and sdist of every package into dist/, then check the sibling pins."""
    install(session, "build")
    dist = ROOT / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    # build installs the build requirements in its isolated env with a plain pip install,
    # which honours PIP_CONSTRAINT.
    env = {"PIP_CONSTRAINT": str(CONSTRAINTS)}
    for package in PACKAGES:
        session.run("python", "-m", "build", "--outdir", "dist", local(package.path), env=env)
    wheels = sorted(str(w.relative_to(ROOT)) for w in dist.glob("*.whl"))
    session.run("python", "tools/check_wheel_pins.py", *wheels)
