"""An error of Ember's own code while tracing is a graph break reported once at WARNING
(torch 2.14 left every frame eager with nothing above DEBUG); the user's own errors are not."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
import torch

from conftest import Compiled, same
from ember_bytecode_tracer.variables import autograd_function


class Scaler:
    @classmethod
    def apply(cls, x):
        return x.cos()


def helper(x):
    return Scaler.apply(x)


def test_an_internal_error_is_reported_once_and_the_code_still_runs(monkeypatch, caplog):
    # as on a torch whose autograd module lacks what the tracer reads (an AttributeError
    # inside the tracer's own rule for `SomeClass.apply`)
    monkeypatch.setattr(autograd_function, "torch", SimpleNamespace())
    compiled = Compiled(lambda x: helper(x.sin()) + 1)
    x = torch.randn(4)
    with caplog.at_level(logging.WARNING, logger="ember.tracer"):
        for _ in range(3):
            assert same(compiled(x), helper(x.sin()) + 1)
    warnings = [r for r in caplog.records if "internal error while tracing" in r.getMessage()]
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    assert "AttributeError" in message and torch.__version__ in message
    assert "test_internal_errors.py" in message  # where in the user's code


def test_a_users_own_error_is_not_reported_as_internal(caplog):
    def user_error(x):
        return x + range(2.0)  # TypeError, as in eager

    compiled = Compiled(user_error)
    with caplog.at_level(logging.WARNING, logger="ember.tracer"), pytest.raises(TypeError):
        compiled(torch.randn(2))
    assert not [r for r in caplog.records if "internal error" in r.getMessage()]
