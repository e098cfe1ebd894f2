"""pytest plugin (`-p upstream_compat`), loaded in both runs (torch.compile and Ember).

The stored upstream test files are not all of the installed torch's version: a file may import
a testing helper that torch has since removed. This plugin puts back, before collection, the
few names such files import, with the behaviour they had under default settings, so that the
file collects at all; it changes nothing a test compares. Tooling only, like ember_redirect.
"""

from __future__ import annotations

from typing import Any

import torch.testing._internal.common_utils as common_utils


def _identity_decorator(fn: Any) -> Any:
    return fn


# name -> stand-in, for names a stored upstream file imports that the installed torch lacks
STAND_INS = {
    # test_functions.py (stored copy): turned Dynamo's translation validation off for one test;
    # translation validation is off by default, so the decorator changes nothing here
    "disable_translation_validation_if_dynamic_shapes": _identity_decorator,
}


def pytest_configure(config: Any) -> None:
    for name, value in STAND_INS.items():
        if not hasattr(common_utils, name):
            setattr(common_utils, name, value)
