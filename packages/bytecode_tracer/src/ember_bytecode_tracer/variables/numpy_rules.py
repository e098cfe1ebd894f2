"""The NumPy calls a trace runs as torch ops, with NumPy's semantics (numpy_arrays.py).

`RULES` maps a NumPy function (a ufunc, `np.sum`, `np.zeros`, a dtype such as `np.float32`)
to a rule `(tx, *args, **kwargs) -> tracker`; `METHODS` maps ndarray method names to the
same rules (the array first). Result dtypes are NumPy's own, computed at trace time from
dtypes alone: `ufunc.resolve_dtypes` for ufuncs and operators (Python scalars weak, as
NEP 50 says), the reduction itself on a one-element array of the input's dtype, and
`np.result_type` for the rest; operands are cast to that dtype before the torch op, so
`int_array / 2` computes in float64 as NumPy does. A call whose arguments are all constants
runs in NumPy at trace time when it returns a scalar (`np.prod((2, 3))`); any other NumPy
function on an array is a graph break naming it.
"""

from __future__ import annotations

import inspect
import operator
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import AttrSource, Guard, GuardKind, MethodCallSource
from ember_bytecode_tracer.variables.base import CallableVariable, VariableTracker
from ember_bytecode_tracer.variables.builder import in_rule_table, wrap_rule
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.lists import TupleVariable
from ember_bytecode_tracer.variables.numpy_arrays import (
    ARRAY_RULES,
    NumpyArrayVariable,
    array_of_tensor,
    is_tensor,
    numpy_dtype,
    tensor_from_array,
    torch_dtype,
    wrap_array,
)
from ember_bytecode_tracer.variables.sym_values import SymNodeVariable, decide_bool, has_symbolic
from ember_bytecode_tracer.variables.tensor import (
    METHOD_RULES,
    TensorVariable,
    as_node_arg,
    wrap_constant_result,
)

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator

Rule = Callable[..., VariableTracker]
RULES: dict[Any, Rule] = {}
METHODS: dict[str, Rule] = {}


def rule(*functions: Any, methods: tuple[str, ...] = ()) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for f in functions:
            RULES[f] = fn
        for name in methods:
            METHODS[name] = fn
        return fn

    return register


# ---- building blocks ---------------------------------------------------------------
def _node(tx, op: str, target: Any, args: tuple, kwargs: dict | None = None):
    return tx.output.create_node(op, target, args, kwargs or {})


def _array(tx, target: Any, args: tuple, kwargs: dict | None = None, *, scalar: bool = True):
    """A graph node whose result is an array; a NumPy scalar when 0-d and `scalar`."""
    node, example = _node(tx, "call_function", target, args, kwargs)
    return NumpyArrayVariable(node, example, scalar=scalar)


def _const(value: Any, what: str) -> Any:
    """A NumPy argument the trace needs as a value (an axis, a shape, a dtype). A symbolic
    int there is specialized (its value guarded), as under torch.compile: a recompile for
    another value rather than a break."""
    if isinstance(value, VariableTracker):
        if not value.is_python_constant() and not has_symbolic(value):
            raise Unsupported(f"NumPy: {what} must be known at trace time")
        return value.as_python_constant()
    return value


def _dtype_arg(value: Any) -> np.dtype | None:
    value = _const(value, "dtype")
    return None if value is None else np.dtype(value)


def _is_scalar_constant(value: Any) -> bool:
    return type(value) in (bool, int, float, complex) or isinstance(value, np.generic)


def _operand(tx, value: VariableTracker) -> NumpyArrayVariable | Any:
    """An array tracker, a symbolic Python number (it stays one: a weak scalar of the graph,
    never specialized), or a constant (Python number, NumPy scalar or constant array)."""
    if isinstance(value, NumpyArrayVariable | SymNodeVariable):
        return value
    constant = _const(value, "a NumPy operand")
    if _is_scalar_constant(constant):
        return constant
    return constant_array(tx, np.asarray(constant))


def _weak(value: Any) -> Any:
    """What NumPy's type resolution sees: a dtype, or the Python type of a weak scalar."""
    if isinstance(value, NumpyArrayVariable):
        return value.dtype
    if isinstance(value, SymNodeVariable):
        return _weak(value.python_type()(0))
    if isinstance(value, np.generic):
        return value.dtype
    if type(value) is bool:
        return np.dtype(bool)
    return type(value)


def _check_int_fits(value: Any, dtype: np.dtype) -> None:
    """A Python int (weak, NEP 50) taken as an integer dtype must fit it: NumPy raises
    OverflowError (`int8_array + 300`), or compares or clips exactly (`int8_array < 300`),
    where a torch cast would wrap in the graph. Out of range, a break: NumPy decides in
    eager. A symbolic int is guarded in range (another value retraces and breaks)."""
    symbolic = isinstance(value, SymNodeVariable) and value.python_type() is int
    if dtype.kind not in "iu" or not (symbolic or type(value) is int):
        return
    info = np.iinfo(dtype)
    number = value.value if symbolic else value
    if not (decide_bool(info.min <= number) and decide_bool(number <= info.max)):
        raise Unsupported(f"NumPy: Python integer {number} out of bounds for {dtype}")


def _cast(tx, value: NumpyArrayVariable | Any, dtype: np.dtype):
    """The FX argument for an operand, as a tensor of `dtype`."""
    _check_int_fits(value, dtype)
    target = torch_dtype(dtype)
    if isinstance(value, NumpyArrayVariable):
        if value.example.dtype == target:
            return value.node
        return _node(tx, "call_method", "to", (value.node, target))[0]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, SymNodeVariable):
        value = as_node_arg(tx, value)
    return _node(tx, "call_function", torch.scalar_tensor, (value,), {"dtype": target})[0]


def _to(tx, result: NumpyArrayVariable, dtype: np.dtype) -> NumpyArrayVariable:
    if result.dtype == dtype:
        return result
    node, example = _node(tx, "call_method", "to", (result.node, torch_dtype(dtype)))
    return NumpyArrayVariable(node, example, scalar=result.scalar)


def constant_array(tx, value: np.ndarray) -> NumpyArrayVariable:
    """An array known at trace time, made in the graph (a fresh one per call)."""
    if value.dtype.kind not in "biufc":
        raise Unsupported(f"a NumPy array of dtype {value.dtype}")
    return _array(
        tx, torch.tensor, (value.tolist(),), {"dtype": torch_dtype(value.dtype)}, scalar=False
    )


def _as_array(tx, value: VariableTracker) -> NumpyArrayVariable:
    found = _operand(tx, value)
    if isinstance(found, NumpyArrayVariable):
        return found
    if isinstance(found, SymNodeVariable):  # an array of it: its value guarded
        found = found.as_python_constant()
    return constant_array(tx, np.asarray(found))


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    axis = _const(axis, "axis")
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, tuple) else (axis,)
    for a in axes:
        if not -ndim <= a < max(ndim, 1):
            raise Unsupported(f"NumPy: axis {a} is out of bounds for {ndim} dimensions")
    return tuple(a + ndim if a < 0 else a for a in axes)


# ---- ufuncs and operators ------------------------------------------------------------
UFUNCS: dict[np.ufunc, Any] = {
    np.sin: torch.sin, np.cos: torch.cos, np.tan: torch.tan, np.arcsin: torch.asin,
    np.arccos: torch.acos, np.arctan: torch.atan, np.sinh: torch.sinh, np.cosh: torch.cosh,
    np.tanh: torch.tanh, np.exp: torch.exp, np.exp2: torch.exp2, np.expm1: torch.expm1,
    np.log: torch.log, np.log2: torch.log2, np.log10: torch.log10, np.log1p: torch.log1p,
    np.sqrt: torch.sqrt, np.absolute: torch.abs, np.fabs: torch.abs,
    np.negative: torch.neg, np.positive: torch.clone, np.floor: torch.floor,
    np.ceil: torch.ceil, np.trunc: torch.trunc, np.rint: torch.round, np.sign: torch.sign,
    np.square: torch.square, np.reciprocal: torch.reciprocal,
    np.logical_not: torch.logical_not, np.invert: torch.bitwise_not, np.isnan: torch.isnan,
    np.isinf: torch.isinf, np.isfinite: torch.isfinite,
    np.add: torch.add, np.subtract: torch.sub, np.multiply: torch.mul,
    np.divide: torch.div, np.floor_divide: torch.floor_divide,
    np.remainder: torch.remainder, np.power: torch.pow, np.maximum: torch.maximum,
    np.minimum: torch.minimum, np.fmax: torch.fmax, np.fmin: torch.fmin,
    np.arctan2: torch.atan2, np.hypot: torch.hypot, np.less: torch.lt,
    np.less_equal: torch.le, np.equal: torch.eq, np.not_equal: torch.ne,
    np.greater: torch.gt, np.greater_equal: torch.ge, np.logical_and: torch.logical_and,
    np.logical_or: torch.logical_or, np.logical_xor: torch.logical_xor,
    np.bitwise_and: torch.bitwise_and, np.bitwise_or: torch.bitwise_or,
    np.bitwise_xor: torch.bitwise_xor,
    np.signbit: torch.signbit, np.copysign: torch.copysign, np.fmod: torch.fmod,
    np.arcsinh: torch.asinh, np.arccosh: torch.acosh, np.arctanh: torch.atanh,
    np.deg2rad: torch.deg2rad, np.rad2deg: torch.rad2deg, np.radians: torch.deg2rad,
    np.degrees: torch.rad2deg, np.logaddexp: torch.logaddexp, np.logaddexp2: torch.logaddexp2,
    np.heaviside: torch.heaviside, np.float_power: torch.float_power,
}  # fmt: skip


def apply_ufunc(tx, ufunc: np.ufunc, args: list[VariableTracker], kwargs=None) -> VariableTracker:
    if kwargs:
        raise Unsupported(f"numpy.{ufunc.__name__} with keyword arguments {sorted(kwargs)}")
    if len(args) != ufunc.nin:
        raise Unsupported(f"numpy.{ufunc.__name__} takes {ufunc.nin} operands")
    operands = [_operand(tx, a) for a in args]
    if not any(isinstance(o, NumpyArrayVariable) for o in operands):
        operands = [_const(o, "a NumPy operand") for o in operands]  # symbolic: specialized
        with np.errstate(all="ignore"):  # constants: NumPy itself, at trace time
            return ConstantVariable(ufunc(*operands))
    try:
        *loop, out = ufunc.resolve_dtypes((*(_weak(o) for o in operands), None))
    except (TypeError, np._core._exceptions._UFuncNoLoopError) as exc:
        raise Unsupported(f"numpy.{ufunc.__name__}: {exc}") from exc
    fx_args = tuple(_cast(tx, o, d) for o, d in zip(operands, loop, strict=True))
    return _to(tx, _array(tx, UFUNCS[ufunc], fx_args), out)


for _ufunc in UFUNCS:
    RULES[_ufunc] = lambda tx, *args, _u=_ufunc, **kw: apply_ufunc(tx, _u, list(args), kw)


def write_into(tx, target: NumpyArrayVariable, result: VariableTracker, *, what: str):
    """`a op= b`: NumPy computes in place, casting back under the same_kind rule."""
    if not isinstance(result, NumpyArrayVariable):
        raise Unsupported(f"{what} on a NumPy array with a constant result")
    if not np.can_cast(result.dtype, target.dtype, casting="same_kind"):
        raise Unsupported(f"{what}: NumPy cannot cast {result.dtype} to {target.dtype} in place")
    if tuple(np.broadcast_shapes(result.shape, target.shape)) != target.shape:
        raise Unsupported(f"{what}: the result does not fit the array's shape")
    _node(tx, "call_method", "copy_", (target.node, result.node))
    return target


# ---- reductions -------------------------------------------------------------------------
def _probe(fn: Any, a: NumpyArrayVariable, **kwargs: Any) -> np.dtype:
    """The dtype NumPy's reduction gives for this dtype and these arguments."""
    sample = np.ones((1,) * a.ndim, dtype=a.dtype)
    with warnings.catch_warnings(), np.errstate(all="ignore"):  # ddof=1 on one element
        warnings.simplefilter("ignore")
        return np.asarray(fn(sample, **{k: v for k, v in kwargs.items() if v is not None})).dtype


def _reduce(tx, kind: str, fn: Any, a, axis=None, dtype=None, out=None, keepdims=False, **kw):
    if out is not None and not (isinstance(out, VariableTracker) and _const(out, "out") is None):
        raise Unsupported(f"numpy.{kind} with out=")
    a = _as_array(tx, a)
    axis_value = _const(axis, "axis")
    keepdims = bool(_const(keepdims, "keepdims"))
    dtype = _dtype_arg(dtype)
    extra = {k: _const(v, k) for k, v in kw.items()}
    probe_kwargs = {"axis": axis_value, "keepdims": keepdims or None, **extra}
    if dtype is not None:
        probe_kwargs["dtype"] = dtype
    result_dtype = _probe(fn, a, **probe_kwargs)
    dims = _axes(axis_value, a.ndim)
    return REDUCERS[kind](tx, a, dims, axis_value, keepdims, result_dtype, extra)


def _sum_like(torch_fn):
    def run(tx, a, dims, axis, keepdims, out, extra):
        x = _cast(tx, a, out)
        if not dims:
            return _array(tx, torch.clone, (x,))
        return _array(tx, torch_fn, (x,), {"dim": dims, "keepdim": keepdims})

    return run


def _prod(tx, a, dims, axis, keepdims, out, extra):
    result = _cast(tx, a, out)
    for d in sorted(dims, reverse=True):  # torch.prod takes one dim at a time
        result = _node(tx, "call_function", torch.prod, (result, d), {"keepdim": keepdims})[0]
    return NumpyArrayVariable(result, result.meta["example_value"], scalar=True)


def _arg_reduce(torch_fn):
    def run(tx, a, dims, axis, keepdims, out, extra):
        if axis is None:
            result = _array(tx, torch_fn, (a.node,))
            if keepdims:
                shape = (1,) * a.ndim
                return _array(tx, torch.reshape, (result.node, shape), scalar=False)
            return result
        return _array(tx, torch_fn, (a.node,), {"dim": dims[0], "keepdim": keepdims})

    return run


def _bool_reduce(torch_fn):
    def run(tx, a, dims, axis, keepdims, out, extra):
        x = _cast(tx, a, np.dtype(bool))
        return _array(tx, torch_fn, (x,), {"dim": dims, "keepdim": keepdims})

    return run


def _moment(torch_fn):
    def run(tx, a, dims, axis, keepdims, out, extra):
        x = _cast(tx, a, out)
        correction = extra.get("ddof", 0)
        return _array(
            tx, torch_fn, (x,), {"dim": dims, "keepdim": keepdims, "correction": correction}
        )

    return run


REDUCERS = {
    "sum": _sum_like(torch.sum), "mean": _sum_like(torch.mean), "prod": _prod,
    "max": _sum_like(torch.amax), "min": _sum_like(torch.amin),
    "argmax": _arg_reduce(torch.argmax), "argmin": _arg_reduce(torch.argmin),
    "all": _bool_reduce(torch.all), "any": _bool_reduce(torch.any),
    "std": _moment(torch.std), "var": _moment(torch.var),
}  # fmt: skip


def _reduction(kind: str, fn: Any, *aliases: Any) -> None:
    def run(tx, a, axis=None, dtype=None, out=None, keepdims=False, **kw):
        return _reduce(tx, kind, fn, a, axis, dtype, out, keepdims, **kw)

    def run_arg(tx, a, axis=None, out=None, *, keepdims=False):  # argmax has no dtype
        return _reduce(tx, kind, fn, a, axis, None, out, keepdims)

    chosen = run_arg if kind in ("argmax", "argmin") else run
    rule(fn, *aliases, methods=(kind,))(chosen)


for _kind, _fns in {
    "sum": (np.sum,), "mean": (np.mean,), "prod": (np.prod,), "max": (np.max, np.amax),
    "min": (np.min, np.amin), "argmax": (np.argmax,), "argmin": (np.argmin,),
    "all": (np.all,), "any": (np.any,), "std": (np.std,), "var": (np.var,),
}.items():  # fmt: skip
    _reduction(_kind, *_fns)


def _make_cumulative(np_fn: Any, torch_fn: Any) -> Rule:
    def run(tx, a, axis=None, dtype=None, out=None):
        if out is not None and _const(out, "out") is not None:
            raise Unsupported(f"numpy.{np_fn.__name__} with out=")
        a = _as_array(tx, a)
        axis_value = _const(axis, "axis")
        dtype = _dtype_arg(dtype)
        result_dtype = np_fn(
            np.ones((1,) * max(a.ndim, 1), a.dtype), axis=axis_value, dtype=dtype
        ).dtype
        x = _cast(tx, a, result_dtype)
        if axis_value is None:
            x = _node(tx, "call_function", torch.reshape, (x, (-1,)))[0]
            axis_value = 0
        return _array(tx, torch_fn, (x, axis_value), scalar=False)

    return run


RULES[np.cumsum] = METHODS["cumsum"] = _make_cumulative(np.cumsum, torch.cumsum)
RULES[np.cumprod] = METHODS["cumprod"] = _make_cumulative(np.cumprod, torch.cumprod)


# ---- shapes and copies -------------------------------------------------------------------
def _shape_arg(args: tuple) -> tuple[int, ...]:
    values = [_const(a, "a shape") for a in args]
    if len(values) == 1 and isinstance(values[0], tuple | list):
        return tuple(values[0])
    return tuple(values)


@rule(np.reshape)
def _reshape(tx, a, shape=None, order="C", *, newshape=None):
    if _const(order, "order") != "C":
        raise Unsupported("numpy.reshape with order other than 'C'")
    shape = _shape_arg((shape if shape is not None else newshape,))
    return _array(tx, torch.reshape, (_as_array(tx, a).node, shape), scalar=False)


def _reshape_method(tx, a, *shape, order="C"):
    return _reshape(tx, a, _shape_arg(shape), order)


METHODS["reshape"] = _reshape_method


@rule(np.transpose)
def _transpose(tx, a, axes=None):
    a = _as_array(tx, a)
    axes = _const(axes, "axes")
    order = tuple(reversed(range(a.ndim))) if axes is None else tuple(axes)
    return _array(tx, torch.permute, (a.node, order), scalar=False)


def _transpose_method(tx, a, *axes):
    return _transpose(tx, a, _shape_arg(axes) if axes else None)


METHODS["transpose"] = _transpose_method


@rule(np.squeeze, methods=("squeeze",))
def _squeeze(tx, a, axis=None):
    a = _as_array(tx, a)
    dims = tuple(d for d, s in enumerate(a.shape) if s == 1)
    if _const(axis, "axis") is not None:
        dims = _axes(axis, a.ndim)
    return _array(tx, torch.squeeze, (a.node, dims), scalar=False)


@rule(np.expand_dims)
def _expand_dims(tx, a, axis):
    a = _as_array(tx, a)
    return _array(tx, torch.unsqueeze, (a.node, _const(axis, "axis")), scalar=False)


@rule(np.ravel, methods=("ravel",))
def _ravel(tx, a, order="C"):
    if _const(order, "order") != "C":
        raise Unsupported("numpy.ravel with order other than 'C'")
    return _array(tx, torch.reshape, (_as_array(tx, a).node, (-1,)), scalar=False)


def _flatten(tx, a, order="C"):
    flat = _ravel(tx, a, order)  # flatten always copies
    return _array(tx, torch.clone, (flat.node,), scalar=False)


METHODS["flatten"] = _flatten


@rule(np.copy, methods=("copy",))
def _copy(tx, a, order="K"):
    return _array(tx, torch.clone, (_as_array(tx, a).node,), scalar=False)


def _astype(tx, a, dtype, order="K", casting="unsafe", subok=True, copy=True):
    dtype = _dtype_arg(dtype)
    result = _to(tx, a, dtype)
    if result is a and _const(copy, "copy"):
        return _copy(tx, a)
    return NumpyArrayVariable(result.node, result.example, scalar=False)


METHODS["astype"] = _astype


@rule(np.nan_to_num)
def _nan_to_num(tx, x, copy=True, nan=0.0, posinf=None, neginf=None):
    a = _as_array(tx, x)
    if not _const(copy, "copy"):
        raise Unsupported("numpy.nan_to_num(copy=False) writes into its argument")
    if a.dtype.kind in "biu":  # nothing to replace: NumPy gives a copy
        return _array(tx, torch.clone, (a.node,))
    if a.dtype.kind not in "fc":  # complex: each part on its own, in NumPy as in torch
        raise Unsupported(f"numpy.nan_to_num of a {a.dtype} array")
    # None: the dtype's largest / smallest finite value, in NumPy as in torch
    limits = {"nan": _const(nan, "nan"), "posinf": _const(posinf, "posinf")}
    limits["neginf"] = _const(neginf, "neginf")
    return _array(tx, torch.nan_to_num, (a.node,), limits)


@rule(np.take_along_axis)
def _take_along_axis(tx, arr, indices, axis=-1):
    a, index = _as_array(tx, arr), _as_array(tx, indices)
    axis = _const(axis, "axis")
    if axis is None and index.ndim == 1:  # NumPy: along the flattened array
        a, axis = _ravel(tx, a), 0
    if type(axis) is not int or index.dtype.kind not in "iu" or a.ndim != index.ndim:
        raise Unsupported("numpy.take_along_axis other than along one axis of integer indices")
    dim = _axes(axis, a.ndim)[0]
    index = _cast(tx, index, np.dtype(np.int64))
    # NumPy's fancy indexing counts negative indices from the end; gather does not
    negative = _node(tx, "call_function", operator.lt, (index, 0))[0]
    shifted = _node(tx, "call_function", operator.add, (index, a.shape[dim]))[0]
    index = _node(tx, "call_function", torch.where, (negative, shifted, index))[0]
    return _array(tx, torch.take_along_dim, (a.node, index), {"dim": dim}, scalar=False)


def _sort_axis(tx, a, axis, kind, order, what: str) -> tuple[NumpyArrayVariable, int]:
    if _const(order, "order") is not None or a.dtype.kind not in "biuf":
        raise Unsupported(f"numpy.{what} with order= or of a {a.dtype} array")
    axis = _const(axis, "axis")
    if axis is None:  # the flattened array
        a = NumpyArrayVariable(*_node(tx, "call_method", "reshape", (a.node, -1)), scalar=False)
        axis = 0
    return a, _axes(axis, a.ndim)[0]


@rule(np.sort)
def _sort(tx, a, axis=-1, kind=None, order=None, *, stable=None):
    # the sorted values do not depend on how ties are ordered (NaN last in both)
    a, dim = _sort_axis(tx, _as_array(tx, a), axis, kind, order, "sort")
    node = _node(tx, "call_function", torch.sort, (a.node,), {"dim": dim, "stable": True})[0]
    return _array(tx, operator.getitem, (node, 0), scalar=False)


@rule(np.argsort)
def _argsort(tx, a, axis=-1, kind=None, order=None, *, stable=None):
    if _const(kind, "kind") not in ("stable", "mergesort") and _const(stable, "stable") is not True:
        # NumPy's default sort orders ties its own way (introsort, SIMD kernels)
        raise Unsupported("numpy.argsort without kind='stable': the order of ties is NumPy's")
    a, dim = _sort_axis(tx, _as_array(tx, a), axis, kind, order, "argsort")
    return _array(tx, torch.argsort, (a.node,), {"dim": dim, "stable": True}, scalar=False)


# ---- combining arrays ---------------------------------------------------------------------
def _sequence(tx, arrays: VariableTracker) -> list[NumpyArrayVariable]:
    return [_as_array(tx, item) for item in arrays.unpack(tx)]


def _promote(items: list[Any]) -> np.dtype:
    # Python numbers stay values: np.result_type treats them as weak (NEP 50), their types not.
    return np.result_type(*(_promoted(i) for i in items))


def _promoted(item: Any) -> Any:
    if isinstance(item, NumpyArrayVariable):
        return item.dtype
    if isinstance(item, SymNodeVariable):  # a weak Python number of its type
        return item.python_type()(0)
    return item


@rule(np.concatenate)
def _concatenate(tx, arrays, axis=0, out=None, dtype=None):
    items = _sequence(tx, arrays)
    dtype = _dtype_arg(dtype) or _promote(items)
    nodes = [_cast(tx, i, dtype) for i in items]
    axis = _const(axis, "axis")
    if axis is None:
        nodes = [_node(tx, "call_function", torch.reshape, (n, (-1,)))[0] for n in nodes]
        axis = 0
    return _array(tx, torch.cat, (nodes,), {"dim": axis}, scalar=False)


@rule(np.stack)
def _stack(tx, arrays, axis=0, out=None, dtype=None):
    items = _sequence(tx, arrays)
    dtype = _dtype_arg(dtype) or _promote(items)
    nodes = [_cast(tx, i, dtype) for i in items]
    return _array(tx, torch.stack, (nodes,), {"dim": _const(axis, "axis")}, scalar=False)


@rule(np.where)
def _where(tx, condition, x=None, y=None):
    if x is None or y is None:
        raise Unsupported("numpy.where with one argument (a data-dependent size)")
    operands = [_operand(tx, v) for v in (x, y)]
    dtype = _promote(operands)
    cond = _cast(tx, _as_array(tx, condition), np.dtype(bool))
    fx = tuple(_cast(tx, o, dtype) for o in operands)
    return _array(tx, torch.where, (cond, *fx), scalar=False)


def _bound(tx, value: Any) -> Any:
    if value is None or (isinstance(value, ConstantVariable) and value.value is None):
        return None
    return _operand(tx, value)


@rule(np.clip, methods=("clip",))
def _clip(tx, a, a_min=None, a_max=None, out=None, *, min=None, max=None):
    a = _as_array(tx, a)
    bounds = [_bound(tx, a_min), _bound(tx, a_max)]
    bounds = [
        b if b is not None else _bound(tx, k) for b, k in zip(bounds, (min, max), strict=True)
    ]
    if all(b is None for b in bounds):
        raise Unsupported("numpy.clip without bounds")
    dtype = _promote([a, *(b for b in bounds if b is not None)])
    fx = [None if b is None else _cast(tx, b, dtype) for b in bounds]
    return _array(tx, torch.clamp, (_cast(tx, a, dtype), *fx), scalar=False)


def matmul(tx, a, b) -> VariableTracker:
    left, right = _as_array(tx, a), _as_array(tx, b)
    if left.ndim == 0 or right.ndim == 0:
        raise Unsupported("numpy.matmul with a 0-d operand (NumPy raises)")
    dtype = _promote([left, right])
    return _array(tx, torch.matmul, (_cast(tx, left, dtype), _cast(tx, right, dtype)))


RULES[np.matmul] = lambda tx, a, b: matmul(tx, a, b)


@rule(np.dot, methods=("dot",))
def _dot(tx, a, b, out=None):
    left, right = _as_array(tx, a), _as_array(tx, b)
    if left.ndim == 0 or right.ndim == 0:
        return apply_ufunc(tx, np.multiply, [left, right])
    if left.ndim > 2 or right.ndim > 2:
        raise Unsupported("numpy.dot of arrays with more than 2 dimensions")
    return matmul(tx, left, right)


@rule(np.einsum)
def _einsum(tx, subscripts, *operands, dtype=None, optimize=False):
    equation = _const(subscripts, "the einsum subscripts")
    if not isinstance(equation, str):
        raise Unsupported("numpy.einsum in its interleaved form")
    items = [_as_array(tx, o) for o in operands]
    dtype = _dtype_arg(dtype) or _promote(items)
    return _array(tx, torch.einsum, (equation, *(_cast(tx, i, dtype) for i in items)))


# ---- making arrays --------------------------------------------------------------------
def _new_shape(tx, shape: Any) -> tuple:
    """A shape argument (an int or a sequence of them): a symbolic size stays a graph value
    (`np.ones([2, n])` with n dynamic is one graph for every n), the rest constants."""
    items = getattr(shape, "items", None)
    parts = items if isinstance(items, list) else [shape]
    if any(isinstance(p, SymNodeVariable) and p.python_type() is int for p in parts):
        return tuple(as_node_arg(tx, p) for p in parts)
    shape = _const(shape, "shape")
    return (shape,) if isinstance(shape, int) else tuple(shape)


def _filled(torch_fn):
    def run(tx, shape, dtype=float, order="C", *, like=None, device=None):
        shape = _new_shape(tx, shape)
        dtype = _dtype_arg(dtype) or np.dtype(float)
        return _array(tx, torch_fn, (shape,), {"dtype": torch_dtype(dtype)}, scalar=False)

    return run


RULES[np.zeros] = _filled(torch.zeros)
RULES[np.ones] = _filled(torch.ones)


def _filled_like(torch_fn):
    def run(tx, a, dtype=None, order="K", subok=True, shape=None, *, device=None):
        a = _as_array(tx, a)
        if _const(shape, "shape") is not None:
            raise Unsupported("numpy.*_like with shape=")
        dtype = _dtype_arg(dtype) or a.dtype
        return _array(tx, torch_fn, (a.node,), {"dtype": torch_dtype(dtype)}, scalar=False)

    return run


RULES[np.zeros_like] = _filled_like(torch.zeros_like)
RULES[np.ones_like] = _filled_like(torch.ones_like)


@rule(np.full)
def _full(tx, shape, fill_value, dtype=None, order="C", *, like=None, device=None):
    shape = _new_shape(tx, shape)
    fill = _const(fill_value, "fill_value")
    dtype = _dtype_arg(dtype) or np.asarray(fill).dtype
    _check_int_fits(fill, dtype)
    return _array(tx, torch.full, (shape, fill), {"dtype": torch_dtype(dtype)}, scalar=False)


@rule(np.arange)
def _arange(tx, *args, dtype=None, like=None, device=None):
    values = [_const(a, "arange bounds") for a in args]
    if not 1 <= len(values) <= 3 or not all(_is_scalar_constant(v) for v in values):
        raise Unsupported("numpy.arange with these arguments")
    if len(values) == 1:
        values = [0, values[0]]
    dtype = _dtype_arg(dtype) or np.result_type(*values)
    return _array(tx, torch.arange, tuple(values), {"dtype": torch_dtype(dtype)}, scalar=False)


@rule(np.linspace)
def _linspace(
    tx, start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *, device=None
):
    start, stop = _const(start, "start"), _const(stop, "stop")
    num, endpoint = _const(num, "num"), _const(endpoint, "endpoint")
    if _const(retstep, "retstep") or _const(axis, "axis") != 0:
        raise Unsupported("numpy.linspace with retstep or axis")
    if not all(_is_scalar_constant(v) for v in (start, stop)):
        raise Unsupported("numpy.linspace with array bounds")
    dtype = _dtype_arg(dtype) or np.result_type(float, start, stop)
    if dtype.kind not in "fc":
        raise Unsupported("numpy.linspace with an integer dtype")
    if not endpoint:
        stop = start + (stop - start) * (num - 1) / num if num > 0 else stop
    return _array(
        tx, torch.linspace, (start, stop, num), {"dtype": torch_dtype(dtype)}, scalar=False
    )


@rule(np.array, np.asarray)
def _array_of(tx, obj, dtype=None, *, copy=True, order="K", ndmin=0, like=None, subok=False):
    dtype = _dtype_arg(dtype)
    if isinstance(obj, NumpyArrayVariable):  # np.asarray: the same array (np.array copies)
        return _to(tx, obj, dtype or obj.dtype)
    if isinstance(obj, VariableTracker) and not obj.is_python_constant():
        items = obj.unpack(tx)
        if all(isinstance(i, NumpyArrayVariable) for i in items):
            return _stack(tx, obj, 0, None, dtype)
        raise Unsupported("numpy.array of values not known at trace time")
    return constant_array(tx, np.asarray(_const(obj, "array contents"), dtype=dtype))


def _array_copy(tx, obj, dtype=None, *, copy=True, order="K", ndmin=0, like=None, subok=False):
    result = _array_of(tx, obj, dtype)
    if isinstance(obj, NumpyArrayVariable) and result.node is obj.node and _const(copy, "copy"):
        return _copy(tx, result)
    return result


RULES[np.array] = _array_copy


def _dtype_call(dtype: np.dtype) -> Rule:
    def run(tx, value=0):
        if isinstance(value, NumpyArrayVariable):
            result = _to(tx, value, dtype)
            if result is value:
                result = _copy(tx, value)
            return NumpyArrayVariable(result.node, result.example, scalar=True)
        return ConstantVariable(dtype.type(_const(value, f"numpy.{dtype.name}() argument")))

    return run


DTYPE_TYPES = (
    np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8,
    np.bool_, np.complex64, np.complex128,
)  # fmt: skip
for _type in DTYPE_TYPES:
    RULES[_type] = _dtype_call(np.dtype(_type))


# NumPy's questions about types and dtypes: NumPy answers them at trace time on constants
# (call_rule); on anything else, a break.
def _types_only(fn: Any) -> Rule:
    def run(tx, *args, **kwargs):
        raise Unsupported(f"numpy.{_name(fn)} of values not known at trace time")

    return run


for _fn in (np.issubdtype, np.dtype, np.result_type, np.promote_types, np.can_cast):
    RULES[_fn] = _types_only(_fn)


# ---- array attributes, indexing ---------------------------------------------------------------
class NumpyFunctionVariable(CallableVariable):
    """A NumPy function, ufunc or dtype type with a rule."""

    def call_function(self, tx, args, kwargs):
        name = _name(self.fn)
        if self.fn not in RULES:
            raise Unsupported(f"numpy.{name} is not traced as a tensor operation (no NumPy rule)")
        return call_rule(tx, self.fn, RULES[self.fn], args, kwargs, name=name)

    def var_getattr(self, tx, name):
        value = getattr(self.fn, name)
        if isinstance(value, str | int | tuple):
            return ConstantVariable(value)
        raise Unsupported(f"attribute {name} of numpy.{_name(self.fn)}")

    def __repr__(self) -> str:
        return f"NumpyFunctionVariable({_name(self.fn)})"


def _name(fn: Any) -> str:
    return getattr(fn, "__name__", repr(fn))


def call_rule(tx, fn: Any, run: Rule, args, kwargs, *, name: str) -> VariableTracker:
    if not any(_holds_array(a) for a in (*args, *kwargs.values())) and fn not in _FACTORIES:
        # Constants only: NumPy answers at trace time when the answer is a scalar.
        try:
            values = [a.as_python_constant() for a in args]
            kw = {k: v.as_python_constant() for k, v in kwargs.items()}
        except Unsupported:
            values = None
        if values is not None:
            with np.errstate(all="ignore"):
                result = fn(*values, **kw)
            if not isinstance(result, np.ndarray):
                return ConstantVariable(result)
    try:
        inspect.signature(run).bind(tx, *args, **kwargs)
    except TypeError as exc:
        raise Unsupported(f"numpy.{name}: {exc}") from exc
    return run(tx, *args, **kwargs)


_DISPATCHER = type(np.concatenate)  # NumPy's C-level array-function dispatchers
_FACTORIES = {np.zeros, np.ones, np.full, np.arange, np.linspace, np.array, np.asarray}


def _holds_array(value: VariableTracker) -> bool:
    if isinstance(value, NumpyArrayVariable):
        return True
    items = getattr(value, "items", None)
    return isinstance(items, list) and any(_holds_array(i) for i in items)


class NumpyMethodVariable(VariableTracker):
    """`array.name` before it is called."""

    def __init__(self, array: NumpyArrayVariable, name: str) -> None:
        super().__init__()
        self.array = array
        self.name = name

    def call_function(self, tx, args, kwargs):
        return call_rule(tx, None, METHODS[self.name], [self.array, *args], kwargs, name=self.name)


_READS_DATA = {"tobytes", "__bool__", "__float__", "__int__", "__index__"}


def _read_as_tensor(name: str) -> Rule:
    """`a.item()` / `a.tolist()`: the Python numbers are those of the same read of the array's
    tensor (int, float, bool, as NumPy gives): graph values under capture_scalar_outputs,
    else a break (scalar_outputs.py decides, as for a tensor)."""

    def run(tx, a, *args, **kwargs):
        read = METHOD_RULES.get(name)
        tensor = TensorVariable(a.node, a.example)
        result = None if read is None else read(tx, tensor, list(args), kwargs)
        if result is None:
            raise Unsupported(f"ndarray.{name}() reads array data into Python")
        return result

    return run


METHODS["item"] = _read_as_tensor("item")
METHODS["tolist"] = _read_as_tensor("tolist")


def array_attribute(tx, array: NumpyArrayVariable, name: str) -> VariableTracker:

    if name == "shape":  # symbolic sizes stay symbolic
        return wrap_constant_result(tuple(array.example.shape))
    if name in ("ndim", "size", "itemsize", "nbytes"):
        size = array.example.numel()
        values = {"ndim": array.ndim, "size": size, "itemsize": array.dtype.itemsize}
        values["nbytes"] = size * array.dtype.itemsize
        return ConstantVariable(values[name])
    if name == "dtype":
        return ConstantVariable(array.dtype)
    if name == "T":
        return _transpose(tx, array)
    if name in ("real", "imag"):
        return _real_or_imag(tx, array, name)
    if name == "strides":
        return _strides(array)
    if name in _READS_DATA:
        raise Unsupported(f"ndarray.{name}() reads array data into Python")
    if name in METHODS:
        return NumpyMethodVariable(array, name)
    raise Unsupported(f"ndarray.{name} is not traced as a tensor operation")


def _real_or_imag(tx, array: NumpyArrayVariable, name: str) -> VariableTracker:
    """A complex array's parts (views); a real array's real part is itself (a view) and its
    imaginary part zeros of its dtype, as NumPy's."""
    if array.dtype.kind == "c":
        return _array(tx, getattr(torch, name), (array.node,), scalar=False)
    if name == "real":
        return _array(tx, torch.Tensor.view_as, (array.node, array.node), scalar=False)
    return _array(tx, torch.zeros_like, (array.node,), scalar=False)


def _strides(array: NumpyArrayVariable) -> VariableTracker:
    """Byte strides of an array over a tensor passed in (its strides are guarded); an
    array computed in the graph may be laid out otherwise than NumPy would: not known."""
    strides = array.example.stride()
    if not _laid_out_as_input(array.node) or not all(type(s) is int for s in strides):
        raise Unsupported("ndarray.strides of an array computed in the trace")
    return ConstantVariable(tuple(s * array.dtype.itemsize for s in strides))


def _laid_out_as_input(node: Any) -> bool:
    """A graph input, or `view_as`/`detach` of one (`t.numpy()`): the input's own layout."""
    while node.op == "call_method" and (
        node.target == "detach" or (node.target == "view_as" and node.args[1] is node.args[0])
    ):
        node = node.args[0]
    return node.op == "placeholder"


@rule(np.fft.fftshift, np.fft.ifftshift)
def _fftshift(tx, x, axes=None):
    """fftshift/ifftshift: a roll by half of each axis, the dtype kept."""
    a = _as_array(tx, x)
    dims = _axes(axes, a.ndim)
    shifts = tuple(a.shape[d] // 2 for d in dims)
    return _array(tx, torch.roll, (a.node, shifts, dims), scalar=False)


@rule(np.linalg.norm)
def _norm(tx, x, ord=None, axis=None, keepdims=False):
    """The 2-norm over `axis` (all of it by default: Frobenius for a matrix) of a float
    array, in its dtype as NumPy's; other orders and dtypes are a break."""
    a = _as_array(tx, x)
    if _const(ord, "ord") is not None or a.dtype.kind != "f":
        raise Unsupported("numpy.linalg.norm other than the 2-norm of a float array")
    dims = _axes(axis, a.ndim)
    args = (a.node, 2, dims, bool(_const(keepdims, "keepdims")))
    return _array(tx, torch.linalg.vector_norm, args)


@rule(np.meshgrid)
def _meshgrid(tx, *xi, copy=True, sparse=False, indexing="xy"):
    """Coordinate matrices of arrays of one dtype, each flattened (copies, as NumPy's)."""
    arrays = [_as_array(tx, x) for x in xi]
    if _const(sparse, "sparse") or len({a.dtype for a in arrays}) > 1:
        raise Unsupported("numpy.meshgrid sparse or of mixed dtypes")
    flat = tuple(_node(tx, "call_function", torch.reshape, (a.node, (-1,)))[0] for a in arrays)
    mode = _const(indexing, "indexing")
    node, _example = _node(tx, "call_function", torch.meshgrid, flat, {"indexing": mode})
    grids = []
    for i in range(len(arrays)):
        part, _ = _node(tx, "call_function", operator.getitem, (node, i))
        grids.append(_array(tx, torch.clone, (part,), scalar=False))
    return TupleVariable(grids)


def _index_key(tx, key: VariableTracker) -> tuple[Any, bool]:
    """The FX index for a NumPy subscript, and whether it holds only integers."""

    if isinstance(key, ConstantVariable) and type(key.value) is tuple:  # a[1, 2]: a constant
        key = TupleVariable([ConstantVariable(v) for v in key.value])
    parts = key.items if isinstance(key, TupleVariable) else [key]
    fx, only_ints = [], True
    for part in parts:
        if isinstance(part, NumpyArrayVariable):
            fx.append(part.node)
            only_ints = False
        else:
            arg = as_node_arg(tx, part)
            only_ints = only_ints and type(arg) is int
            fx.append(arg)
    return (tuple(fx) if isinstance(key, TupleVariable) else fx[0]), only_ints


def _flip_negative_steps(tx, array: NumpyArrayVariable, index: Any) -> tuple[Any, Any]:
    """NumPy's `a[::-1]`: torch slices take positive steps, so flip those dims first."""
    parts = index if isinstance(index, tuple) else (index,)
    if not any(isinstance(p, slice) and (p.step or 1) < 0 for p in parts):
        return array.node, index
    if not all(type(p) in (int, slice) for p in parts) or len(parts) > array.ndim:
        raise Unsupported("a negative-step slice mixed with None, ... or array indices")
    flipped, new_parts = [], []
    for dim, part in enumerate(parts):
        if isinstance(part, slice) and (part.step or 1) < 0:
            size = array.shape[dim]
            picked = range(*part.indices(size))
            start = size - 1 - picked.start
            part = slice(start, start + len(picked) * -picked.step, -picked.step)
            flipped.append(dim)
        new_parts.append(part)
    node = _node(tx, "call_function", torch.flip, (array.node, tuple(flipped)))[0]
    return node, tuple(new_parts) if isinstance(index, tuple) else new_parts[0]


def getitem(tx, array: NumpyArrayVariable, key: VariableTracker) -> VariableTracker:
    index, only_ints = _index_key(tx, key)
    base, index = _flip_negative_steps(tx, array, index)
    node, example = _node(tx, "call_function", operator.getitem, (base, index))
    return NumpyArrayVariable(node, example, scalar=only_ints)


def setitem(tx, array: NumpyArrayVariable, key: VariableTracker, value: VariableTracker) -> None:
    index, _ = _index_key(tx, key)
    operand = _operand(tx, value)
    fx = _cast(tx, operand, array.dtype)
    _node(tx, "call_function", operator.setitem, (array.node, index, fx))


# Python operators on arrays: the NumPy ufunc each one is.
OPERATOR_UFUNCS = {
    operator.add: np.add, operator.sub: np.subtract, operator.mul: np.multiply,
    operator.truediv: np.divide, operator.floordiv: np.floor_divide,
    operator.mod: np.remainder, operator.pow: np.power, operator.lt: np.less,
    operator.le: np.less_equal, operator.eq: np.equal, operator.ne: np.not_equal,
    operator.gt: np.greater, operator.ge: np.greater_equal, operator.and_: np.bitwise_and,
    operator.or_: np.bitwise_or, operator.xor: np.bitwise_xor, operator.neg: np.negative,
    operator.invert: np.invert, operator.abs: np.absolute, operator.pos: np.positive,
}  # fmt: skip
INPLACE_OPERATORS = {
    operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
    operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv,
    operator.imod: operator.mod, operator.ipow: operator.pow, operator.iand: operator.and_,
    operator.ior: operator.or_, operator.ixor: operator.xor,
}  # fmt: skip


def apply_array_operator(tx: Translator, fn: Any, args: list[VariableTracker]):
    """`a + b`, `a < 2`, `-a`, `a @ b`, `a += 1` where an operand is a NumPy array."""
    if any(not isinstance(a, NumpyArrayVariable) and is_tensor(a) for a in args):
        return _tensor_operator(tx, fn, args)
    if fn in INPLACE_OPERATORS:
        target = args[0]
        result = apply_array_operator(tx, INPLACE_OPERATORS[fn], args)
        if not isinstance(target, NumpyArrayVariable):
            return result  # `n += a` for a Python number rebinds n
        return write_into(tx, target, result, what=f"{fn.__name__}")
    if fn is operator.matmul or fn is operator.imatmul:
        return matmul(tx, *args)
    ufunc = OPERATOR_UFUNCS.get(fn)
    if ufunc is None:
        raise Unsupported(f"operator {fn.__name__} on a NumPy array")
    return apply_ufunc(tx, ufunc, args)


# `t op a` that eager answers through NumPy (comparisons raise TypeError there); `t @ a`
# too (torch.matmul refuses the array: TypeError, so Tensor.__matmul__ answers NotImplemented).
_TENSOR_ARRAY_ARITHMETIC = {
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
    operator.mod, operator.pow, operator.and_, operator.or_, operator.xor, operator.matmul,
}  # fmt: skip


def _tensor_operator(tx: Translator, fn: Any, args: list[VariableTracker]):
    """`t op a`, a torch tensor and an array: Tensor's operators answer NotImplemented for an
    array (in place ones too), so the array's reflected operator runs NumPy's ufunc on the
    tensor's memory and hands the result back as a new tensor (Tensor.__array_wrap__):
    NumPy's dtype rules, never in place. `a / t` the other way round: ndarray defers to
    Tensor.__rtruediv__, `t.reciprocal() * a`. Other operators with the array on the left,
    comparisons and 0-d operands are NumPy's and torch's quirks (errors): refused."""
    plain = INPLACE_OPERATORS.get(fn, fn)
    left, right = args if len(args) == 2 else (None, None)
    if plain is operator.truediv and isinstance(left, NumpyArrayVariable) and is_tensor(right):
        # `a /= t` too: it rebinds a to the tensor, as eager
        node, example = tx.output.create_node("call_function", torch.reciprocal, (right.node,), {})
        return _tensor_operator(tx, operator.mul, [TensorVariable(node, example), left])
    if (
        not is_tensor(left)
        or not isinstance(right, NumpyArrayVariable)
        or plain not in _TENSOR_ARRAY_ARITHMETIC
        or (fn is not plain and plain is operator.matmul)
        or left.example.dim() == 0
        or right.example.dim() == 0
    ):
        raise Unsupported("an operator mixing a NumPy array and a torch tensor")
    operands = [array_of_tensor(tx, left), right]
    if plain is operator.matmul:
        result = matmul(tx, *operands)
    else:
        result = apply_ufunc(tx, OPERATOR_UFUNCS[plain], operands)
    tensor = tensor_from_array(tx, torch.as_tensor, [result], {})
    if result.example.dtype is torch.bool:  # Tensor.__array_wrap__ hands bools back as uint8
        node, example = tx.output.create_node("call_method", "to", (tensor.node, torch.uint8), {})
        return TensorVariable(node, example)
    return tensor


# ---- entry points from the builder -----------------------------------------------------------
@wrap_rule("numpy")
def numpy_tracker(tx: Translator, value: Any, source: Source | None):
    """The tracker for an ndarray or a NumPy function with a rule, else None."""
    if type(value) is np.ndarray:
        if source is None:
            raise Unsupported("a NumPy array made outside the trace without a source")
        return wrap_array(tx, value, source)
    if isinstance(value, np.generic) and type(value.item()) in (bool, int, float, complex):
        return _numpy_scalar(tx, value, source)
    if isinstance(value, np.dtype) and value.isbuiltin == 1 and value.kind in "biufc":
        return _numpy_dtype(tx, value, source)
    known = in_rule_table(value, RULES)
    if not known and not isinstance(value, np.ufunc | _DISPATCHER):
        return None
    if source is not None:
        tx.output.add_guard(Guard(source, GuardKind.ID_MATCH, value, user_location=tx.location()))
    return NumpyFunctionVariable(value, source=source)


def _numpy_scalar(tx: Translator, value: np.generic, source: Source | None):
    """A NumPy scalar read from the frame (np.int64(8)): a constant, guarded by its exact
    type and by its value as a Python number (`.item()`: NaN and -0.0 compared as floats)."""
    if source is not None:
        where = tx.location()
        tx.output.add_guard(Guard(source, GuardKind.TYPE_MATCH, type(value), user_location=where))
        item = MethodCallSource(source, "item")
        tx.output.add_guard(Guard(item, GuardKind.EQUALS_MATCH, value.item(), user_location=where))
    return ConstantVariable(value, source=source)


def _numpy_dtype(tx: Translator, value: np.dtype, source: Source | None):
    """A NumPy dtype read from the frame (np.dtype(int), a.dtype): a constant, guarded by
    its exact class and its type string ('<i8': kind, size and byte order; the dtype is a
    builtin one, nothing else to it). Equal dtypes made apart share one trace."""
    if source is not None:
        where = tx.location()
        tx.output.add_guard(Guard(source, GuardKind.TYPE_MATCH, type(value), user_location=where))
        text = AttrSource(source, "str")
        tx.output.add_guard(Guard(text, GuardKind.EQUALS_MATCH, value.str, user_location=where))
    return ConstantVariable(value, source=source)


__all__ = ["METHODS", "RULES", "NumpyFunctionVariable", "numpy_dtype", "numpy_tracker"]


ARRAY_RULES.update(attribute=array_attribute, getitem=getitem)
