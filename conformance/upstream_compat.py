"""pytest plugin (`-p upstream_compat`), loaded in both runs (torch.compile and Ember).

The stored upstream test files are not all of the installed torch's version: a file may import
a testing helper that torch has since removed. This plugin puts back, before collection, the
few names such files import, with the behaviour they had under default settings, so that the
file collects at all; it changes nothing a test compares. Tooling only, like ember_redirect.
"""

from __future__ import annotations

from typing import Any

import torch.testing._internal.common_utils as common_utils
import torch.testing._internal.inductor_utils as inductor_utils


def _identity_decorator(fn: Any) -> Any:
    return fn


# name -> stand-in, for names a stored upstream file imports that the installed torch lacks
STAND_INS = {
    # test_functions.py (stored copy): turned Dynamo's translation validation off for one test;
    # translation validation is off by default, so the decorator changes nothing here
    "disable_translation_validation_if_dynamic_shapes": _identity_decorator,
}


# test_torchinductor.py (stored copy, commit 82bdbe7fd5cd): imports HAS_CUDA, which newer
# inductor_utils renamed; it only gates the CUDA test classes, and this machine has no CUDA
INDUCTOR_STAND_INS = {"HAS_CUDA": False}


def pytest_configure(config: Any) -> None:
    for module, stand_ins in ((common_utils, STAND_INS), (inductor_utils, INDUCTOR_STAND_INS)):
        for name, value in stand_ins.items():
            if not hasattr(module, name):
                setattr(module, name, value)
