"""Bad inputs raise typed errors that name the prim (on real, meta and fake tensors)."""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from ember_primops import PrimDtypeError, PrimInputError, prims

f32, f64, i64 = torch.float32, torch.float64, torch.int64


def _t(*shape, dtype=f32):
    return torch.ones(shape, dtype=dtype)


BAD_CALLS = [
    ("add", lambda: prims.add(_t(3), _t(3, dtype=f64)), PrimDtypeError, "same dtype"),
    ("add", lambda: prims.add(_t(3), _t(4)), PrimInputError, "not broadcastable"),
    ("where", lambda: prims.where(_t(3), _t(3), _t(3)), PrimDtypeError, "bool"),
    ("sqrt", lambda: prims.sqrt(_t(3, dtype=i64)), PrimDtypeError, "float_complex"),
    ("bitwise_and", lambda: prims.bitwise_and(_t(3), _t(3)), PrimDtypeError, "integer_bool"),
    ("sum", lambda: prims.sum(_t(2, 3), [2]), PrimInputError, "out of range"),
    ("sum", lambda: prims.sum(_t(2, 3), [0, -2]), PrimInputError, "repeat"),
    ("amax", lambda: prims.amax(_t(0, 3), [0]), PrimInputError, "no identity"),
    ("cumsum", lambda: prims.cumsum(_t(2, 3), 5), PrimInputError, "out of range"),
    ("squeeze", lambda: prims.squeeze(_t(2, 3), [0]), PrimInputError, "size-1"),
    ("permute", lambda: prims.permute(_t(2, 3), [0]), PrimInputError, "one entry per dim"),
    (
        "broadcast_in_dim",
        lambda: prims.broadcast_in_dim(_t(3), [4], [0]),
        PrimInputError,
        "cannot broadcast",
    ),
    ("slice", lambda: prims.slice(_t(5), [2], [7]), PrimInputError, "limit"),
    ("reshape", lambda: prims.reshape(_t(2, 3), [4]), PrimInputError, "cannot reshape"),
    ("cat", lambda: prims.cat([_t(2, 3), _t(2, 4)], 0), PrimInputError, "except in dim"),
    ("pad", lambda: prims.pad(_t(2), 0.0, [-3], [0], [0]), PrimInputError, "cropping"),
    (
        "gather",
        lambda: prims.gather(_t(3, 4), 0, _t(2, 4, dtype=torch.int32)),
        PrimDtypeError,
        "int64",
    ),
    ("mm", lambda: prims.mm(_t(2, 3), _t(4, 5)), PrimInputError, "cannot be multiplied"),
    ("linalg_cholesky", lambda: prims.linalg_cholesky(_t(2, 3), False), PrimInputError, "square"),
    (
        "uniform",
        lambda: prims.uniform([2], torch.tensor(1.0), 0, dtype=f32, device="cpu"),
        PrimDtypeError,
        "int64",
    ),
    (
        "iota",
        lambda: prims.iota(-1, start=0, step=1, dtype=i64, device="cpu"),
        PrimInputError,
        "length",
    ),
    (
        "view_element_type",
        lambda: prims.view_element_type(_t(3), torch.float64),
        PrimDtypeError,
        "cannot be viewed",
    ),
]


@pytest.mark.parametrize("name,call,error,fragment", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_input_names_the_prim(name, call, error, fragment):
    with pytest.raises(error, match=rf"ember_prims\.{name}: .*{fragment}"):
        call()


def test_meta_and_fake_paths_raise_the_same_errors():
    a, b = torch.empty(3, device="meta"), torch.empty(3, dtype=f64, device="meta")
    with pytest.raises(PrimDtypeError, match=r"ember_prims\.mul"):
        prims.mul(a, b)
    with FakeTensorMode() as mode:
        x, y = mode.from_tensor(_t(3)), mode.from_tensor(_t(3, dtype=i64))
        with pytest.raises(PrimDtypeError, match=r"ember_prims\.sub"):
            prims.sub(x, y)


def test_python_numbers_are_rejected_with_a_hint():
    with pytest.raises(Exception, match=r"scalar_tensor|Tensor"):
        prims.add(_t(3), 1.0)
