"""Shape guards: what a trace assumed about sizes, and their Python form.

The ShapeEnv records a `ShapeGuard` each time a symbolic condition is decided on the
example values. `render_guards` turns them (plus each symbol's range and the equalities
duck sizing relied on) into Python expressions over the sources that produced the sizes,
for the tracer to put into its guard function; `compile_guards` and `failure_reason` are a
self-contained way to check them (tests, and the reason text of a failed shape guard).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy

from ember_symbolic.printer import to_python
from ember_symbolic.sources import TensorPropertySource

NameOf = Callable[[Hashable], str]


@dataclass(frozen=True)
class ShapeGuard:
    """A condition the trace relied on.

    With `source` None, `expr` is a boolean sympy expression over symbols that must hold.
    With a `source`, the guard is "the value read at `source` equals `expr`" (duck sizing
    reused a symbol for it, or the size was specialized to a constant).
    """

    expr: sympy.Basic
    where: str = ""
    source: Hashable | None = None

    def __str__(self) -> str:
        text = f"{self.source} == {self.expr}" if self.source is not None else str(self.expr)
        return f"{text}  # {self.where}" if self.where else text


@dataclass(frozen=True)
class RenderedGuard:
    """One guard as Python source (`code`), the sympy text it came from, and its line."""

    code: str
    expr: str
    where: str = ""
    # (source, n) when the guard says "the value read at `source` is the int n" (a size
    # specialized to a constant): failure reasons then name the source and both values.
    pinned: tuple[Hashable, int] | None = None


def default_name(source: Hashable) -> str:
    """Python text for a source: a string is taken as is; an object with an `expr()`
    method (the tracer's sources) or a `name()` method is asked."""
    if isinstance(source, str):
        return source
    if isinstance(source, TensorPropertySource):
        return source.render(default_name)
    for method in ("expr", "name"):
        fn = getattr(source, method, None)
        if callable(fn):
            return fn()
    raise TypeError(f"cannot name source {source!r}: pass name_of= to render_guards")


def with_properties(name_of: NameOf) -> NameOf:
    """`name_of` extended to our size/stride sources (whose base `name_of` knows)."""

    def named(source: Hashable) -> str:
        if isinstance(source, TensorPropertySource):
            return source.render(named)
        return name_of(source)

    return named


def render_guard(
    guard: ShapeGuard,
    names: dict[sympy.Symbol, str],
    name_of: NameOf,
    sources: dict[sympy.Symbol, Hashable] | None = None,
) -> RenderedGuard:
    """`guard` as Python; `sources` (each symbol's first source) lets a guard that pins a
    symbol to an int (`Eq(s0, 10)`) say which source it pins."""
    if guard.source is None:
        code = to_python(guard.expr, names)
        text = str(guard.expr)
    else:
        code = f"{name_of(guard.source)} == {to_python(guard.expr, names)}"
        text = f"{name_of(guard.source)} == {guard.expr}"
    return RenderedGuard(code, text, guard.where, _pinned(guard, sources or {}))


def _pinned(
    guard: ShapeGuard, sources: dict[sympy.Symbol, Hashable]
) -> tuple[Hashable, int] | None:
    expr = guard.expr
    if guard.source is not None:
        return (guard.source, int(expr)) if expr.is_Integer else None
    if not isinstance(expr, sympy.Eq):
        return None
    for symbol, value in (expr.args, expr.args[::-1]):
        if symbol in sources and value.is_Integer:
            return sources[symbol], int(value)
    return None


def compile_guards(rendered: Sequence[RenderedGuard], arg: str = "L") -> Callable[[Any], bool]:
    """One function `check(L) -> bool` that is true when every guard holds."""
    body = " and ".join(f"({g.code})" for g in rendered) or "True"
    return eval(f"lambda {arg}: {body}", {"math": math})


def failure_reason(rendered: Iterable[RenderedGuard], value: Any, arg: str = "L") -> str | None:
    """The first guard that fails on `value` (bound to `arg`), as a readable reason; None
    when all pass."""
    for guard in rendered:
        check = eval(f"lambda {arg}: {guard.code}", {"math": math})
        try:
            ok = check(value)
        except Exception as exc:  # a source that no longer resolves fails the guard
            return f"{guard.code} raised {type(exc).__name__}: {exc} (guard {guard.expr})"
        if not ok:
            where = f", added at {guard.where}" if guard.where else ""
            return f"shape guard failed: {guard.code}  (that is, {guard.expr}{where})"
    return None
