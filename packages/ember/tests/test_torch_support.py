"""Outside the tested torch releases `ember.compile` refuses loudly, never a silent no-op."""

from __future__ import annotations

import logging

import pytest
import torch

import ember
from ember import torch_support
from ember.exc import UnsupportedTorchVersion


def test_the_installed_torch_is_in_the_tested_range():
    assert torch_support.supported(torch_support.torch_release())


@pytest.mark.parametrize(
    ("version", "ok"),
    [("2.10.1", False), ("2.11.0", True), ("2.13.0", True), ("2.15.0", True), ("2.16.0", False),
     ("3.0.0", False)],
)  # fmt: skip
def test_range(version, ok):
    assert torch_support.supported(version) is ok


def test_an_untested_torch_is_refused_with_its_version(monkeypatch):
    monkeypatch.setattr(torch_support, "torch_release", lambda: "2.16.0")
    with pytest.raises(UnsupportedTorchVersion, match=r"torch >=2\.11,<2\.16.*EMBER_ALLOW"):
        ember.compile(torch.sin)


def test_suppress_errors_or_the_override_warn_once_and_compile(monkeypatch, caplog):
    monkeypatch.setattr(torch_support, "torch_release", lambda: "2.99.0")
    monkeypatch.setenv(torch_support.ALLOW_ENV, "1")
    monkeypatch.setattr(torch_support, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="ember"):
        first = ember.compile(lambda x: x.sin() + 1, backend="eager")
        ember.compile(lambda x: x.cos(), backend="eager")
    x = torch.randn(3)
    torch.testing.assert_close(first(x), x.sin() + 1)
    assert sum("supports torch" in r.getMessage() for r in caplog.records) == 1
