"""DecomposeMode: strict errors, counted fallbacks, functionalized in-place ops, recursion."""

from __future__ import annotations

import pytest
import torch

from ember_primops import decomposition_table
from ember_primops.decompose_mode import DecomposeMode, MissingDecomposition, UnsupportedLayout

aten = torch.ops.aten


def test_strict_raises_naming_the_op_and_the_fix():
    a = torch.ones(2, 2)
    expected = r"aten\.mm\.default.*register_decomposition"
    with pytest.raises(MissingDecomposition, match=expected), DecomposeMode({}, strict=True):
        a @ a


def test_non_strict_falls_back_and_counts():
    x = torch.randn(3, 3)
    with DecomposeMode({}, strict=False) as mode:
        got = x @ x
    torch.testing.assert_close(got, x @ x)
    assert mode.fallback_counts["aten.mm.default"] == 1


def test_decompositions_run_recursively_down_to_prims():
    x = torch.randn(4, 5)
    with DecomposeMode() as mode:
        got = torch.nn.functional.gelu(x).softmax(-1).sum()
    torch.testing.assert_close(got, torch.nn.functional.gelu(x).softmax(-1).sum())
    assert mode.decomposed_counts["aten.gelu.default"] == 1
    assert mode.prim_counts["ember_prims.erf.default"] == 1
    assert not mode.fallback_counts


def test_the_table_is_really_used():
    wrong = dict(decomposition_table([aten.add.Tensor, aten.add.Scalar]))
    wrong[aten.mul.Tensor] = lambda a, b: torch.ops.ember_prims.add(a, b)
    x = torch.full((2,), 3.0)
    with DecomposeMode(wrong, strict=False):
        got = x * x
    assert got.tolist() == [6.0, 6.0]


def test_inplace_ops_are_functionalized_and_written_back():
    x = torch.zeros(3)
    alias = x.view(3)
    with DecomposeMode() as mode:
        out = x.add_(2).mul_(3)
    assert out is x
    assert x.tolist() == [6.0, 6.0, 6.0] and alias.tolist() == x.tolist()
    assert mode.decomposed_counts["aten.add.Tensor"] == 1


def test_views_alias_their_input():
    x = torch.randn(4, 6)
    with DecomposeMode():
        views = [
            x.view(2, 12),
            x.t(),
            x[1:3, ::2],
            x.diagonal(),
            x.unsqueeze(0),
            x.expand(2, 4, 6),
            x.view(24)[3:],
        ]
    for v in views:
        assert v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    torch.testing.assert_close(views[1], x.t())
    torch.testing.assert_close(views[2], x[1:3, ::2])


def test_sparse_inputs_are_a_typed_error():
    s = torch.eye(3).to_sparse()
    with pytest.raises(UnsupportedLayout, match="dense"), DecomposeMode():
        torch.add(s, s)


def test_unsupported_dtype_is_a_clear_error():
    x = torch.ones(3, dtype=torch.int64)
    with pytest.raises(Exception, match=r"ember_prims\.erf"), DecomposeMode():
        torch.ops.ember_prims.erf(x)
