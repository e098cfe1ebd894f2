"""The version in every cache key must be the distribution's version."""

from __future__ import annotations

import tomllib
from pathlib import Path

import ember_codegen


def test_version_matches_pyproject():
    pyproject = Path(__file__).parents[1] / "pyproject.toml"
    assert ember_codegen.__version__ == tomllib.loads(pyproject.read_text())["project"]["version"]
