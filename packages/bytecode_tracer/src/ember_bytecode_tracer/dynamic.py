"""Dynamic shapes in the tracer: which sizes and ints a trace makes symbolic, and why.

`DynamicPolicy` (one per FrameCompiler) holds the setting (`dynamic=None|True|False`) and,
per code object (weakly), what the previous compile saw: tensor sizes and int values by
source, and which of them turned out to vary. `DynamicTrace` (one per trace, owned by the
OutputGraph) holds the trace's `ShapeEnv` and fake mode and answers, for each tensor or int
read through a source, whether it becomes symbolic:

- `dynamic=False`: never.
- `dynamic=True`: every tensor size (0 and 1 specialize; parameters stay static) and every
  int read from a local or a global, from the first call.
- `dynamic=None` (automatic): the first compile is static; a later compile of the same code
  object makes symbolic the dims and ints whose values differ from the previous compile's
  (that difference is what made the guard fail), and they stay symbolic for that code.

`mark_dynamic` / `mark_static` / `maybe_mark_dynamic` store marks on the tensor object;
marked dims follow the mark from the first call (except under `dynamic=False`).
Sources named in `dynamic_sources` (named_sources.py) are symbolic from the first call under
every setting, parameters included.
"""

from __future__ import annotations

import logging
import math
import weakref
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import sympy
import torch

import ember_symbolic as es
from ember_bytecode_tracer.guards import (
    AttrSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    TensorSpec,
    tensor_mismatch,
)
from ember_bytecode_tracer.named_sources import NamedSources

if TYPE_CHECKING:
    import types
    from collections.abc import Callable

    from ember_bytecode_tracer.guards import CompiledGuard, Source

log = logging.getLogger("ember.dynamic")

# The marks live on the tensor object itself, as torch.compile's do: {dim: es.Dim}.
MARKS_ATTR = "_ember_dim_marks"


class DynamicMarkError(ValueError):
    """A bad argument to mark_dynamic / mark_static / maybe_mark_dynamic."""


def _check_mark(t: Any, dim: Any, what: str) -> int:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{what} expects a tensor first, got {type(t).__name__}")
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{what}: dim must be an int, got {type(dim).__name__}")
    if not -t.dim() <= dim < max(t.dim(), 1) or t.dim() == 0:
        raise DynamicMarkError(
            f"{what}: dim {dim} is out of range for a tensor with {t.dim()} dims; "
            f"pass a dim in [{-t.dim()}, {t.dim() - 1}]"
        )
    return dim % t.dim()


def _set_mark(t: torch.Tensor, dim: int, mark: es.Dim) -> None:
    marks = dict(getattr(t, MARKS_ATTR, {}))
    marks[dim] = mark
    setattr(t, MARKS_ATTR, marks)


def mark_dynamic(t: torch.Tensor, dim: int, min: int | None = None, max: int | None = None) -> None:
    """Make dim `dim` of `t` symbolic from the first compile, within [min, max] if given.
    A trace that forces it to a constant raises ConstraintViolationError naming the line;
    with min/max, so does a guard that some size of [min, max] fails (one graph serves the
    whole range); a later call with a size outside [min, max] recompiles."""
    dim = _check_mark(t, dim, "mark_dynamic")
    for name, bound in (("min", min), ("max", max)):
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int)):
            raise TypeError(f"mark_dynamic: {name} must be an int or None, got {bound!r}")
    if min is not None and max is not None and min > max:
        raise DynamicMarkError(f"mark_dynamic: min={min} > max={max}; pass min <= max")
    if max is not None and max < 2:
        raise DynamicMarkError(
            f"mark_dynamic: max={max} < 2; sizes 0 and 1 always specialize, so a dynamic dim "
            "has size 2 or more: use mark_static for a dim that is always 0 or 1"
        )
    size = t.shape[dim]
    if size in (0, 1):
        raise DynamicMarkError(
            f"mark_dynamic: dim {dim} has size {size}; sizes 0 and 1 always specialize. "
            "Mark it on an example whose size is 2 or more, or use maybe_mark_dynamic"
        )
    _set_mark(t, dim, es.Dim(es.DimDynamic.DYNAMIC, min, max))


def mark_static(t: torch.Tensor, dim: int) -> None:
    """Keep dim `dim` of `t` a constant (each new size recompiles), even under dynamic=True."""
    _set_mark(t, _check_mark(t, dim, "mark_static"), es.Dim(es.DimDynamic.STATIC))


def maybe_mark_dynamic(t: torch.Tensor, dim: int) -> None:
    """Make dim `dim` of `t` symbolic from the first compile, but let the trace specialize
    it (with a guard) where the program needs a constant: no error."""
    _set_mark(t, _check_mark(t, dim, "maybe_mark_dynamic"), es.Dim(es.DimDynamic.DUCK))


def marks_of(t: torch.Tensor) -> dict[int, es.Dim]:
    return getattr(t, MARKS_ATTR, None) or {}


@dataclass
class CodeState:
    """What the compiles of one code object saw, for the automatic policy."""

    sizes: dict[Source, tuple[int, ...]] = field(default_factory=dict)
    ints: dict[Source, int] = field(default_factory=dict)
    dynamic_dims: dict[Source, set[int]] = field(default_factory=dict)
    dynamic_ints: set[Source] = field(default_factory=set)
    static_only: bool = False  # the backend failed on this code's symbolic graph


class DynamicPolicy:
    """The `dynamic=` setting of one FrameCompiler and its per-code-object state."""

    def __init__(
        self,
        mode: bool | None = None,
        *,
        capture_dynamic_output_shape_ops: bool = False,
        capture_scalar_outputs: bool = False,
        static_parameter_shapes: bool = False,
        dynamic_sources: str | NamedSources = "",
    ):
        if mode not in (None, True, False):
            raise ValueError(f"dynamic must be None, True or False, got {mode!r}")
        self.mode = mode
        self.capture_dynamic_output_shape_ops = capture_dynamic_output_shape_ops
        # Tensor.item()/.tolist() as unbacked symbolic scalars in the graph (scalar_outputs.py)
        self.capture_scalar_outputs = capture_scalar_outputs
        # nn.Parameter inputs keep static sizes under automatic dynamic shapes too (under
        # dynamic=True they always do): a parameter of a new size recompiles
        self.static_parameter_shapes = static_parameter_shapes
        # inputs the user named as dynamic (ember.config.dynamic_sources): from the first call
        self.dynamic_sources = NamedSources.parse(dynamic_sources)
        self._states: weakref.WeakKeyDictionary[types.CodeType, CodeState] = (
            weakref.WeakKeyDictionary()
        )

    def state(self, code: types.CodeType) -> CodeState:
        state = self._states.get(code)
        if state is None:
            state = self._states[code] = CodeState()
        return state

    def begin(self, code: types.CodeType | None, where: Callable[[], str]) -> DynamicTrace:
        return DynamicTrace(self, self.state(code) if code is not None else CodeState(), where)


STATIC_POLICY = DynamicPolicy(False)
# ShapeEnv -> its trace, both weakly: the trace holds its env, so a strong value would keep
# the entry (the trace's OutputGraph, its example inputs, the user's tensors) forever.
_TRACES: weakref.WeakKeyDictionary[es.ShapeEnv, weakref.ref[DynamicTrace]] = (
    weakref.WeakKeyDictionary()
)


def trace_of(env: es.ShapeEnv) -> DynamicTrace | None:
    """The trace a ShapeEnv belongs to (to find the graph a SymInt's nodes go into)."""
    ref = _TRACES.get(env)
    return ref() if ref is not None else None


class DynamicTrace:
    """The ShapeEnv, fake mode and symbolic decisions of one trace."""

    def __init__(self, policy: DynamicPolicy, state: CodeState, where: Callable[[], str]):
        self.policy = policy
        self.state = state
        self.env = es.ShapeEnv(
            where=where,
            allow_dynamic_output_shape_ops=policy.capture_dynamic_output_shape_ops,
            allow_scalar_outputs=policy.capture_scalar_outputs,
        )
        self.fake_mode = es.fake_mode(self.env, allow_non_fake_inputs=False)
        self.seen_sizes: dict[Source, tuple[int, ...]] = {}
        self.seen_ints: dict[Source, int] = {}
        self.node_cache: dict[sympy.Basic, Any] = {}  # expr -> fx.Node (sym_values)
        self.unbacked_nodes: dict[sympy.Symbol, tuple[Any, int]] = {}  # u0 -> (node, dim)
        self.scalar_nodes: dict[sympy.Symbol, Any] = {}  # u0 -> the item() node reading it
        self._logged: set[sympy.Symbol] = set()
        self.output: Any = None  # the OutputGraph owning this trace (it sets itself)
        _TRACES[self.env] = weakref.ref(self)

    @property
    def mode(self) -> bool | None:
        return False if self.state.static_only else self.policy.mode

    @property
    def is_symbolic(self) -> bool:
        return bool(self.env.var_to_val) or bool(self.env.unbacked)

    # ---- tensors -----------------------------------------------------------------
    def tensor_dims(self, source: Source, value: torch.Tensor) -> dict[int, es.Dim] | None:
        """Per-dim treatment of a tensor input, or None when it is entirely static."""
        sizes = tuple(value.shape)
        self.seen_sizes[source] = sizes
        if value.layout != torch.strided:
            return None
        named = self._named_dims(source, len(sizes))
        if self.mode is False and not named:
            return None
        dims: dict[int, es.Dim] = self._policy_dims(source, value, sizes)
        dims.update((d, es.Dim(es.DimDynamic.DUCK)) for d in named)
        if self.mode is not False:
            self._apply_marks(value, sizes, dims)
        if all(m.dynamic is es.DimDynamic.STATIC for m in dims.values()):
            return None
        return dims

    def _policy_dims(
        self, source: Source, value: torch.Tensor, sizes: tuple[int, ...]
    ) -> dict[int, es.Dim]:
        """The dims `dynamic=True` or the automatic policy makes symbolic."""
        dims: dict[int, es.Dim] = {}
        if self.mode is False:
            return dims
        if self.mode is True and not isinstance(value, torch.nn.Parameter):
            dims = {d: es.Dim(es.DimDynamic.DUCK) for d in range(len(sizes))}
        elif self.mode is None and not self._static_parameter(value):
            previous = self.state.sizes.get(source)
            if previous is not None and len(previous) == len(sizes):
                changed = {
                    d for d, (a, b) in enumerate(zip(previous, sizes, strict=True)) if a != b
                }
                if changed:
                    self.state.dynamic_dims.setdefault(source, set()).update(changed)
            for d in self.state.dynamic_dims.get(source, ()):
                if d < len(sizes):
                    dims[d] = es.Dim(es.DimDynamic.DUCK)
        return dims

    @staticmethod
    def _apply_marks(value: torch.Tensor, sizes: tuple[int, ...], dims: dict[int, es.Dim]) -> None:
        for d, mark in marks_of(value).items():
            # A size outside the declared [min, max] is compiled for as a constant: that call
            # retraces (the marked graph's range guard rejects it) rather than failing.
            inside = (mark.min is None or sizes[d] >= mark.min) and (
                mark.max is None or sizes[d] <= mark.max
            )
            dims[d] = mark if inside else es.Dim(es.DimDynamic.STATIC)

    def _named(self, source: Source) -> bool:
        named = self.policy.dynamic_sources
        return bool(named) and named.names(source.shown())

    def _named_dims(self, source: Source, ndim: int) -> set[int]:
        named = self.policy.dynamic_sources
        return named.dims(source.shown(), ndim) if named else set()

    def _static_parameter(self, value: torch.Tensor) -> bool:
        return self.policy.static_parameter_shapes and isinstance(value, torch.nn.Parameter)

    def fake_tensor(self, source: Source, value: torch.Tensor) -> torch.Tensor:
        dims = self.tensor_dims(source, value)
        if dims is None:
            return self.fake_mode.from_tensor(value, static_shapes=True)
        fake = es.fake_tensor(
            self.fake_mode, value, source, dims=dims, default=es.DimDynamic.STATIC
        )
        self.log_new_symbols()
        return fake

    def tensor_spec(self, value: torch.Tensor, fake: torch.Tensor) -> TensorSpec:
        """The TENSOR_MATCH spec: symbolic dims are not checked exactly, and when any dim is
        symbolic no stride is (the shape guards state the layout)."""
        spec = TensorSpec.of(value)
        dynamic = [d for d, s in enumerate(fake.shape) if isinstance(s, torch.SymInt)]
        if not dynamic:
            return spec
        spec = spec.with_dynamic(dynamic)
        if spec.strides is not None:
            spec = replace(spec, strides=(None,) * len(spec.strides))
        return spec

    # ---- ints --------------------------------------------------------------------
    def int_is_dynamic(self, source: Source, value: int) -> bool:
        """Whether the int read at `source` becomes a SymInt graph input."""
        if type(value) is not int:
            return False
        if self._named(source):
            self.state.dynamic_ints.add(source)  # symbolic at 0 and 1 too (see symint)
            return True
        if not _int_source(source):
            return False
        self.seen_ints[source] = value
        if self.mode is False:
            return False
        if self.mode is True:
            return value not in (0, 1)
        previous = self.state.ints.get(source)
        # changed since the last compile: another int, or a tensor there before (a value
        # whose kind changes between calls changes). Such an int stays symbolic at 0 and 1
        # too (as torch.compile's automatic dynamic ints do): the first compile saw one
        # value, the second covers the rest.
        if (previous is not None and previous != value) or source in self.state.sizes:
            self.state.dynamic_ints.add(source)
        return source in self.state.dynamic_ints

    def symint(self, source: Source, value: int) -> int | torch.SymInt:
        varying = source in self.state.dynamic_ints and (self.mode is None or self._named(source))
        result = self.env.create_int_symint(value, source, specialize_zero_one=not varying)
        self.log_new_symbols()
        return result

    # ---- end of trace ------------------------------------------------------------
    def commit(self) -> None:
        """The trace compiled: its values are what the next compile compares against."""
        self.state.sizes.update(self.seen_sizes)
        self.state.ints.update(self.seen_ints)

    def shape_guards(self) -> list[es.RenderedGuard]:
        if not self.env.var_to_val:
            return []
        return self.env.render_guards()

    def symbols(self) -> list[dict[str, Any]]:
        """Each size symbol of the trace: its name, the sources it was read from (the first
        one is what its guards read), its example value and its range, as plain data."""
        env = self.env
        return [
            {"symbol": str(s), "sources": [str(src) for src in env.var_to_sources.get(s, ())],
             "value": str(env.var_to_val.get(s, "?")), "range": str(env.ranges.get(s, ""))}
            for s in env.var_to_sources
        ]  # fmt: skip

    def wrap_guard(self, guard: CompiledGuard, f_globals: dict[str, Any]) -> Any:
        """The frame's compiled guard joined with the shape guards (if any)."""
        rendered = self.shape_guards()
        if log.isEnabledFor(logging.INFO):
            for g in rendered:
                log.info("guard: %s  # %s (added at %s)", g.code, g.expr, g.where or "?")
        if not rendered:
            return guard
        return ShapeGuardedCheck(guard, rendered, f_globals, self.symbols())

    def log_new_symbols(self) -> None:
        if not log.isEnabledFor(logging.INFO):
            return
        for symbol, sources in self.env.var_to_sources.items():
            if symbol not in self._logged:
                self._logged.add(symbol)
                log.info(
                    "create_symbol %s = %s for %s at %s",
                    symbol, self.env.var_to_val.get(symbol), sources[0], self.env.where(),
                )  # fmt: skip


class ShapeGuardedCheck:
    """A CompiledGuard plus the trace's shape guards, as one `check(L)`.

    The tensor/type guards run first (they establish that `L['x']` is a tensor of the
    expected rank), then the shape conditions, compiled into the same lambda."""

    def __init__(
        self,
        base: CompiledGuard,
        rendered: list[es.RenderedGuard],
        f_globals: dict,
        symbols: list[dict[str, Any]] | None = None,
    ):
        self.base = base
        self.rendered = rendered
        self.symbols = list(symbols or ())  # the size symbols (for reports): TraceShapes.symbols
        # torch: a NumPy array's sizes are read off `torch.from_numpy(L['a'])` (its graph input)
        self._scope = {"G": f_globals, "math": math, "torch": torch}
        shape_body = " and ".join(f"({g.code})" for g in rendered)
        base_check = base.check
        self._shapes = eval(f"lambda L: {shape_body}", self._scope)
        self.check = eval(
            f"lambda L: base_check(L) and ({shape_body})", {**self._scope, "base_check": base_check}
        )
        codes = "\n".join(f"#   {g.code}    # {g.expr}  ({g.where})" for g in rendered)
        self.source_code = f"{base.source_code}\n# shape guards (ember_symbolic):\n{codes}\n"

    @property
    def guards(self):
        return self.base.guards

    def __call__(self, f_locals: dict[str, Any]) -> bool:
        return self.check(f_locals)

    def native_for(self, owner: Any = None) -> Any:
        """The base's native guard with the shape conditions run last (guards/native.py)."""
        return self.base.native_for(owner, extra=self._shapes)

    def failure_reason(self, f_locals: dict[str, Any]) -> str | None:
        reason = self.base.failure_reason(f_locals)
        if reason is not None:
            return reason
        for g in self.rendered:  # evaluated with the frame's globals bound (global ints)
            try:
                ok = eval(f"lambda L: {g.code}", self._scope)(f_locals)
            except Exception as exc:
                return f"{g.code} raised {type(exc).__name__}: {exc} (guard {g.expr})"
            if not ok:
                where = f", added at {g.where}" if g.where else ""
                lead = _pinned_tensor_lead(g, f_locals, self._scope["G"])
                return f"{lead}shape guard failed: {g.code}  (that is, {g.expr}{where})"
        return None


def _pinned_tensor_lead(g: es.RenderedGuard, f_locals: dict, f_globals: dict) -> str:
    """ "tensor 'x' size mismatch at index 0. expected 10, actual 9; " when the failed guard
    pins a tensor's size (or stride) to an int, as a static tensor check would say it."""
    pinned = g.pinned
    if pinned is None or not isinstance(pinned[0], es.TensorPropertySource):
        return ""
    prop, (expected, base) = pinned[0], (pinned[1], pinned[0].base)
    try:
        actual = getattr(base.get(f_locals, f_globals), prop.prop)()[prop.dim]
    except Exception:  # the tensor's base check owns unreadable sources
        return ""
    what = f"{prop.prop} mismatch at index {prop.dim}. expected {expected}, actual {actual}"
    return f"{tensor_mismatch(base, what)}; "


def _int_source(source: Source) -> bool:
    """Where an int may become automatically dynamic: a local, a global, or the cell of a
    closure a function of the trace reads (`fn.__closure__[i].cell_contents`: a function
    made per call around a changing int)."""
    if isinstance(source, LocalSource | GlobalSource):
        return True
    return (
        isinstance(source, AttrSource)
        and source.attr == "cell_contents"
        and isinstance(source.base, ItemSource)
        and isinstance(source.base.base, AttrSource)
        and source.base.base.attr == "__closure__"
    )
