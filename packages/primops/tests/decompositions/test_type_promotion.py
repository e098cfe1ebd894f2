"""Our promotion helper against torch's (the oracle) over dtypes, 0-dim tensors and numbers."""

from __future__ import annotations

import itertools

import pytest
import torch

from ember_primops.decompositions.type_promotion import (
    Kind,
    elementwise_dtypes,
    promote_types,
    result_type,
)

DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
]
NUMBERS = [True, 3, 2.5, 1 + 2j]


@pytest.mark.parametrize("a,b", list(itertools.product(DTYPES, DTYPES)))
def test_promote_types_matches_torch(a, b):
    assert promote_types(a, b) == torch.promote_types(a, b)


def _operands(dtype):
    yield torch.ones(2, dtype=dtype)
    yield torch.ones((), dtype=dtype)


@pytest.mark.parametrize("a,b", list(itertools.product(DTYPES, DTYPES)))
def test_result_type_tensor_and_zero_dim(a, b):
    for x in _operands(a):
        for y in _operands(b):
            assert result_type(x, y) == torch.result_type(x, y), (x.shape, y.shape)


@pytest.mark.parametrize("dtype,number", list(itertools.product(DTYPES, NUMBERS)))
def test_result_type_with_python_numbers(dtype, number):
    for x in _operands(dtype):
        assert result_type(x, number) == torch.result_type(x, number), (x.shape, number)


def test_kinds():
    i = torch.ones(2, dtype=torch.int32)
    h = torch.ones(2, dtype=torch.bfloat16)
    assert elementwise_dtypes(i, kind=Kind.INT_TO_FLOAT) == (torch.float32, torch.float32)
    assert elementwise_dtypes(h, 1.5) == (torch.float32, torch.bfloat16)
    assert elementwise_dtypes(i, 2, kind=Kind.ALWAYS_BOOL)[1] == torch.bool
    c = torch.ones(2, dtype=torch.complex64)
    assert elementwise_dtypes(c, kind=Kind.COMPLEX_TO_FLOAT)[1] == torch.float32


def test_no_operand_is_an_error():
    with pytest.raises(TypeError, match="at least one operand"):
        result_type()
