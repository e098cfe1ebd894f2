"""sympy -> Python source, evaluated against sympy's own value."""

import pytest
import sympy

from ember_symbolic import to_python

a, b = sympy.symbols("a b", integer=True, positive=True)


@pytest.mark.parametrize(
    "expr",
    [
        a + 2 * b - 3,
        a * b,
        sympy.floor(a / 3),
        sympy.floor((a + b) / 4),
        sympy.ceiling(a / 3),
        sympy.Mod(a, 4),
        sympy.Max(a, b),
        sympy.Min(a, 2),
        a**2,
        sympy.Eq(a, b),
        sympy.Ne(a, 3),
        sympy.And(a > 2, b <= 5),
        sympy.Or(a < 2, sympy.Not(sympy.Eq(b, 5))),
        a / b,
        -a,
        sympy.Piecewise((a, a > b), (b, True)),
        sympy.Eq(sympy.Mod(a * b, 4), 0),
    ],
)
@pytest.mark.parametrize(("va", "vb"), [(7, 5), (2, 9), (12, 4)])
def test_python_form_agrees_with_sympy(expr, va, vb):
    text = to_python(expr, {a: "A", b: "B"})
    value = eval(text, {"A": va, "B": vb})
    expected = expr.subs({a: va, b: vb})
    if expected.is_Boolean:
        assert value == bool(expected), text
    else:
        assert value == pytest.approx(float(expected)), text


def test_floor_division_prints_as_integer_division():
    assert to_python(sympy.floor(a / 4)) == "(a // 4)"
    assert to_python(sympy.Mod(a, 4)) == "(a % 4)"
