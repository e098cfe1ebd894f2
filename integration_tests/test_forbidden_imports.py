"""tools/check_forbidden_imports.py: the real tree is clean, and planted imports are caught."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from check_forbidden_imports import violations
from repo_packages import ROOT

CHECKER = ROOT / "tools" / "check_forbidden_imports.py"


def run_checker(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHECKER), str(root)], capture_output=True, text=True, check=False
    )


def plant(root: Path, relative: str, source: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)


def test_product_code_is_clean():
    result = run_checker(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_planted_imports_fail_naming_each_line(tmp_path):
    product = "import torch\nfrom torch._dynamo import x\nimport torch._inductor.config\n"
    plant(tmp_path, "packages/planted/src/planted/core.py", product)
    # tests may use the compiler stack as an oracle: not scanned
    plant(tmp_path, "packages/planted/tests/test_core.py", "import torch._dynamo\n")

    result = run_checker(tmp_path)

    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "packages/planted/src/planted/core.py:2: forbidden import torch._dynamo",
        "packages/planted/src/planted/core.py:3: forbidden import torch._inductor",
    ]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import torch\ntorch.compile(f)", "forbidden use torch.compile"),
        ("import torch as t\nt._dynamo.reset()", "forbidden use torch._dynamo"),
        ("from torch import compile", "forbidden import torch.compile"),
        (
            "from torch.fx.experimental import proxy_tensor",
            "forbidden import torch.fx.experimental.proxy_tensor",
        ),
        (
            "from torch.fx.experimental.sym_node import SymNode",
            "forbidden import torch.fx.experimental.sym_node",
        ),
        (
            "import torch.fx.experimental.symbolic_shapes as ss",
            "forbidden import torch.fx.experimental.symbolic_shapes",
        ),
        ("import importlib\nimportlib.import_module('functorch')", "forbidden import functorch"),
        ("import torch.export as e", "forbidden import torch.export"),
    ],
)
def test_forbidden_forms(source, expected):
    assert [message for _, message in violations(ast.parse(source))] == [expected]


@pytest.mark.parametrize(
    "source",
    [
        "from torch._subclasses.fake_tensor import FakeTensorMode",
        "from torch.fx.experimental import _config",
        "import torch.fx\ntorch.fx.symbolic_trace(f)",
        "from torch.utils._pytree import tree_map",
        "from . import compile\ncompile(f)",
        "import torch\ntorch.compiler_thing = 1",
    ],
)
def test_public_machinery_is_allowed(source):
    assert list(violations(ast.parse(source))) == []
