"""ShapeEnv: size symbols, their ranges and example values, and the guards a trace adds.

One ShapeEnv per trace. The tracer creates symbols for the sizes (and ints) it wants
dynamic, wraps them in `torch.SymInt`s (`create_symint`), and every time torch or the user
program decides a condition on them (`if x.size(0) > 4`, a broadcast check, a view's
divisibility) the SymNode calls `evaluate`, which answers from the example values and
records the guard that answer relied on. Lower stages reach this object through
`symint.node.shape_env`; there is no global.
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import sys
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path

import sympy
import torch

from ember_symbolic.errors import ConstraintViolationError, DataDependentError, InvalidSizeError
from ember_symbolic.guards import (
    NameOf,
    RenderedGuard,
    ShapeGuard,
    default_name,
    render_guard,
    with_properties,
)
from ember_symbolic.range_check import counterexample
from ember_symbolic.sym_node import SymNode
from ember_symbolic.torch_protocol import TorchShapeEnvProtocol
from ember_symbolic.value_ranges import ValueRange, bound, oo

Scalar = bool | int | float


class DimDynamic(enum.Enum):
    """How `create_symbol` treats a size."""

    DUCK = "duck"  # symbolic; equal sizes share one symbol (guarded equal)
    DYNAMIC = "dynamic"  # the user asked for it (mark_dynamic): own symbol, never specialized
    STATIC = "static"  # a constant (mark_static, or dynamic=False)


_RELATION_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}
_HERE = str(Path(__file__).resolve().parent)
_TORCH = str(Path(torch.__file__).resolve().parent)


def _python_location() -> str:
    """Fallback where-string: the innermost frame outside torch and this package."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not (filename.startswith((_HERE, _TORCH)) or filename.startswith("<")):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return ""


def _integer_bound(cond: sympy.Basic) -> bool:
    """An inequality over integer symbols only (ranges are integer ranges)."""
    return (
        isinstance(cond, sympy.Rel)
        and not isinstance(cond, sympy.Eq | sympy.Ne)
        and all(s.is_integer for s in cond.free_symbols)
    )


class ShapeEnv(TorchShapeEnvProtocol):
    """Symbols, their example values and ranges, and the guards recorded on them."""

    def __init__(
        self,
        *,
        duck_shape: bool = True,
        where: Callable[[], str] | None = None,
        allow_dynamic_output_shape_ops: bool = False,
        allow_scalar_outputs: bool = False,
    ) -> None:
        self.duck_shape = duck_shape
        # Whether fake nonzero/unique/boolean masks and item() make unbacked symbols (else
        # FakeTensorMode raises its DynamicOutputShape / DataDependentOutput exceptions).
        self.allow_dynamic_output_shape_ops = allow_dynamic_output_shape_ops
        self.allow_scalar_outputs = allow_scalar_outputs
        # Called for each recorded guard; the tracer installs one giving the user's file:line.
        self.where: Callable[[], str] = where or _python_location
        self.var_to_val: dict[sympy.Symbol, sympy.Integer] = {}
        self.ranges: dict[sympy.Symbol, ValueRange] = {}
        self.var_to_sources: dict[sympy.Symbol, list[Hashable]] = {}
        self.var_to_dynamic: dict[sympy.Symbol, DimDynamic] = {}
        self.replacements: dict[sympy.Symbol, sympy.Expr] = {}
        self.unbacked: set[sympy.Symbol] = set()
        self.deferred_asserts: list[ShapeGuard] = []  # conditions on unbacked symbols
        self._guards: list[ShapeGuard] = []
        # Ranges at creation (>= 2, and the user's min/max); guards narrow `ranges` later.
        self._declared: dict[sympy.Symbol, ValueRange] = {}
        # Symbols marked dynamic with an explicit min/max: one graph serves their whole range
        self._strict: dict[sympy.Symbol, ValueRange] = {}
        self._facts: dict[sympy.Basic, sympy.Basic] = {}  # decided expr -> its value
        self._val_to_symbol: dict[int, sympy.Symbol] = {}
        # (numerator, divisor) pairs a guard proved divisible: floor(n/d) is then n/d
        self._divisible: set[tuple[sympy.Expr, sympy.Expr]] = set()
        self._backed_ids = itertools.count()
        self._unbacked_ids = itertools.count()
        self._suppressed = 0

    # ---- symbols -----------------------------------------------------------------
    def create_symbol(
        self,
        value: int,
        source: Hashable,
        *,
        dynamic: DimDynamic = DimDynamic.DUCK,
        min: int | None = None,
        max: int | None = None,
    ) -> sympy.Expr:
        """A sympy expression for the size `value` read at `source`: a fresh or shared symbol,
        or an Integer when the size specializes (0, 1, or STATIC). Specialized and shared
        sizes record a guard on `source`."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidSizeError(f"create_symbol needs an int size, got {value!r}")
        if value < 0:
            raise InvalidSizeError(f"size {value} at {source} is negative")
        declared = ValueRange.of(min, max)
        if min is not None and max is not None and min > max:
            raise InvalidSizeError(f"min={min} > max={max} for {source}")
        if dynamic is DimDynamic.DYNAMIC and value in (0, 1):
            raise ConstraintViolationError(
                f"{source} was marked dynamic but has size {value}; sizes 0 and 1 always "
                "specialize: mark it with a size of 2 or more, or don't mark it",
                source=source,
            )
        if not declared.contains(value):
            raise ConstraintViolationError(
                f"{source} has size {value}, outside its declared range {declared}", source=source
            )
        if dynamic is DimDynamic.STATIC or value in (0, 1):
            return self._specialize_source(source, value)
        if dynamic is DimDynamic.DUCK and self.duck_shape and value in self._val_to_symbol:
            symbol = self._val_to_symbol[value]
            self.var_to_sources[symbol].append(source)
            self._record(ShapeGuard(symbol, self.where(), source))
            return symbol
        symbol = sympy.Symbol(f"s{next(self._backed_ids)}", integer=True, positive=True)
        self.var_to_val[symbol] = sympy.Integer(value)
        self.ranges[symbol] = ValueRange.of(2, None).intersect(declared)
        self._declared[symbol] = self.ranges[symbol]
        if dynamic is DimDynamic.DYNAMIC and (min is not None or max is not None):
            self._strict[symbol] = self.ranges[symbol]
        self.var_to_sources[symbol] = [source]
        self.var_to_dynamic[symbol] = dynamic
        if dynamic is DimDynamic.DUCK:
            self._val_to_symbol.setdefault(value, symbol)
        return symbol

    def _specialize_source(self, source: Hashable, value: int) -> sympy.Integer:
        self._record(ShapeGuard(sympy.Integer(value), self.where(), source))
        return sympy.Integer(value)

    def create_symint(self, value: int, source: Hashable, **kwargs: object) -> int | torch.SymInt:
        """`create_symbol` wrapped: a plain int when the size specializes, else a SymInt."""
        return self.symint(self.create_symbol(value, source, **kwargs))

    def create_int_symbol(
        self,
        value: int,
        source: Hashable,
        *,
        dynamic: DimDynamic = DimDynamic.DUCK,
        specialize_zero_one: bool = True,
    ) -> sympy.Expr:
        """A symbol for a Python int that is not a size (a function's `n`): any integer,
        negative too, its own symbol (no duck sharing with sizes). 0 and 1 specialize as
        sizes do (guarded on `source`) unless `specialize_zero_one` is False (an int already
        seen to vary: 0 or 1 is one more of its values), as does STATIC."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidSizeError(f"create_int_symbol needs an int, got {value!r}")
        if dynamic is DimDynamic.STATIC or (specialize_zero_one and value in (0, 1)):
            return self._specialize_source(source, value)
        symbol = sympy.Symbol(f"s{next(self._backed_ids)}", integer=True)
        self.var_to_val[symbol] = sympy.Integer(value)
        self.ranges[symbol] = ValueRange.unknown()
        self._declared[symbol] = self.ranges[symbol]
        self.var_to_sources[symbol] = [source]
        self.var_to_dynamic[symbol] = dynamic
        return symbol

    def create_int_symint(
        self, value: int, source: Hashable, **kwargs: object
    ) -> int | torch.SymInt:
        """`create_int_symbol` wrapped: a plain int when it specializes, else a SymInt."""
        return self.symint(self.create_int_symbol(value, source, **kwargs))

    def create_unbacked_symbol(
        self, *, min: int | None = None, max: int | None = None
    ) -> sympy.Symbol:
        """An integer symbol with no example value: a data-dependent size (nonzero's, whose
        caller narrows it to >= 0 as torch's fake kernels do with `_constrain_range_for_size`)
        or an int read from a tensor (`item()`, any sign). No `min`: unbounded, as torch's."""
        nonnegative = True if min is not None and min >= 0 else None
        symbol = sympy.Symbol(f"u{next(self._unbacked_ids)}", integer=True, nonnegative=nonnegative)
        self.unbacked.add(symbol)
        self.ranges[symbol] = ValueRange.of(min, max)
        return symbol

    def create_unbacked_symint(
        self, *, min: int | None = None, max: int | None = None
    ) -> torch.SymInt:
        return self.symint(self.create_unbacked_symbol(min=min, max=max))

    def constrain_range(self, symbol: sympy.Symbol, min: int | None, max: int | None) -> None:
        """Narrow a symbol's range (e.g. an unbacked size is known to be >= 0)."""
        current = self.ranges.get(symbol, ValueRange.unknown())
        self.ranges[symbol] = current.intersect(ValueRange.of(min, max))

    def unbacked_value(self, pytype: type) -> torch.SymFloat | torch.SymBool:
        """An unbacked float or bool (`item()` of a float or bool tensor)."""
        symbol = sympy.Symbol(f"u{next(self._unbacked_ids)}", real=pytype is float)
        self.unbacked.add(symbol)
        self.ranges[symbol] = ValueRange.unknown()
        wrapper = torch.SymFloat if pytype is float else torch.SymBool
        return wrapper(SymNode(symbol, self, pytype))

    def symint(self, expr: sympy.Expr | int) -> int | torch.SymInt:
        """A SymInt over `expr` in this env (a plain int if `expr` is a number)."""
        expr = sympy.sympify(expr)
        return int(expr) if expr.is_Integer else torch.SymInt(SymNode(expr, self, int))

    # ---- values ------------------------------------------------------------------
    def simplify(self, expr: sympy.Basic) -> sympy.Basic:
        """`expr` with the replacements guards established (equal symbols, constants)."""
        expr = sympy.sympify(expr)
        if self.replacements and expr.free_symbols & self.replacements.keys():
            expr = expr.xreplace(self.replacements)
        if self._divisible and expr.has(sympy.floor, sympy.Mod):
            expr = expr.replace(lambda e: isinstance(e, sympy.floor | sympy.Mod), self._exact)
        return expr

    def _exact(self, expr: sympy.Basic) -> sympy.Basic:
        """floor(n/d) -> n/d and Mod(n, d) -> 0 where a guard proved d divides n."""
        if isinstance(expr, sympy.Mod):
            return sympy.Integer(0) if tuple(expr.args) in self._divisible else expr
        num, den = expr.args[0].as_numer_denom()
        return num / den if (num, den) in self._divisible else expr

    def size_hint(self, expr: sympy.Basic | torch.SymInt | int) -> Scalar:
        """The concrete value of `expr` on the example values (no guard)."""
        if isinstance(expr, torch.SymInt | torch.SymFloat | torch.SymBool):
            expr = expr.node.expr
        value = self.simplify(expr).xreplace(self.var_to_val)
        if value.free_symbols:
            raise DataDependentError(expr)
        return _to_python(value)

    def has_hint(self, expr: sympy.Basic) -> bool:
        return not (self.simplify(expr).free_symbols & self.unbacked)

    def bound(self, expr: sympy.Basic) -> ValueRange:
        return bound(self.simplify(expr), self.ranges)

    # ---- deciding conditions -----------------------------------------------------
    def static_value(self, expr: sympy.Basic) -> Scalar | None:
        """The value of `expr` when ranges and earlier guards prove it; else None."""
        expr = self.simplify(expr)
        if expr in self._facts:
            expr = self._facts[expr]
        if expr is sympy.true or expr is sympy.false or expr.is_Number:
            return _to_python(expr)
        if isinstance(expr, sympy.Rel):
            return self._static_relation(expr)
        if isinstance(expr, sympy.Not):
            inner = self.static_value(expr.args[0])
            return None if inner is None else not inner
        if isinstance(expr, sympy.And | sympy.Or):
            values = [self.static_value(a) for a in expr.args]
            absorbing = isinstance(expr, sympy.Or)  # True decides an Or, False an And
            if absorbing in values:
                return absorbing
            return None if None in values else not absorbing
        if expr.is_Boolean:
            return None
        span = self.bound(expr)
        return _to_python(span.lo) if span.is_singleton() else None

    def _static_relation(self, rel: sympy.Rel) -> bool | None:
        decide = _RELATION_DECIDERS[rel.rel_op]
        diff = sympy.expand(rel.lhs - rel.rhs)
        span = self.bound(diff)
        known = decide(span.lo, span.hi)
        if known is None and diff.is_Add:  # s1 - s0*s1 bounds better as s1*(1 - s0)
            factored = sympy.factor(diff)
            if factored != diff:
                span = self.bound(factored)
                known = decide(span.lo, span.hi)
        return known

    def statically_known_true(self, expr: sympy.Basic) -> bool:
        return self.static_value(expr) is True

    def evaluate(self, expr: sympy.Basic, hint: Scalar | None = None) -> Scalar:
        """Decide `expr` on the example values; record the guard that the answer needs
        (unless ranges and earlier guards already prove it). `hint` overrides the value
        computed from the example values (e.g. for unbacked symbols)."""
        expr = self.simplify(expr)
        known = self.static_value(expr)
        if known is not None:
            return known
        if hint is None:
            if not self.has_hint(expr):
                raise DataDependentError(expr, where=self.where())
            hint = self.size_hint(expr)
        if not self._suppressed:
            condition = _condition_for(expr, hint)
            self._facts[expr] = sympy.sympify(hint)
            self._record(ShapeGuard(_simplify(condition), self.where()))
        return hint

    def defer_runtime_assert(self, expr: sympy.Basic) -> bool:
        """`expect_true` on an unbacked condition: assumed now, to be checked when the graph
        runs (the tracer emits these; they are not entry guards). Each conjunct is a fact
        from here on, and a bound on one symbol narrows its range (`u0 >= 3`)."""
        expr = self.simplify(expr)
        if self.static_value(expr) is None:
            self.deferred_asserts.append(ShapeGuard(expr, self.where()))
            self._facts[expr] = sympy.true
            for part in expr.args if isinstance(expr, sympy.And) else (expr,):
                self._facts[part] = sympy.true
                if isinstance(part, sympy.Rel):  # and its negation is false: `x != 0`
                    self._facts[sympy.Not(part)] = sympy.false  # decides `x == 0`
                if _integer_bound(part):
                    self._learn_range(part)
        return True

    @contextlib.contextmanager
    def suppress_guards(self) -> Iterator[None]:
        """Evaluate conditions without recording guards (for reading hints)."""
        self._suppressed += 1
        try:
            yield
        finally:
            self._suppressed -= 1

    # ---- guards ------------------------------------------------------------------
    def _record(self, guard: ShapeGuard) -> None:
        if self._suppressed:
            return
        if guard.source is None:
            if guard.expr is sympy.true:
                return
            self._learn(guard)
        self._guards.append(guard)

    def _learn(self, guard: ShapeGuard) -> None:
        """What a new guard lets later evaluations prove: constants, equal symbols, ranges."""
        cond = guard.expr
        self._facts[cond] = sympy.true
        if isinstance(cond, sympy.Eq):
            self._learn_equality(cond, guard.where)
        elif isinstance(cond, sympy.Rel):
            self._learn_range(cond)
            self._check_pinned(cond, guard.where)
        self._check_strict_range(cond, guard.where)

    def _check_strict_range(self, cond: sympy.Basic, where: str) -> None:
        """A dim marked dynamic with a min/max promised one graph for its whole range: a
        guard on it alone that a size of that range fails breaks the promise."""
        if len(cond.free_symbols) != 1:
            return
        (symbol,) = cond.free_symbols
        span = self._strict.get(symbol)
        if span is None:
            return
        size = counterexample(cond, symbol, span)
        if size is not None:
            sources = ", ".join(map(str, self.var_to_sources[symbol]))
            raise ConstraintViolationError(
                f"{sources} was marked dynamic in the range {span}, but the program adds the "
                f"guard {cond}, which size {size} of that range fails (one graph cannot "
                "serve the whole range)",
                source=self.var_to_sources[symbol][0],
                where=where,
            )

    def _check_pinned(self, cond: sympy.Rel, where: str) -> None:
        """Bounds that leave a symbol one value (`s0 <= 3` after `s0 >= 3`) force it to a
        constant as an equality would: an error for a dim marked dynamic."""
        for symbol in cond.free_symbols:
            span = self.ranges.get(symbol)
            if span is not None and span.lo == span.hi and span.lo.is_finite:
                self._check_specialization(symbol, int(span.lo), where)

    def _learn_equality(self, cond: sympy.Eq, where: str) -> None:
        lhs, rhs = cond.lhs, cond.rhs
        if isinstance(rhs, sympy.Symbol | sympy.Mod) and not isinstance(lhs, sympy.Symbol):
            lhs, rhs = rhs, lhs
        if isinstance(lhs, sympy.Mod) and rhs == 0:
            self._divisible.add(tuple(lhs.args))
            return
        if not isinstance(lhs, sympy.Symbol):
            return
        if rhs.is_Integer:
            self._check_specialization(lhs, int(rhs), where)
            self.replacements[lhs] = rhs
        elif isinstance(rhs, sympy.Symbol) and lhs in self.var_to_val and rhs in self.var_to_val:
            older, newer = sorted((lhs, rhs), key=lambda s: int(s.name[1:]))
            self.replacements[newer] = older
            self.ranges[older] = self.ranges[older].intersect(self.ranges[newer])

    def _check_specialization(self, symbol: sympy.Symbol, value: int, where: str) -> None:
        if self.var_to_dynamic.get(symbol) is DimDynamic.DYNAMIC:
            sources = ", ".join(map(str, self.var_to_sources.get(symbol, [])))
            raise ConstraintViolationError(
                f"{sources} was marked dynamic, but the program requires it to be {value} "
                "(the trace specialized it to a constant)",
                source=self.var_to_sources[symbol][0],
                where=where,
            )

    def _learn_range(self, cond: sympy.Rel) -> None:
        diff = sympy.expand(cond.lhs - cond.rhs)
        if len(diff.free_symbols) != 1:
            return
        (symbol,) = diff.free_symbols
        constant, term = diff.as_independent(symbol, as_Add=True)
        coeff = sympy.simplify(term / symbol)
        if not coeff.is_Number or coeff == 0 or symbol not in self.ranges:
            return
        op = cond.rel_op if coeff > 0 else _RELATION_FLIP[cond.rel_op]
        limit = -constant / coeff  # the condition is now `symbol op limit`
        new = {
            ">": ValueRange(sympy.floor(limit) + 1, oo),
            ">=": ValueRange(sympy.ceiling(limit), oo),
            "<": ValueRange(-oo, sympy.ceiling(limit) - 1),
            "<=": ValueRange(-oo, sympy.floor(limit)),
        }.get(op)
        if new is not None:
            self.ranges[symbol] = self.ranges[symbol].intersect(new)

    def guards(self) -> list[ShapeGuard]:
        """Every guard recorded so far, in order."""
        return list(self._guards)

    def range_guards(self) -> list[ShapeGuard]:
        """Each backed symbol's range at creation as a condition: >= 2 (0 and 1 specialize)
        and the declared min/max. Ranges narrowed later come from recorded guards."""
        out = []
        for symbol, span in self._declared.items():
            if symbol in self.replacements:
                continue
            parts = []
            if span.lo.is_finite:
                parts.append(sympy.Ge(symbol, span.lo, evaluate=False))
            if span.hi.is_finite:
                parts.append(sympy.Le(symbol, span.hi, evaluate=False))
            where = f"range of {symbol} {span}, from {self.var_to_sources[symbol][0]}"
            out += [ShapeGuard(p, where) for p in parts]
        return out

    def symbol_names(self, name_of: NameOf = default_name) -> dict[sympy.Symbol, str]:
        """Each backed symbol -> Python text reading its first source."""
        name_of = with_properties(name_of)
        return {s: name_of(srcs[0]) for s, srcs in self.var_to_sources.items() if srcs}

    def render_guards(self, name_of: NameOf = default_name) -> list[RenderedGuard]:
        """All guards (ranges, duck-sizing equalities, specializations, recorded conditions)
        as Python expressions over the sources; `name_of(source)` gives a source's text."""
        name_of = with_properties(name_of)
        names = self.symbol_names(name_of)
        sources = {s: srcs[0] for s, srcs in self.var_to_sources.items() if srcs}
        return [
            render_guard(g, names, name_of, sources) for g in self.range_guards() + self._guards
        ]

    def describe(self) -> str:
        """Symbols (source, value, range) and guards with their lines, for logs."""
        lines = [
            f"{s} = {self.var_to_val.get(s, '?')} from "
            f"{', '.join(map(str, self.var_to_sources.get(s, ['<unbacked>'])))} range {r}"
            for s, r in self.ranges.items()
        ]
        return "\n".join(lines + [str(g) for g in self._guards])


def _condition_for(expr: sympy.Basic, value: Scalar) -> sympy.Basic:
    if expr.is_Boolean or isinstance(expr, sympy.Rel):
        return expr if value else sympy.Not(expr)
    return sympy.Eq(expr, value)


def _simplify(cond: sympy.Basic) -> sympy.Basic:
    """A smaller equivalent form when sympy finds one quickly (guards are printed and run)."""
    try:
        simpler = sympy.simplify(cond)
    except Exception:  # sympy gives up on some Mod/floor mixes: keep the original
        return cond
    return simpler if sympy.count_ops(simpler) <= sympy.count_ops(cond) else cond


def _to_python(value: sympy.Basic) -> Scalar:
    if value is sympy.true or value is sympy.false:
        return bool(value)
    if value.is_Integer:
        return int(value)
    if value.is_Number:
        return float(value)
    if value.is_Boolean:
        return bool(value)
    raise DataDependentError(value)


_RELATION_DECIDERS: dict[str, Callable[[sympy.Expr, sympy.Expr], bool | None]] = {
    # the relation `diff op 0`, decided from diff's range [lo, hi]
    "==": lambda lo, hi: True if lo == hi == 0 else (False if lo > 0 or hi < 0 else None),
    "!=": lambda lo, hi: False if lo == hi == 0 else (True if lo > 0 or hi < 0 else None),
    ">": lambda lo, hi: True if lo > 0 else (False if hi <= 0 else None),
    ">=": lambda lo, hi: True if lo >= 0 else (False if hi < 0 else None),
    "<": lambda lo, hi: True if hi < 0 else (False if lo >= 0 else None),
    "<=": lambda lo, hi: True if hi <= 0 else (False if lo > 0 else None),
}
