"""Members of C++ enums bound by pybind11 (torch.nn.attention.SDPBackend) are constants in a
trace, guarded by identity like Python Enum members (variables/constant.py `is_enum_member`):
compared, hashed into dicts and sets, turned into ints, in one graph."""

from __future__ import annotations

import enum

import torch
from torch.nn.attention import SDPBackend

from conftest import Compiled, same
from ember_bytecode_tracer.variables.constant import is_enum_member

WEIGHTS = {SDPBackend.MATH: 2.0, SDPBackend.FLASH_ATTENTION: 3.0}


def weighted(x, backends):
    unique = list(dict.fromkeys(backends))
    scale = sum(WEIGHTS.get(b, 1.0) for b in unique)
    if SDPBackend.MATH in unique and isinstance(unique[0], SDPBackend):
        scale += int(unique[0]) + len({*unique})
    return x * scale


def test_members_are_constants_in_one_graph():
    x = torch.randn(3)
    compiled = Compiled(weighted, fullgraph=True)
    for backends in (
        [SDPBackend.MATH, SDPBackend.MATH],
        [SDPBackend.FLASH_ATTENTION, SDPBackend.MATH],
        [SDPBackend.EFFICIENT_ATTENTION],
    ):
        assert same(compiled(x, backends), weighted(x, backends))
    assert compiled.backend.graph_count == 3  # one per list of members (guarded by identity)


def test_only_members_count():
    assert is_enum_member(SDPBackend.MATH)
    assert not is_enum_member(SDPBackend)
    assert not is_enum_member(torch.float32)
    assert not is_enum_member(3)


class Mode(enum.Enum):
    FAST = 1
    SLOW = 2


SCALES = {Mode.FAST: 0.5, Mode.SLOW: 4.0}


def test_python_enum_members_as_dict_keys():
    def scaled(x, mode):
        return x * SCALES[mode]

    x = torch.randn(3)
    compiled = Compiled(scaled, fullgraph=True)
    for mode in (Mode.FAST, Mode.SLOW, Mode.FAST):
        assert same(compiled(x, mode), scaled(x, mode))
    assert compiled.backend.graph_count == 2
