"""User functions (inlined into the trace), bound methods, closures made during the trace."""

from __future__ import annotations

import functools
import inspect
import logging
from types import CellType, FunctionType, MethodType
from typing import TYPE_CHECKING, Any

import torch

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.guards import AttrSource, GuardKind, ItemSource
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import guard, wrap_rule
from ember_bytecode_tracer.variables.constant import ConstantVariable, is_constant_value
from ember_bytecode_tracer.variables.dicts import KEY_TRACKERS, ConstDictVariable
from ember_bytecode_tracer.variables.lazy import resolve_local
from ember_bytecode_tracer.variables.lists import SizeVariable, TupleVariable

if TYPE_CHECKING:
    from types import CodeType

    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator

CO_VARARGS = 0x04
CO_VARKEYWORDS = 0x08


def bind_code_arguments(
    code: CodeType,
    defaults: list[VariableTracker],
    kwdefaults: dict[str, VariableTracker],
    args: list[VariableTracker],
    kwargs: dict[str, VariableTracker],
) -> dict[str, VariableTracker]:
    """Binds call arguments to a code object's parameters the way CPython does."""
    names = code.co_varnames
    npos, nkwonly, nposonly = code.co_argcount, code.co_kwonlyargcount, code.co_posonlyargcount
    bound: dict[str, VariableTracker] = {}
    for name, value in zip(names[:npos], args, strict=False):
        bound[name] = value
    extra = args[npos:]
    index = npos + nkwonly
    if code.co_flags & CO_VARARGS:
        bound[names[index]] = TupleVariable(list(extra))
        index += 1
    elif extra:
        raise Unsupported(
            f"{code.co_name}() takes {npos} positional arguments but {len(args)} were given"
        )
    varkw: dict[str, VariableTracker] = {}
    for key, value in kwargs.items():
        if key in names[nposonly : npos + nkwonly] and key not in names[: min(len(args), npos)]:
            bound[key] = value
        elif key in bound:
            raise Unsupported(f"{code.co_name}() got multiple values for argument {key!r}")
        elif code.co_flags & CO_VARKEYWORDS:
            varkw[key] = value
        else:
            raise Unsupported(f"{code.co_name}() got an unexpected keyword argument {key!r}")
    if code.co_flags & CO_VARKEYWORDS:
        bound[names[index]] = ConstDictVariable(varkw)
    first_default = npos - len(defaults)
    for i, name in enumerate(names[:npos]):
        if name not in bound:
            if i >= first_default:
                bound[name] = defaults[i - first_default]
            else:
                raise Unsupported(f"{code.co_name}() missing required argument {name!r}")
    for name in names[npos : npos + nkwonly]:
        if name not in bound:
            if name not in kwdefaults:
                raise Unsupported(f"{code.co_name}() missing keyword-only argument {name!r}")
            bound[name] = kwdefaults[name]
    return bound


def bind_arguments(
    tx: Translator,
    fn: Any,
    fn_source: Source | None,
    args: list[VariableTracker],
    kwargs: dict[str, VariableTracker],
) -> dict[str, VariableTracker]:
    defaults = []
    for i, value in enumerate(fn.__defaults__ or ()):
        source = ItemSource(AttrSource(fn_source, "__defaults__"), i) if fn_source else None
        defaults.append(tx.wrap(value, source) if source else _wrap_unsourced(value))
    kwdefaults = {}
    for name, value in (fn.__kwdefaults__ or {}).items():
        source = ItemSource(AttrSource(fn_source, "__kwdefaults__"), name) if fn_source else None
        kwdefaults[name] = tx.wrap(value, source) if source else _wrap_unsourced(value)
    return bind_code_arguments(fn.__code__, defaults, kwdefaults, args, kwargs)


def _wrap_unsourced(value: Any) -> VariableTracker:

    if is_constant_value(value):
        return ConstantVariable(value)
    if type(value) is torch.Size:  # `sample_shape=torch.Size()`: immutable, like a constant
        return SizeVariable(tuple(value))
    raise Unsupported(f"default value {type(value).__name__} of a function without a source")


class UserFunctionVariable(VariableTracker):
    """A Python function defined in user code (or torch.nn code that we inline).

    A closure passed in (a function with cells, made anew by each call of its maker) is
    guarded by what a call of it depends on, as torch.compile guards one: its code object,
    its globals, the shape of its defaults, and (through their sources) the cell contents and
    defaults the trace reads. Another closure of the same code with the same contents runs
    the same compiled code. Its identity is pinned (an ID_MATCH guard) only when the trace
    uses the function object itself (`fn`: as a constant, compared, stored, handed on);
    calling it and reading its attributes do not (`_fn`)."""

    def __init__(self, fn: Any, *, source: Source | None = None, pin=None) -> None:
        super().__init__(source=source)
        self._fn = fn
        self._pin = pin  # installs the identity guard, once; None: none pending

    @property
    def fn(self) -> Any:
        if self._pin is not None:
            pin, self._pin = self._pin, None
            pin()
        return self._fn

    def python_type(self) -> type:
        return type(self._fn)

    def as_python_constant(self) -> Any:
        return self.fn

    def call_function(self, tx, args, kwargs):
        return tx.inline_call(self._fn, self.source, args, kwargs)

    def var_getattr(self, tx, name):
        if name in ("__name__", "__qualname__", "__module__", "__doc__"):
            if self._pin is not None:  # a closure: these are its own, guarded
                return tx.wrap(getattr(self._fn, name), AttrSource(self.source, name))
            return ConstantVariable(getattr(self._fn, name))
        if self.source is not None and hasattr(self._fn, name):
            return tx.wrap(getattr(self._fn, name), AttrSource(self.source, name))
        raise Unsupported(f"attribute {name} of function {self._fn.__qualname__}")

    def __repr__(self) -> str:
        return f"UserFunctionVariable({self._fn.__qualname__})"


class UserMethodVariable(VariableTracker):
    """`obj.method` for a Python-level method: calls inline `method(obj, ...)`."""

    def __init__(self, fn: Any, owner: VariableTracker, *, fn_source: Source | None = None):
        super().__init__()
        self.fn = fn
        self.owner = owner
        self.fn_source = fn_source

    def python_type(self) -> type:
        return MethodType

    def call_function(self, tx, args, kwargs):
        return tx.inline_call(self.fn, self.fn_source, [self.owner, *args], kwargs)


class CellReference(VariableTracker):
    """LOAD_CLOSURE during a trace: the cell `name` of the translator `tx`."""

    def __init__(self, tx: Translator, name: str) -> None:
        super().__init__()
        self.tx = tx
        self.name = name

    def _real_cell(self) -> bool:
        """A free variable of an inlined real function: its cell exists outside the trace."""
        return self.name not in self.tx.code.co_cellvars and self.name in self.tx.closure_cells

    def get(self) -> VariableTracker:
        if self._real_cell():
            return self.tx.load_closure_cell(self.name)
        if self.name not in self.tx.symbolic_locals:
            raise Unsupported(f"free variable {self.name!r} referenced before assignment")
        return resolve_local(self.tx, self.name)

    def set(self, value: VariableTracker) -> None:
        if self._real_cell() or self.name in self.tx.frame_cells:
            self.tx.store_closure_cell(self.name, value)
        elif self.name in self.tx.code.co_freevars:
            # The compiled frame's own free variable: its cell is not rebuilt after the graph.
            raise Unsupported(
                f"assigning the free variable {self.name!r} of a function from outside the trace"
            )
        else:
            self.tx.symbolic_locals[self.name] = value


class NestedUserFunctionVariable(VariableTracker):
    """A function made by MAKE_FUNCTION while tracing (lambdas, inner defs, comprehensions)."""

    def __init__(
        self,
        code: CodeType,
        qualname: str,
        f_globals: dict[str, Any],
        defaults: list[VariableTracker],
        kwdefaults: dict[str, VariableTracker],
        closure: list[CellReference],
        annotations: dict[str, VariableTracker] | None = None,
    ) -> None:
        super().__init__()
        self.code = code
        self.qualname = qualname
        self.f_globals = f_globals
        self.defaults = defaults
        self.kwdefaults = kwdefaults
        self.closure = closure
        self.annotations = annotations or {}
        # The function's own attributes as the trace set them (`functools.wraps` writes
        # __name__, __doc__, ... and __wrapped__); None until the first read or write.
        self.attrs: dict[str, VariableTracker] | None = None

    def python_type(self) -> type:
        return FunctionType

    def call_function(self, tx, args, kwargs):
        bound = bind_code_arguments(self.code, self.defaults, self.kwdefaults, args, kwargs)
        closure_vars = dict(zip(self.code.co_freevars, self.closure, strict=True))
        return tx.inline_code(self.code, self.f_globals, bound, closure_vars)

    def _attributes(self) -> dict[str, VariableTracker]:
        if self.attrs is None:
            self.attrs = nested_function_attributes(self)
        return self.attrs

    def has_attribute(self, name: str) -> bool:
        return name in self._attributes() or name in self._attributes()["__dict__"].items

    def var_getattr(self, tx, name):
        attrs = self._attributes()
        if name == "__defaults__":
            return TupleVariable(list(self.defaults)) if self.defaults else ConstantVariable(None)
        if name == "__kwdefaults__":
            return ConstDictVariable(self.kwdefaults) if self.kwdefaults else ConstantVariable(None)
        if name in attrs:
            return attrs[name]
        instance_dict = attrs["__dict__"]
        if isinstance(instance_dict, ConstDictVariable) and name in instance_dict.items:
            return instance_dict.items[name]
        if name in _FUNCTION_TYPE_ATTRIBUTES:
            raise Unsupported(f"attribute {name!r} of a function made in the trace")
        raise TracedException(AttributeError, name)

    def store_attribute(self, tx, name: str, value: VariableTracker) -> None:
        """`f.name = value` on a function made in the trace. It stays a tracker of the
        trace: a function made here that outlives the graph is a graph break (it is not
        rebuilt), so no write can be lost."""
        attrs = self._attributes()
        if name == "__defaults__":
            self.defaults = (
                []
                if value.is_python_constant() and value.as_python_constant() is None
                else value.unpack(tx)
            )
        elif name in ("__name__", "__qualname__") and not isinstance(
            value.as_python_constant(), str
        ):
            raise Unsupported(f"{name} of a function set to a non-string")
        elif name == "__dict__" and not isinstance(value, ConstDictVariable):
            raise Unsupported("__dict__ of a function set to a non-dict")
        elif name in attrs:
            attrs[name] = value
        elif name in _FUNCTION_TYPE_ATTRIBUTES:
            raise Unsupported(f"setting attribute {name!r} of a function made in the trace")
        else:
            attrs["__dict__"].call_method(tx, "__setitem__", [ConstantVariable(name), value], {})

    def __repr__(self) -> str:
        return f"NestedUserFunctionVariable({self.qualname})"


# Attributes every function has that the trace does not model (a read is a graph break).
_FUNCTION_TYPE_ATTRIBUTES = frozenset(dir(FunctionType))


def nested_function_attributes(fn: NestedUserFunctionVariable) -> dict[str, VariableTracker]:
    """The writable attributes of a function made by MAKE_FUNCTION, as CPython sets them:
    a real function with the same code gives the ones that depend on the code alone
    (`__doc__` is the first constant when it is a string, `__name__` the code's name)."""
    stand_in = FunctionType(fn.code, {}, None, None, tuple(CellType() for _ in fn.code.co_freevars))
    attrs: dict[str, VariableTracker] = {
        "__name__": ConstantVariable(stand_in.__name__),
        "__qualname__": ConstantVariable(fn.qualname),
        "__module__": ConstantVariable(fn.f_globals.get("__name__")),
        "__doc__": ConstantVariable(stand_in.__doc__),
        "__annotations__": ConstDictVariable(fn.annotations),
        "__dict__": ConstDictVariable({}),
    }
    if hasattr(stand_in, "__type_params__"):  # 3.12
        attrs["__type_params__"] = ConstantVariable(stand_in.__type_params__)
    return attrs


_BARE_PARTIAL = functools.partial(print)  # what any partial has: its type's and __dict__


class PartialVariable(VariableTracker):
    """functools.partial(func, *args, **kwargs). `origin` is where a partial passed in was
    read (exact type guarded); one built in the trace has no origin and an empty __dict__."""

    def __init__(
        self,
        func: VariableTracker,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
        *,
        origin: Source | None = None,
    ):
        super().__init__()
        self.func = func
        self.args = args
        self.kwargs = kwargs
        self.origin = origin
        self._keywords: ConstDictVariable | None = None

    def python_type(self) -> type:
        return functools.partial

    def has_attribute(self, name: str) -> bool | None:
        if hasattr(_BARE_PARTIAL, name):
            return True
        # What its __dict__ holds: nothing for one built here; one passed in may change.
        return False if self.origin is None else None

    def var_getattr(self, tx, name):
        if name == "func":
            return self.func
        if name == "args":
            return TupleVariable(list(self.args))
        if name == "keywords":
            if self._keywords is None:  # one dict, shared with the calls (mutations show)
                source = AttrSource(self.origin, "keywords") if self.origin else None
                self._keywords = ConstDictVariable(self.kwargs, source=source)
                self.kwargs = self._keywords.items
            return self._keywords
        if name == "__call__":
            return self
        if not hasattr(_BARE_PARTIAL, name) and self.has_attribute(name) is False:
            raise TracedException(
                AttributeError, f"'functools.partial' object has no attribute {name!r}"
            )
        return super().var_getattr(tx, name)

    def call_function(self, tx, args, kwargs):
        return self.func.call_function(tx, [*self.args, *args], {**self.kwargs, **kwargs})


def is_user_function(value: Any) -> bool:
    return inspect.isfunction(value)


# ---- wrapping real values (variables/builder.py) ----------------------------------------
def _is_function(tx: Translator, value: Any, source: Source | None) -> bool:
    return inspect.isfunction(value)


def _is_method(tx: Translator, value: Any, source: Source | None) -> bool:
    # a method of a Python function (a Cython one, numpy.random's, has a __code__ with no
    # bytecode to trace: it is a call into compiled code)
    return inspect.ismethod(value) and inspect.isfunction(value.__func__)


@wrap_rule("user_function", when=_is_function)
def _wrap_function(tx: Translator, value: Any, source: Source | None) -> VariableTracker:
    if source is not None and value.__closure__:
        _guard_closure_shape(tx, value, source)
        pin = functools.partial(guard, tx, source, GuardKind.ID_MATCH, value)
        return UserFunctionVariable(value, source=source, pin=pin)
    if source is not None:
        guard(tx, source, GuardKind.ID_MATCH, value)
    return UserFunctionVariable(value, source=source)


def _guard_closure_shape(tx: Translator, fn: Any, source: Source) -> None:
    """What a call of the closure `fn` depends on besides the cell contents and default
    values (guarded where the trace reads them): its code, globals and defaults' shape."""
    guard(tx, source, GuardKind.TYPE_MATCH, FunctionType)
    guard(tx, AttrSource(source, "__code__"), GuardKind.ID_MATCH, fn.__code__)
    guard(tx, AttrSource(source, "__globals__"), GuardKind.ID_MATCH, fn.__globals__)
    guard(tx, AttrSource(source, "__closure__"), GuardKind.LEN_MATCH, (tuple, len(fn.__closure__)))
    defaults, kwdefaults = fn.__defaults__, fn.__kwdefaults__
    if defaults is None:
        guard(tx, AttrSource(source, "__defaults__"), GuardKind.EQUALS_MATCH, None)
    else:
        guard(tx, AttrSource(source, "__defaults__"), GuardKind.LEN_MATCH, (tuple, len(defaults)))
    if kwdefaults is None:
        guard(tx, AttrSource(source, "__kwdefaults__"), GuardKind.EQUALS_MATCH, None)
    else:
        keys = (dict, tuple(kwdefaults))
        guard(tx, AttrSource(source, "__kwdefaults__"), GuardKind.DICT_KEYS, keys)


KEY_TRACKERS[FunctionType] = lambda fn: UserFunctionVariable(fn)  # guarded as a dict key


@wrap_rule("method", when=_is_method)
def _wrap_method(tx: Translator, value: Any, source: Source | None) -> VariableTracker:
    owner_source = AttrSource(source, "__self__") if source is not None else None
    owner = tx.wrap(value.__self__, owner_source)
    fn_source = AttrSource(source, "__func__") if source is not None else None
    if source is not None:
        guard(tx, fn_source, GuardKind.ID_MATCH, value.__func__)
    name = value.__func__.__name__
    if owner.methods_by_name and inspect.getattr_static(type(value.__self__), name, None) is (
        value.__func__
    ):  # `opt.step` handed in is what `opt.step` read in the trace is (a rule, not torch's code)
        return owner.var_getattr(tx, name)
    return UserMethodVariable(value.__func__, owner, fn_source=fn_source)


@wrap_rule("partial", types=functools.partial)
def _wrap_partial(tx: Translator, value: functools.partial, source: Source | None):
    if source is None:
        raise Unsupported("functools.partial without a source")
    func = tx.wrap(value.func, AttrSource(source, "func"))
    args = [tx.wrap(a, ItemSource(AttrSource(source, "args"), i)) for i, a in enumerate(value.args)]
    guard(tx, AttrSource(source, "args"), GuardKind.LEN_MATCH, (tuple, len(value.args)))
    guard(tx, AttrSource(source, "keywords"), GuardKind.DICT_KEYS, (dict, tuple(value.keywords)))
    kwargs = {
        k: tx.wrap(v, ItemSource(AttrSource(source, "keywords"), k))
        for k, v in value.keywords.items()
    }
    guard(tx, source, GuardKind.TYPE_MATCH, type(value))
    return PartialVariable(func, args, kwargs, origin=source)


# ---- callables that stand for a Python function: a call is traced into that function ----
# functools.lru_cache / functools.cache: traced into the function it wraps (`__wrapped__`);
# the cache is neither consulted nor filled. For the pure functions such caches are meant
# for, that is the same result computed again at trace time, once per trace. torch.compile
# does the same (it traces `__wrapped__` and warns once): a wrapped function with side
# effects repeats them on every compiled call where eager ran them on the first call only,
# and a mutable result is a fresh object per call where eager hands out the cached one (a
# caller that mutates it changes what eager's later calls see). We match it, with the same
# warning. Where eager raises (an unhashable argument), the trace breaks instead.
_WARNED_CACHED: set[str] = set()


def _check_cached_call(tx: Translator, wrapper: Any, args, kwargs) -> None:
    for arg in [*args, *kwargs.values()]:
        if arg.python_type().__hash__ is None:
            raise Unsupported(f"a {arg.python_type().__name__} argument to a cached function")
    name = getattr(wrapper, "__qualname__", repr(wrapper))
    if name not in _WARNED_CACHED:
        _WARNED_CACHED.add(name)
        logging.getLogger("ember.tracer").warning(
            "%s: a call of the functools.lru_cache-wrapped %s is traced into the function"
            " it wraps; its cache is not used (side effects repeat on every call)",
            tx.location(),
            name,
        )


# torch.jit.script'ed functions: torch.jit keeps the Python function it compiled in
# `_torchdynamo_inline` (torch/jit/_script.py keeps it for compilers to inline); that
# function is traced, as torch.compile does (torch.jit.is_scripting() answers False).
# A ScriptFunction without it (loaded from a file) is an opaque object: a graph break.
TRACED_THROUGH: dict[type, tuple[str, Any]] = {
    functools._lru_cache_wrapper: ("__wrapped__", _check_cached_call),
    torch.jit.ScriptFunction: ("_torchdynamo_inline", None),
}


class TracedThroughVariable(VariableTracker):
    """A callable of `TRACED_THROUGH`: calls trace the Python function it stands for."""

    def __init__(self, wrapper: Any, attribute: str, wrapped: VariableTracker, *, source) -> None:
        super().__init__(source=source)
        self.wrapper = wrapper
        self.attribute = attribute
        self.wrapped = wrapped

    def python_type(self) -> type:
        return type(self.wrapper)

    def call_function(self, tx, args, kwargs):
        check = TRACED_THROUGH[type(self.wrapper)][1]
        if check is not None:
            check(tx, self.wrapper, args, kwargs)
        return self.wrapped.call_function(tx, args, kwargs)

    def var_getattr(self, tx, name):
        if name == self.attribute:
            return self.wrapped
        return tx.wrap(getattr(self.wrapper, name), AttrSource(self.source, name))

    def __repr__(self) -> str:
        return f"TracedThroughVariable({getattr(self.wrapper, '__qualname__', '?')})"


def _stands_for_a_function(tx: Translator, value: Any, source: Source | None) -> bool:
    entry = TRACED_THROUGH.get(type(value))
    return entry is not None and inspect.isfunction(getattr(value, entry[0], None))


@wrap_rule("traced_through", types=tuple(TRACED_THROUGH), when=_stands_for_a_function)
def _wrap_traced_through(tx: Translator, value: Any, source: Source | None) -> VariableTracker:
    if source is None:
        raise Unsupported(f"a {type(value).__name__} without a source")
    guard(tx, source, GuardKind.ID_MATCH, value)
    attribute = TRACED_THROUGH[type(value)][0]
    wrapped = tx.wrap(getattr(value, attribute), AttrSource(source, attribute))
    return TracedThroughVariable(value, attribute, wrapped, source=source)
