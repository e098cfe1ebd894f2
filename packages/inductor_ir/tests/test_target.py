"""Capability records (target.py): lowering reads a code generator's fields, never its name;
records are found by name or by device type; a record says which ops it lacks."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from conftest import FUSING_GPU, LIBRARY_CPU, prim_graph
from ember_inductor_ir import (
    OP_NAMES,
    REFERENCE,
    LoweringError,
    Target,
    lower,
    register_target,
    registered_targets,
    resolve_target,
    target_for_device,
)
from ember_inductor_ir.extern import ExternKernel
from ember_primops import prims


def _cat_of_eight(x):
    return (prims.cat([prims.mul(x, prims.sin(x)) for _ in range(8)], 0),)


def _externs(lowering):
    return [op for op in lowering.operations if isinstance(op, ExternKernel)]


def test_lowering_reads_the_record_fields_not_the_name():
    x = torch.randn(3, 5)
    gm = prim_graph(_cat_of_eight, x)
    (cat,) = _externs(lower(gm, [x], target=LIBRARY_CPU))
    assert cat.kernel_name == "cat" and cat.writes_out
    assert not _externs(lower(prim_graph(_cat_of_eight, x), [x], target=FUSING_GPU))
    # the same capabilities under any name lower the same way
    renamed = dataclasses.replace(LIBRARY_CPU, name="anything")
    (cat,) = _externs(lower(prim_graph(_cat_of_eight, x), [x], target=renamed))
    # a library cat that returns its result instead of writing into planned storage
    no_out = dataclasses.replace(LIBRARY_CPU, out_variant_prims=frozenset())
    (cat,) = _externs(lower(prim_graph(_cat_of_eight, x), [x], target=no_out))
    assert not cat.writes_out


def test_records_are_found_by_name_and_device_type():
    device = "test-device-of-target-py"
    mine = register_target(
        dataclasses.replace(FUSING_GPU, name="test-target-py", device_type=device)
    )
    assert resolve_target("test-target-py") is mine and resolve_target(mine) is mine
    assert target_for_device(device) is mine
    assert registered_targets()["test-target-py"] is mine
    assert target_for_device("a-device-nobody-claims") is REFERENCE
    with pytest.raises(LoweringError, match="unknown target 'no-such-target'"):
        resolve_target("no-such-target")


def test_the_default_target_is_the_one_registered_for_the_inputs_device():
    x = torch.randn(3, 5)
    lowering = lower(prim_graph(_cat_of_eight, x), [x])
    assert lowering.target is target_for_device("cpu")


def test_missing_ops_are_those_neither_implemented_nor_decomposed():
    assert REFERENCE.missing_ops() == set() and REFERENCE.ops == frozenset(OP_NAMES)
    partial = Target(name="partial", device_type="", ops=frozenset(OP_NAMES) - {"erfinv", "hypot"})
    assert partial.missing_ops() == {"erfinv", "hypot"}
    decomposed = dataclasses.replace(partial, decompositions={"hypot": lambda ops, a, b: a})
    assert decomposed.missing_ops() == {"erfinv"}
    assert decomposed == partial  # decompositions (functions) do not take part in equality
    assert hash(decomposed) == hash(partial)


def _softmax_rows(x):
    e = prims.exp(prims.sub(x, prims.broadcast_in_dim(prims.amax(x, [1]), [4, 12], [0])))
    total = prims.broadcast_in_dim(prims.sum(e, [1]), [4, 12], [0])
    return (prims.div(e, total),)


@pytest.mark.parametrize(("cost", "buffers"), [(16, 4), (1, 3)])
def test_the_transcendental_cost_decides_whether_exp_is_stored_once(cost, buffers):
    # read by the sum and by the division: computed once into a buffer where an exp counts
    # for 16 ops (the C++ kernel's per-row scratch), recomputed by each where it counts for 1
    x = torch.randn(4, 12)
    target = dataclasses.replace(FUSING_GPU, transcendental_op_cost=cost)
    lowering = lower(prim_graph(_softmax_rows, x), [x], target=target)
    assert len(lowering.buffers) - 1 == buffers  # the input aside: max, sum, [exp], result
