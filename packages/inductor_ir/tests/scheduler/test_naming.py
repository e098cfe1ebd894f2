"""Kernel names say what each kernel is: ordinal, kind and main ops, as an identifier."""

import re

import torch

from ember_primops import prims

IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def test_kernels_are_named_by_ordinal_kind_and_main_ops(check):
    def f(a, b):
        s = prims.sum(prims.mul(a, a), [1])
        return (prims.exp(prims.add(a, b)), s)

    _, sched = check(f, torch.randn(4, 12), torch.randn(4, 12))
    names = [g.name for g in sched]
    assert all(IDENTIFIER.match(n) for n in names), names
    assert len(set(names)) == len(names)
    assert [n.split("_")[0] for n in names] == [f"k{k}" for k in range(len(names))]
    kinds = {n.split("_")[1] for n in names}
    assert kinds <= {"poi", "red"}
    reduction = next(n for n in names if "_red_" in n)
    assert reduction.split("_")[2] == "sum"  # the reduction's type first
    assert "exp" in reduction.split("_")[3:]  # the exp fused in as a full pass: named too


def test_a_copy_and_an_extern_kernel_are_named_too(check):
    def f(a, b):
        return (prims.convert_element_type(prims.mm(a, b), torch.float64),)

    _, sched = check(f, torch.randn(3, 4), torch.randn(4, 5))
    names = [g.name for g in sched]
    assert all(IDENTIFIER.match(n) for n in names), names
    assert any(g.is_extern and g.name.endswith("_mm") for g in sched), names
    assert any(n.endswith("_poi_convert") for n in names), names
