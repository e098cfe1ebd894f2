"""Index simplification folds reshapes back to plain indices."""

import sympy

from ember_inductor_ir.indexing import (
    FloorDiv,
    ModularIndexing,
    flat_to_multi,
    index_vars,
    known_le,
    multi_to_flat,
    simplify_index,
)


def test_flatten_then_unflatten_folds():
    (x,) = index_vars("i", 1)
    parts = flat_to_multi(x, [sympy.Integer(4), sympy.Integer(6)])
    assert simplify_index(multi_to_flat(parts, [4, 6]), {x: sympy.Integer(24)}) == x


def test_bounded_digits_fold():
    i0, i1 = index_vars("i", 2)
    ranges = {i0: sympy.Integer(3), i1: sympy.Integer(5)}
    assert simplify_index(ModularIndexing(i1, 1, 5), ranges) == i1
    assert simplify_index(FloorDiv(5 * i0 + i1, 5), ranges) == i0


def test_unflatten_into_an_empty_shape():
    x = sympy.Symbol("x", integer=True, nonnegative=True)
    assert flat_to_multi(x, [sympy.Integer(5), sympy.Integer(0), sympy.Integer(3)]) == [0, 0, 0]
    assert ModularIndexing(x + 4, sympy.Integer(0), sympy.Integer(3)).args[0] == x + 4


def test_digits_and_floors_keep_non_negative_operands():
    # C++ prints these with truncating / and %: a simplification may not make them negative.
    i0, i1 = index_vars("i", 2)
    two = sympy.Integer(2)
    digit = ModularIndexing(2 * i0 + i1 - 3, sympy.Integer(1), two)
    assert digit == ModularIndexing(i1 + 1, sympy.Integer(1), two)
    assert FloorDiv(2 * i0 + i1 - 3, two) == i0 - 2 + FloorDiv(i1 + 1, two)
    # A negative coefficient could still go negative: left as it is.
    kept = ModularIndexing(4 * i0 + 5 - i1, sympy.Integer(1), two)
    assert kept.args[0] == 4 * i0 + 5 - i1


# -- symbolic sizes (dynamic shapes): folds proven for every value of the size symbols --

S0 = sympy.Symbol("s0", integer=True, positive=True)


def test_symbolic_reshape_round_trip_folds_to_plain_strides():
    # [2, s0, 64] viewed as [2*s0, 64] and back: a row index over 2*s0 rows of 64.
    i0, i1 = index_vars("i", 2)
    (r0,) = index_vars("r", 1)
    index = r0 + 64 * ModularIndexing(64 * i0 * S0 + 64 * i1 + r0, 64, 2 * S0)
    assert simplify_index(index, {i0: 2, i1: S0, r0: 64}) == 64 * i0 * S0 + 64 * i1 + r0


def test_symbolic_head_split_folds():
    # [2, s0, 4, 16] -> [2*s0, 64] -> [2, s0, 4, 16] (BERT's head split over a symbolic length)
    i0, i1, i2, i3 = index_vars("i", 4)
    flat = 64 * i0 * S0 + 16 * i1 + 64 * i2 + i3
    row = 64 * S0 * ModularIndexing(flat, 64 * S0, 2) + 64 * ModularIndexing(flat, 64, S0)
    index = 16 * i1 + i3 + 64 * ModularIndexing(16 * i1 + i3 + row, 64, 2 * S0)
    got = simplify_index(index, {i0: 2, i1: 4, i2: S0, i3: 16})
    assert got == 64 * i0 * S0 + 16 * i1 + 64 * i2 + i3


def test_symbolic_digits_merge_inside_a_digit():
    i0, i1 = index_vars("i", 2)
    x = 256 * i0 + i1
    row = 256 * S0 * FloorDiv(x, 256 * S0) + 256 * ModularIndexing(x, 256, S0)
    index = i1 + 256 * ModularIndexing(i1 + row, 256, 2 * S0)
    assert simplify_index(index, {i0: 2 * S0, i1: 256}) == 256 * i0 + i1


def test_symbolic_fold_needs_a_proof_for_every_size():
    # i1 runs to s0 + 1: the row can reach 2*s0 + 1 > 2*s0 rows, the digit must stay.
    i0, i1 = index_vars("i", 2)
    (r0,) = index_vars("r", 1)
    index = r0 + 64 * ModularIndexing(64 * i0 * S0 + 64 * i1 + r0, 64, 2 * S0)
    got = simplify_index(index, {i0: 2, i1: S0 + 1, r0: 64})
    assert got == r0 + 64 * ModularIndexing(i0 * S0 + i1, 1, 2 * S0)
    # a symbol that may be negative (a Python int, not a size) proves nothing
    n = sympy.Symbol("n", integer=True)
    assert simplify_index(ModularIndexing(i0, 1, n), {i0: 4}) == ModularIndexing(i0, 1, n)
    # whole multiples of a symbolic divisor leave the floor; a remainder of unknown sign stays
    assert FloorDiv(6 * S0 * i0 + i1, 2 * S0) == 3 * i0 + FloorDiv(i1, 2 * S0)
    assert FloorDiv(6 * S0 * i0 - i1, 2 * S0).args[0] == 6 * S0 * i0 - i1


def test_known_le_uses_only_what_holds_for_every_size():
    assert known_le(64, 64 * S0)  # s0 >= 1
    assert not known_le(65, 64 * S0)  # s0 == 1 breaks it
    assert known_le(128 * S0, 2 * S0 * 64)
    assert not known_le(S0, 2)
    n = sympy.Symbol("n", integer=True)
    assert not known_le(0, n)


def test_common_factor_of_a_symbolic_divisor():
    # GQA: query head i1 of 4 reads kv head i1 // 2 through a (kv, 2, s0, 16) expand
    i1, i2, i3 = index_vars("i", 4)[1:]
    index = FloorDiv(16 * i1 * S0 + 16 * i2 + i3, 32 * S0)
    assert simplify_index(index, {i1: 4, i2: S0, i3: 16}) == FloorDiv(i1, 2)
    # i2 may reach s0 (its range is s0 + 1): only the factor 16 leaves, s0 stays
    got = simplify_index(index, {i1: 4, i2: S0 + 1, i3: 16})
    assert got == FloorDiv(i1 * S0 + i2, 2 * S0)
    # static sizes too: (432*i1 + 16*i2 + i3) // 864 with 16*i2 + i3 < 432
    static = FloorDiv(432 * i1 + 16 * i2 + i3, 864)
    assert simplify_index(static, {i1: 4, i2: 27, i3: 16}) == FloorDiv(i1, 2)


def test_a_digit_of_a_digit_is_one_digit_of_the_base():
    """Loops flattened into one index (a [12608, 2304] kernel over ViT's q, k, v gradients)
    put digits inside digits: each is one digit of the flat index, so the mixed-radix terms
    merge back (768 * (x // 2304) + x % 768, not four divisions and three moduli)."""
    x = sympy.Symbol("x", integer=True, nonnegative=True)
    assert ModularIndexing(FloorDiv(x, 2304), 1, 197) == ModularIndexing(x, 2304, 197)
    assert ModularIndexing(ModularIndexing(x, 1, 2304), 1, 768) == ModularIndexing(x, 1, 768)
    assert FloorDiv(ModularIndexing(x, 1, 2304), 768) == ModularIndexing(x, 768, 3)
    # not a whole digit: kept as written
    assert isinstance(ModularIndexing(ModularIndexing(x, 1, 2304), 1, 7).args[0], ModularIndexing)
    assert isinstance(FloorDiv(ModularIndexing(x, 1, 10), 4), FloorDiv)
    flat = (
        151296 * FloorDiv(FloorDiv(x, 2304), 197)
        + 768 * ModularIndexing(FloorDiv(x, 2304), 1, 197)
        + ModularIndexing(ModularIndexing(x, 1, 2304), 1, 768)
    )
    assert simplify_index(flat, {x: 12608 * 2304}) == 768 * FloorDiv(x, 2304) + ModularIndexing(
        x, 1, 768
    )
    for value in (0, 767, 768, 2303, 2304, 453887, 453888, 12608 * 2304 - 1):
        assert flat.subs(x, value) == (768 * (value // 2304) + value % 768)
