"""Per-kind code emission: each GuardKind becomes one Python boolean expression.

Emitters get the expression of the guarded value (a bound local or an inline access) from
an `EmitContext` and name closure constants through it, so the generated function never
looks anything up by name at run time except the frame's own locals and globals. The
forms were chosen by measurement on CPython 3.11 (see tests/guards/bench_guards.py):
chained `and`s beat building and comparing one tuple, `t.shape` beats `t.size()`,
`t.is_cpu` beats `t.device == cpu`, `t.is_contiguous()` beats `t.stride() == ...` where
it is exact, and `[*d] == keys` beats `tuple(d) == keys`.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable
from typing import Any, Protocol

import torch

from ember_bytecode_tracer.guards.constants import needs_slow_equal, strict_equal
from ember_bytecode_tracer.guards.guard import Guard, GuardKind
from ember_bytecode_tracer.guards.sources import Source
from ember_bytecode_tracer.guards.tensor_spec import DYNAMIC_MIN_SIZE, TensorSpec

# Cost classes, cheapest first: the compiled guard runs checks in this order.
CHEAP, MEDIUM, COSTLY, TENSOR = 0, 1, 2, 3

# Identity-compared singletons: an `is` test is exact and the cheapest check there is.
_SINGLETON_TYPES = (
    bool,
    type(None),
    type(Ellipsis),
    torch.dtype,
    torch.layout,
    torch.memory_format,
)
_LITERAL_TYPES = (int, str, bytes)
_PAIRWISE_MAX = 6  # past this many sources, one set of ids beats pairwise `is not`


class EmitContext(Protocol):
    def value(self, source: Source) -> str:
        """The expression for a source's value (a bound local, or its access inline)."""
        ...

    def const(self, obj: Any, hint: str) -> str:
        """The name of a closure constant holding `obj`."""
        ...

    def local(self, hint: str) -> str:
        """A fresh local variable name (for `:=` inside an expression)."""
        ...

    def module_absent(self, source: Source) -> bool:
        """Whether ABSENT on `source` reads the module's dicts (module_paths)."""
        ...


Emitter = Callable[[Guard, EmitContext], str]
EMITTERS: dict[GuardKind, Emitter] = {}


def emitter(kind: GuardKind) -> Callable[[Emitter], Emitter]:
    def register(fn: Emitter) -> Emitter:
        EMITTERS[kind] = fn
        return fn

    return register


def emit(guard: Guard, ctx: EmitContext) -> str:
    """The expression that is true when `guard` holds."""
    return EMITTERS[guard.kind](guard, ctx)


def cost(guard: Guard) -> int:
    kind = guard.kind
    if kind is GuardKind.TENSOR_MATCH:
        return TENSOR
    if kind is GuardKind.DICT_KEYS:
        return COSTLY
    if kind is GuardKind.EQUALS_MATCH:
        if needs_slow_equal(guard.expected):
            return COSTLY
        return MEDIUM if type(guard.expected) is tuple else CHEAP
    if kind in (GuardKind.LEN_MATCH, GuardKind.NO_TENSOR_ALIASING):
        return MEDIUM
    if kind is GuardKind.SET_ORDER:
        return COSTLY
    return CHEAP


def reads(guard: Guard) -> tuple[Source, ...]:
    """The sources whose values the emitted expression refers to (ABSENT reads the base)."""
    if guard.kind is GuardKind.ABSENT:
        base = guard.source.base
        return () if base is None else (base,)
    return guard.sources()


def uses_value_once(guard: Guard) -> bool:
    """Whether the emitted expression mentions its own value once (no local needed)."""
    kind = guard.kind
    if kind is GuardKind.EQUALS_MATCH:
        return type(guard.expected) in _SINGLETON_TYPES
    return kind in (
        GuardKind.TYPE_MATCH,
        GuardKind.ID_MATCH,
        GuardKind.NONE_MATCH,
        GuardKind.NOT_NONE,
        GuardKind.MODULE_TRAINING,
        GuardKind.TENSOR_ALIASING,
        GuardKind.ABSENT,
    )


def literal(obj: Any) -> str | None:
    """Source text that evaluates to an equal object of the same type, where one exists."""
    kind = type(obj)
    if kind in _LITERAL_TYPES or kind in (bool, type(None)):
        return repr(obj)
    if kind is float and math.isfinite(obj) and obj != 0.0:
        return repr(obj)
    if kind is tuple:
        items = [literal(item) for item in obj]
        if all(item is not None for item in items):
            return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"  # type: ignore[arg-type]
    return None


def _type_ref(ctx: EmitContext, cls: type) -> str:
    return ctx.const(cls, f"T_{cls.__name__}")


@emitter(GuardKind.TYPE_MATCH)
def _type_match(guard: Guard, ctx: EmitContext) -> str:
    ref = guard.weak_ref()  # a class that may die: read through its weak reference
    cls = _type_ref(ctx, guard.expected) if ref is None else f"{ctx.const(ref, 'W_type')}()"
    return f"type({ctx.value(guard.source)}) is {cls}"


@emitter(GuardKind.ID_MATCH)
def _id_match(guard: Guard, ctx: EmitContext) -> str:
    obj = guard.expected
    # only read names that are plain data: a user __getattr__ must not run here
    named = isinstance(
        obj, type | types.FunctionType | types.BuiltinFunctionType | types.ModuleType
    )
    hint = obj.__name__ if named and isinstance(obj.__name__, str) else type(obj).__name__
    ref = guard.weak_ref()  # an object that may die: read through its weak reference
    expected = ctx.const(obj, f"O_{hint}") if ref is None else f"{ctx.const(ref, f'W_{hint}')}()"
    return f"{ctx.value(guard.source)} is {expected}"


@emitter(GuardKind.NONE_MATCH)
def _none_match(guard: Guard, ctx: EmitContext) -> str:
    return f"{ctx.value(guard.source)} is None"


@emitter(GuardKind.NOT_NONE)
def _not_none(guard: Guard, ctx: EmitContext) -> str:
    return f"{ctx.value(guard.source)} is not None"


@emitter(GuardKind.EQUALS_MATCH)
def _equals_match(guard: Guard, ctx: EmitContext) -> str:
    value, expected = ctx.value(guard.source), guard.expected
    kind = type(expected)
    if kind in _SINGLETON_TYPES:
        text = literal(expected) or ctx.const(expected, f"C_{kind.__name__}")
        return f"{value} is {text}"
    if needs_slow_equal(expected):
        equal = ctx.const(strict_equal, "strict_equal")
        return f"{equal}({value}, {ctx.const(expected, 'C')})"
    text = literal(tuple(expected) if kind is torch.Size else expected)
    text = text or ctx.const(expected, f"C_{kind.__name__}")
    check = f"type({value}) is {_type_ref(ctx, kind)} and {value} == {text}"
    if kind is tuple:  # (1, 2) == (True, 2): the items' types must match too
        item_types = ctx.const(tuple(type(item) for item in expected), "item_types")
        check += f" and tuple(map(type, {value})) == {item_types}"
    return check


@emitter(GuardKind.TENSOR_MATCH)
def _tensor_match(guard: Guard, ctx: EmitContext) -> str:
    spec: TensorSpec = guard.expected
    t = ctx.value(guard.source)
    # Most likely to differ first (a new batch size), all after the exact-class test that
    # makes every attribute read below safe.
    checks = [f"type({t}) is {_type_ref(ctx, spec.tensor_type)}"]
    checks += _dims_checks(f"{t}.shape", spec.sizes, ctx, dynamic_min=DYNAMIC_MIN_SIZE)
    checks.append(f"{t}.dtype is {ctx.const(spec.dtype, 'D_' + str(spec.dtype)[6:])}")
    checks.append(_device_check(t, spec.device, ctx))
    if spec.strides is None or all(s is None for s in spec.strides):
        # nothing calls .stride(), which is what rejects non-strided layouts otherwise
        checks.append(f"{t}.layout is {ctx.const(spec.layout, 'layout')}")
    checks.append(f"{t}.requires_grad" if spec.requires_grad else f"not {t}.requires_grad")
    if spec.dtype.is_complex:  # lazily conjugated/negated views read memory differently
        checks += [f"not {t}.is_conj()", f"not {t}.is_neg()"]
    if _contiguity_decides_strides(spec):
        checks.append(f"{t}.is_contiguous()")  # ~40 ns cheaper than comparing stride()
    elif spec.strides is not None and any(s is not None for s in spec.strides):
        checks += _dims_checks(f"{t}.stride()", spec.strides, ctx, dynamic_min=None)
    return " and ".join(checks)


def _contiguity_decides_strides(spec: TensorSpec) -> bool:
    """Whether, once the sizes matched, `is_contiguous()` is exactly `stride() == strides`.

    Contiguity ignores the strides of size-0/1 dims, so it is exact only when every dim
    is >= 2; and only torch's own classes, whose `is_contiguous` no __torch_function__
    can override.
    """
    if spec.tensor_type not in (torch.Tensor, torch.nn.Parameter) or spec.strides is None:
        return False
    if None in spec.sizes or any(size < 2 for size in spec.sizes):  # type: ignore[operator]
        return False
    expected, step = [], 1
    for size in reversed(spec.sizes):
        expected.append(step)
        step *= size  # type: ignore[operator]
    return spec.strides == tuple(reversed(expected))


def _dims_checks(
    read: str, dims: tuple[int | None, ...], ctx: EmitContext, dynamic_min: int | None
) -> list[str]:
    if None not in dims:
        return [f"{read} == {literal(tuple(dims))}"]  # torch.Size == tuple
    name = ctx.local("dims")
    checks = [f"len({name} := {read}) == {len(dims)}"]
    for i, d in enumerate(dims):
        if d is not None:
            checks.append(f"{name}[{i}] == {d}")
        elif dynamic_min is not None:
            checks.append(f"{name}[{i}] >= {dynamic_min}")
    return checks


def _device_check(t: str, device: torch.device, ctx: EmitContext) -> str:
    if device.type == "cpu":
        return f"{t}.is_cpu"
    if device.type == "meta":
        return f"{t}.is_meta"
    return f"{t}.device == {ctx.const(device, 'dev_' + device.type)}"


@emitter(GuardKind.LEN_MATCH)
def _len_match(guard: Guard, ctx: EmitContext) -> str:
    kind, length = guard.expected
    v = ctx.value(guard.source)
    return f"type({v}) is {_type_ref(ctx, kind)} and len({v}) == {length}"


@emitter(GuardKind.DICT_KEYS)
def _dict_keys(guard: Guard, ctx: EmitContext) -> str:
    kind, keys = guard.expected
    v = ctx.value(guard.source)
    check = f"type({v}) is {_type_ref(ctx, kind)} and [*{v}] == {ctx.const(list(keys), 'keys')}"
    if any(type(k) is not str for k in keys):  # {1: ...} and {True: ...} have equal keys
        key_types = ctx.const(tuple(type(k) for k in keys), "key_types")
        check += f" and tuple(map(type, {v})) == {key_types}"
    return check


@emitter(GuardKind.MODULE_TRAINING)
def _module_training(guard: Guard, ctx: EmitContext) -> str:
    return f"{ctx.value(guard.source)}.training is {guard.expected!r}"


@emitter(GuardKind.TENSOR_ALIASING)
def _tensor_aliasing(guard: Guard, ctx: EmitContext) -> str:
    return f"{ctx.value(guard.source)} is {ctx.value(guard.expected)}"


@emitter(GuardKind.NO_TENSOR_ALIASING)
def _no_tensor_aliasing(guard: Guard, ctx: EmitContext) -> str:
    values = [ctx.value(s) for s in guard.sources()]
    if len(values) > _PAIRWISE_MAX:
        return f"len({{{', '.join(f'id({v})' for v in values)}}}) == {len(values)}"
    pairs = [(a, b) for i, a in enumerate(values) for b in values[i + 1 :]]
    return " and ".join(f"{a} is not {b}" for a, b in pairs)


@emitter(GuardKind.SET_ORDER)
def _set_order(guard: Guard, ctx: EmitContext) -> str:
    added, order = guard.expected
    values = [ctx.value(s) for s in added]
    built = "{" + ", ".join(values) + ("," if len(values) == 1 else "") + "}"
    expected = ", ".join(f"id({values[i]})" for i in order)
    return f"tuple(map(id, {built})) == ({expected}{',' if len(order) == 1 else ''})"


@emitter(GuardKind.ABSENT)
def _absent(guard: Guard, ctx: EmitContext) -> str:
    base = guard.source.base
    if ctx.module_absent(guard.source):  # an nn.Module attribute: its four dicts
        name, module = guard.source.attr, ctx.value(base)  # type: ignore[attr-defined, arg-type]
        return " and ".join(f"{name!r} not in {module}.{d}" for d in MODULE_STORAGE)
    return guard.source.absent(ctx.value(base) if base is not None else "")


MODULE_STORAGE = ("__dict__", "_parameters", "_buffers", "_modules")  # where hasattr looks
