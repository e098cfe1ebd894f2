import pytest
import torch

from ember_aot_autograd import UnsupportedOpError
from ember_aot_autograd.op_kinds import (
    bind_arguments,
    functional_overload,
    is_inplace,
    is_out_variant,
    returns_views,
    written_arguments,
)

aten = torch.ops.aten


@pytest.mark.parametrize(
    ("mutating", "functional"),
    [
        (aten.add_.Tensor, aten.add.Tensor),
        (aten.add.out, aten.add.Tensor),
        (aten.bernoulli_.float, aten.bernoulli.p),
        (aten.normal_.default, aten.normal_functional.default),  # no plain `normal` twin
        (aten.copy_.default, aten.copy.default),
        (aten.index_put_.default, aten.index_put.default),
        (aten._native_batch_norm_legit.default, aten._native_batch_norm_legit_functional.default),
    ],
)
def test_functional_overload(mutating, functional):
    assert functional_overload(mutating) is functional


def test_kinds_from_schema():
    assert is_inplace(aten.mul_.Tensor) and not is_out_variant(aten.mul_.Tensor)
    assert is_out_variant(aten.mul.out) and written_arguments(aten.mul.out) == ["out"]
    assert returns_views(aten.view.default) and returns_views(aten.split.Tensor)
    assert not returns_views(aten.add.Tensor) and not returns_views(aten.add_.Tensor)


def test_bind_arguments_fills_defaults():
    bound = bind_arguments(aten.add.Tensor, (1, 2), {})
    assert bound == {"self": 1, "other": 2, "alpha": 1}


_LIB = torch.library.Library("ember_aot_test", "DEF")
_LIB.define("scale(Tensor(a!) x, float factor) -> ()")
_LIB.impl("scale", lambda x, factor: x.mul_(factor), "CompositeExplicitAutograd")


def test_op_without_functional_twin_raises_naming_it():
    from ember_aot_autograd import trace_to_aten

    with pytest.raises(UnsupportedOpError, match=r"ember_aot_test\.scale.*out-of-place"):
        functional_overload(torch.ops.ember_aot_test.scale.default)

    def f(x):
        torch.ops.ember_aot_test.scale(x, 2.0)
        return x

    with pytest.raises(UnsupportedOpError, match=r"ember_aot_test\.scale"):
        trace_to_aten(f, [torch.randn(2)])
