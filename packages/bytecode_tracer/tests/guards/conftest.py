"""Every compiled guard these tests call also runs natively, and the two must agree.

The Python guard is the reference: wrapping `CompiledGuard.__call__` turns each test that
calls a compiled guard into a check that its GuardProgram (guards/native.py) answers alike.
"""

from __future__ import annotations

from typing import Any

import pytest

from ember_bytecode_tracer.guards import CompiledGuard


@pytest.fixture(autouse=True)
def native_agrees_with_python(monkeypatch: pytest.MonkeyPatch) -> None:
    def call(self: CompiledGuard, f_locals: dict[str, Any]) -> bool:
        expected = self.check(f_locals)
        got = self.native(f_locals)
        assert got is bool(expected), (
            f"native guard says {got}, Python guard says {expected}\n{self.source_code}"
        )
        return expected

    monkeypatch.setattr(CompiledGuard, "__call__", call)
