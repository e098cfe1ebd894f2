"""The ShapeEnv methods torch's own Python code calls through `symint.node.shape_env`.

torch's reference implementations and meta functions (run under the Python dispatcher)
use helpers such as `guard_or_false`, `statically_known_true` and
`_constrain_range_for_size`, which reach the env of a SymInt's node and call the methods
below by name. Each is a thin adapter onto our own ShapeEnv API. The set was found with torch 2.13 by
running the ops of tests/test_tensors.py under the Python dispatcher and FakeTensorMode, and
by reading which torch helpers reach a non-PyTorch SymNode's env (tests/test_torch_protocol.py
calls each through the torch helper that uses it).
"""

from __future__ import annotations

from typing import Any

import sympy

from ember_symbolic.value_ranges import ValueRange


class TorchShapeEnvProtocol:
    """Mixed into ShapeEnv; relies on its evaluate/static_value/bound/size_hint."""

    # Flags FakeTensorMode reads before it makes an unbacked size (nonzero, item()).
    allow_dynamic_output_shape_ops: bool = False
    allow_scalar_outputs: bool = False

    @property
    def var_to_range(self) -> dict[sympy.Symbol, Any]:
        """Our ranges as torch's `ValueRanges`: FakeTensorMode's nonzero bounds the output
        size with torch's interval analysis over this mapping."""
        from torch.utils._sympy.value_ranges import ValueRanges

        return {s: ValueRanges(r.lo, r.hi) for s, r in self.ranges.items()}

    def create_unbacked_symfloat(self) -> Any:
        return self.unbacked_value(float)

    def create_unbacked_symbool(self) -> Any:
        return self.unbacked_value(bool)

    def evaluate_sym_node(
        self, node: Any, size_oblivious: bool = False, fallback_value: bool | None = None
    ) -> Any:
        """guard_or_false/guard_or_true: decide `node` (with a guard), or take the
        fallback when it depends on data."""
        known = self.static_value(node.expr)
        if known is not None:
            return known
        if not self.has_hint(node.expr):
            if fallback_value is None:
                return self.evaluate(node.expr)  # raises DataDependentError
            return fallback_value
        return self.evaluate(node.expr)

    def _maybe_evaluate_static(self, expr: sympy.Basic, **_: Any) -> sympy.Basic | None:
        value = self.static_value(expr)
        return None if value is None else sympy.sympify(value)

    def bound_sympy(self, expr: sympy.Basic, **_: Any) -> ValueRange:
        return self.bound(expr)

    def _constrain_range_for_size(
        self, symbol: sympy.Symbol, min: int | None = None, max: int | None = None
    ) -> None:
        """An unbacked value is used as a size: it is at least 0 (or `min`)."""
        self.constrain_range(symbol, 0 if min is None else min, max)

    def _constrain_range(self, symbol: sympy.Symbol, min: int | None, max: int | None) -> None:
        self.constrain_range(symbol, min, max)
