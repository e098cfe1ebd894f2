"""The table's API: registration, subsets, errors, and what is (not) in it."""

from __future__ import annotations

import pytest
import torch

from ember_primops import decomposition_table, is_prim
from ember_primops.decompositions import DuplicateDecomposition, register_decomposition
from ember_primops.decompositions.nn_norms import MUTATING_WITH_WRITE_BACK

aten = torch.ops.aten


def test_table_covers_core_ops():
    table = decomposition_table()
    for op in (
        aten.add.Tensor,
        aten.mm.default,
        aten._softmax.default,
        aten.native_layer_norm_backward.default,
        aten.convolution_backward.default,
        aten.embedding_dense_backward.default,
        aten.threshold_backward.default,
    ):
        assert op in table, op
    assert all(isinstance(op, torch._ops.OpOverload) and not is_prim(op) for op in table)


def test_subset_by_packet_and_overload():
    sub = decomposition_table([aten.add, aten.mm.default])
    assert aten.mm.default in sub and aten.add.Tensor in sub and aten.add.Scalar in sub
    assert aten.sub.Tensor not in sub


def test_random_false_leaves_the_random_ops_to_torchs_generator():
    full, kept = decomposition_table(), decomposition_table(random=False)
    for op in (aten.rand.default, aten.randn_like.default, aten.bernoulli.p):
        assert op in full and op not in kept, op
    assert aten.native_dropout.default not in kept
    assert aten.add.Tensor in kept and aten._softmax.default in kept
    # attention rows are tagged seeded (their dropout_p) but draw nothing themselves
    assert aten._scaled_dot_product_flash_attention_for_cpu.default in kept
    assert all(torch.Tag.nondeterministic_seeded in op.tags for op in set(full) - set(kept))
    assert decomposition_table([aten.rand, aten.add.Tensor], random=False) == {
        aten.add.Tensor: full[aten.add.Tensor]
    }


def test_missing_overload_is_a_key_error_naming_it():
    with pytest.raises(KeyError, match=r"aten\.nonzero\.default"):
        decomposition_table([aten.nonzero.default])


def test_duplicate_registration_is_refused():
    with pytest.raises(DuplicateDecomposition, match=r"aten\.add\.Tensor"):
        register_decomposition(aten.add.Tensor)(lambda a, b, alpha=1: a)


def test_no_inplace_or_out_overloads():
    for op in decomposition_table():
        name = op._schema.name.split("::")[-1]
        assert not name.endswith("_"), op
        assert not op._overloadname.endswith("out"), op
        if op._schema.is_mutable:
            assert op in MUTATING_WITH_WRITE_BACK, op
