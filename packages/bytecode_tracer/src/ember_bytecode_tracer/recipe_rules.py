"""How each kind of tracker is rebuilt after the graph ran: the rules of reconstruct.py's
table, one per tracker class (reconstruct.py itself imports no tracker)."""

from __future__ import annotations

import collections
import contextlib
import inspect
import types
import warnings
import weakref
from typing import TYPE_CHECKING, Any

import torch.fx
from torch.multiprocessing.reductions import StorageWeakRef

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import FREE_CELL, LocalSource
from ember_bytecode_tracer.rebuild_codegen import RebuildCode, emits, emits_write
from ember_bytecode_tracer.reconstruct import (
    Recipe,
    RecipeBuilder,
    constant_recipe,
    construct_recipe,
    entries_code,
    items_code,
    load_recipe,
    output_recipe,
    recipe_for,
    sequence_code,
    source_loader,
)
from ember_bytecode_tracer.variables.collections_types import DefaultDictVariable
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.constructed import ConstructedObjectVariable
from ember_bytecode_tracer.variables.container_subclasses import (
    UserDictVariable,
    UserListVariable,
)
from ember_bytecode_tracer.variables.contexts import (
    ContextExitVariable,
    GradModeVariable,
    NullContextVariable,
    rebuilt_grad_mode,
)
from ember_bytecode_tracer.variables.dicts import (
    ConstDictVariable,
    DictViewVariable,
    TrackerKey,
    constant_keys,
)
from ember_bytecode_tracer.variables.exceptions import ExceptionVariable
from ember_bytecode_tracer.variables.functions import (
    CellReference,
    NestedUserFunctionVariable,
    UserMethodVariable,
)
from ember_bytecode_tracer.variables.lists import BaseListVariable, SizeVariable
from ember_bytecode_tracer.variables.numpy_arrays import NumpyArrayVariable
from ember_bytecode_tracer.variables.objects import FRAME_LOCAL_CLASSES, TypeVariable
from ember_bytecode_tracer.variables.sets import SetVariable, replay_onto
from ember_bytecode_tracer.variables.signatures import (
    NOT_KNOWN,
    BoundArgumentsVariable,
    InspectConstantVariable,
)
from ember_bytecode_tracer.variables.sym_values import SymNodeVariable, as_fx_arg, output_of
from ember_bytecode_tracer.variables.tensor import TensorVariable
from ember_bytecode_tracer.variables.traced_objects import TracedObjectVariable
from ember_bytecode_tracer.variables.user_contexts import UserContextVariable
from ember_bytecode_tracer.variables.warning_calls import CatchWarningsVariable
from ember_bytecode_tracer.variables.weak_refs import WeakRefVariable

if TYPE_CHECKING:
    from ember_bytecode_tracer.variables.base import VariableTracker


@recipe_for(TensorVariable)
def _tensor(builder: RecipeBuilder, value: TensorVariable) -> Recipe:
    if value.node.op == "placeholder" and value.source is not None:
        return load_recipe(value.source)
    recipe = output_recipe(builder.output_index(value.node))
    if value.node.meta.get("tensor_data"):
        # `t.data` as eager makes it: its own version counter (a detach shares t's), once per
        # call however many places hold it
        return builder.once_per_call(
            value,
            emits(
                lambda outs, L, G: recipe(outs, L, G).data,
                lambda code: code.temp(f"{code.value(recipe)}.data"),
            ),
        )
    if not _detached_alias_of_input(value):
        return recipe
    # `x.detach()` / `x.data` of an input requiring grad: a backend may hand back the alias
    # rebuilt as a view of the real input, with autograd history eager's has not
    return emits(
        lambda outs, L, G: _without_history(recipe(outs, L, G)),
        lambda code: code.temp(f"{code.const(_without_history)}({code.value(recipe)})"),
    )


def _detached_alias_of_input(value: TensorVariable) -> bool:
    """An output without autograd history sharing storage with an input that has one."""
    example = value.example
    if example.requires_grad or example.layout != torch.strided:  # (sparse: no storage)
        return False
    storage = StorageWeakRef(example.untyped_storage())
    return any(
        node.op == "placeholder"
        and isinstance(given := node.meta.get("example_value"), torch.Tensor)
        and given.requires_grad
        and given.layout == torch.strided
        and StorageWeakRef(given.untyped_storage()) == storage
        for node in value.node.graph.nodes
    )


def _without_history(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach() if tensor.requires_grad else tensor


@recipe_for(SymNodeVariable)
def _symbolic(builder: RecipeBuilder, value: SymNodeVariable) -> Recipe:
    if value.source is not None:
        return load_recipe(value.source)
    node = as_fx_arg(output_of(value), value)  # a size computed in the graph
    if not isinstance(node, torch.fx.Node):
        return constant_recipe(node)
    return output_recipe(builder.output_index(node))


@recipe_for(SizeVariable)
def _size(builder: RecipeBuilder, value: SizeVariable) -> Recipe:
    if not any(isinstance(item, SymNodeVariable) for item in value.items):
        return constant_recipe(torch.Size(value.as_python_constant()))
    parts = [builder.recipe(item) for item in value.items]
    return emits(
        lambda outs, L, G: torch.Size(p(outs, L, G) for p in parts),
        lambda code: code.temp(f"{code.const(torch.Size)}([{items_code(code, parts)}])"),
    )


# How a list or deque passed in gets the contents the trace left it with, in place.
_REFILL = {
    list: lambda target, new: target.__setitem__(slice(None), new),
    collections.deque: lambda target, new: (target.clear(), target.extend(new)),
}


@recipe_for(BaseListVariable)
def _sequence(builder: RecipeBuilder, value: BaseListVariable) -> Recipe:
    parts = [builder.recipe(item) for item in value.items]
    kind = value.python_type()
    if value.source is not None and id(value) not in builder.mutated:
        return load_recipe(value.source)
    if value.source is not None and kind in _REFILL:
        # The same list (or deque) the frame had, given its new contents by a write.
        load, expr, refill = source_loader(value.source), value.source.expr(), _REFILL[kind]

        def same_list(outs, L, G):
            target, new = load(L, G), [p(outs, L, G) for p in parts]
            return lambda: refill(target, new)

        def emit_same_list(code: RebuildCode) -> list[str]:
            target = code.temp(expr)
            new = code.temp(f"[{items_code(code, parts)}]")
            if kind is list:
                return [f"{target}[:] = {new}"]
            return [f"{target}.clear()", f"{target}.extend({new})"]

        builder.write_once(value, emits_write(same_list, emit_same_list))
        return load_recipe(value.source)
    maxlen = getattr(value, "maxlen", None)
    if maxlen is not None:  # a bounded deque made in the trace
        return construct_recipe(kind, [emits(lambda outs, L, G: [p(outs, L, G) for p in parts],
                                             lambda code: code.temp(f"[{items_code(code, parts)}]")),
                                       constant_recipe(maxlen)], {})  # fmt: skip
    return emits(
        lambda outs, L, G: kind(p(outs, L, G) for p in parts),
        lambda code: code.temp(sequence_code(code, kind, parts)),
    )


@recipe_for(DictViewVariable)
def _dict_view(builder: RecipeBuilder, value: DictViewVariable) -> Recipe:
    """A view rebuilt as the view of its rebuilt dict (eager returns a live dict_keys, ...)."""
    owner, method = builder.recipe(value.owner), value.method
    return emits(
        lambda outs, L, G: getattr(owner(outs, L, G), method)(),
        lambda code: code.temp(f"{code.value(owner)}.{method}()"),
    )


def _entries(builder: RecipeBuilder, items: dict) -> list[tuple[Recipe, Recipe]]:
    """(key, value) recipes of a dict tracker's items: a constant key as itself, a tracker
    key (a tensor, an object made in the trace) as its tracker is rebuilt."""
    return [
        (builder.recipe(k.tracker) if isinstance(k, TrackerKey) else constant_recipe(k),
         builder.recipe(v))
        for k, v in items.items()
    ]  # fmt: skip


def _pairs(outs, L, G, entries: list[tuple[Recipe, Recipe]]) -> list[tuple[Any, Any]]:
    return [(k(outs, L, G), v(outs, L, G)) for k, v in entries]


def _pairs_code(code: RebuildCode, entries: list[tuple[Recipe, Recipe]]) -> str:
    return "[" + "".join(f"({code.value(k)}, {code.value(v)}), " for k, v in entries) + "]"


@recipe_for(ConstDictVariable)
def _dict(builder: RecipeBuilder, value: ConstDictVariable) -> Recipe:
    if value.source is not None and id(value) not in builder.mutated:
        return load_recipe(value.source)
    entries = _entries(builder, value.items)
    kind = value.dict_type
    if value.source is not None:
        load, expr = source_loader(value.source), value.source.expr()

        def same_dict(outs, L, G):
            target = load(L, G)
            new = _pairs(outs, L, G, entries)

            def apply() -> None:
                target.clear()
                target.update(new)

            return apply

        def emit_same_dict(code: RebuildCode) -> list[str]:
            target = code.temp(expr)
            new = code.temp(_pairs_code(code, entries))
            return [f"{target}.clear()", f"{target}.update({new})"]

        builder.write_once(value, emits_write(same_dict, emit_same_dict))
        return load_recipe(value.source)
    made = emits(
        lambda outs, L, G: kind(_pairs(outs, L, G, entries)),
        lambda code: code.temp(f"{code.const(kind)}({_pairs_code(code, entries)})"),
    )
    return builder.once_per_call(value, made)  # one dict for all that hold it (and its views)


@recipe_for(DefaultDictVariable)
def _default_dict(builder: RecipeBuilder, value: DefaultDictVariable) -> Recipe:
    """The frame's own defaultdict keeps its factory (written like a dict); one built in the
    trace is rebuilt with its factory rebuilt first."""
    if value.source is not None:
        return _dict(builder, value)
    factory = builder.recipe(value.factory)
    entries = _entries(builder, value.items)
    made = emits(
        lambda outs, L, G: collections.defaultdict(
            factory(outs, L, G), _pairs(outs, L, G, entries)
        ),
        lambda code: code.temp(
            f"{code.const(collections.defaultdict)}({code.value(factory)}, "
            f"{_pairs_code(code, entries)})"
        ),
    )
    return builder.once_per_call(value, made)


def make_function(
    code: Any,
    f_globals: dict,
    qualname: str,
    defaults: tuple,
    kwdefaults: dict,
    closure: tuple = (),
    annotations: dict | None = None,
):
    """A function as MAKE_FUNCTION makes it (one made in the trace; its cells rebuilt)."""
    fn = types.FunctionType(code, f_globals, code.co_name, defaults or None, closure or None)
    fn.__kwdefaults__ = kwdefaults or None
    if annotations:
        fn.__annotations__ = annotations
    fn.__qualname__ = qualname
    return fn


def _cell(builder: RecipeBuilder, cell: CellReference) -> Recipe:
    """A cell of a frame the trace ran, holding its final value: the cells of the compiled
    frame at its return, or of a function inlined and finished. At a break the compiled
    frame keeps its own cells (RecipeBuilder.frame_cells): those are loaded, not rebuilt. A cell that exists outside the trace (a free variable of
    the compiled frame, or of an inlined function reached through a source) is that same
    cell, loaded: a function made over it shares it with its maker, as in eager."""
    tx, name = cell.tx, cell.name
    if name in tx.frame_cells or (name in tx.closure_cells and tx.fn_source is not None):
        return load_recipe(tx.cell_source(name))
    kept = builder.frame_cells
    if kept is not None and kept[0] is tx and name in kept[1]:
        if name not in builder.cells_read:
            builder.cells_read.append(name)
        return load_recipe(LocalSource(FREE_CELL + name))
    if name not in tx.code.co_cellvars:
        raise Unsupported(f"cannot rebuild the cell {name!r} of a function made in the trace")
    return builder.cell_recipe((id(tx), name), tx, cell.get)


@recipe_for(NestedUserFunctionVariable)
def _nested_function(builder: RecipeBuilder, value: NestedUserFunctionVariable) -> Recipe:
    """A lambda or inner def made in the trace, returned or stored: made again, once per call
    (eager makes a new function object on every call too), over cells rebuilt once per call
    (shared by every function rebuilt over them), with its annotations, and the attributes
    the trace read or set (`__wrapped__`, `__name__`, ...) set again on the new function."""
    attributes: dict[str, Recipe] = {}  # filled below, after the function is known
    if value.attrs is not None and any(v is value for v in value.attrs.values()):
        raise Unsupported(f"cannot rebuild {value}, an attribute of itself")
    code_object, f_globals, qualname = value.code, value.f_globals, value.qualname
    made: list[Recipe] = []

    def build(outs, L, G):
        return make_function(
            code_object,
            f_globals,
            qualname,
            tuple(d(outs, L, G) for d in defaults),
            {k: p(outs, L, G) for k, p in kwdefaults.items()},
            tuple(c(outs, L, G) for c in cells),
            {k: p(outs, L, G) for k, p in notes.items()},
        )

    def emit(code: RebuildCode) -> str:
        return code.temp(
            f"{code.const(make_function)}({code.const(code_object)}, {code.const(f_globals)}, "
            f"{qualname!r}, ({items_code(code, defaults)}), "
            f"{{{entries_code(code, kwdefaults)}}}, ({items_code(code, cells)}), "
            f"{{{entries_code(code, notes)}}})"
        )

    function = emits(build, emit)
    if value.attrs is not None:
        function = _with_attributes(function, attributes)
    made.append(builder.once_per_call(value, function))
    # The function is known before its parts: a cell may hold the function itself.
    for name, part in (value.attrs or {}).items():
        attributes[name] = builder.recipe(part)
    cells = [_cell(builder, c) for c in value.closure]
    defaults = [builder.recipe(d) for d in value.defaults]
    kwdefaults = {k: builder.recipe(v) for k, v in value.kwdefaults.items()}
    notes = {k: builder.recipe(v) for k, v in value.annotations.items()}
    return made[0]


@recipe_for(ConstructedObjectVariable)
def _constructed(builder: RecipeBuilder, value: ConstructedObjectVariable) -> Recipe:
    if value.source is not None:  # the frame's own object (with whatever else it carries)
        return load_recipe(value.source)
    made = construct_recipe(
        value.cls,
        [builder.recipe(a) for a in value.args],
        {k: builder.recipe(v) for k, v in value.kwargs.items()},
    )
    writes = getattr(value, "writes", None)
    if writes:  # a keyed output's entry and attribute writes, replayed in order
        made = _with_writes(made, [(fn, k, builder.recipe(v)) for fn, k, v in writes])
    elif value.attrs:
        made = _with_attributes(made, {k: builder.recipe(v) for k, v in value.attrs.items()})
    return builder.once_per_call(value, made)


def _with_writes(made: Recipe, writes: list[tuple[Any, str, Recipe]]) -> Recipe:
    """`made`'s object after `setter(obj, key, value)` of each write, in the trace's order
    (C setters: nothing of the user's runs again)."""

    def build(outs, L, G):
        obj = made(outs, L, G)
        for setter, key, part in writes:
            setter(obj, key, part(outs, L, G))
        return obj

    def emit(code: RebuildCode) -> str:
        obj = code.temp(code.value(made))
        for setter, key, part in writes:
            code.line(f"{code.const(setter)}({obj}, {key!r}, {code.value(part)})")
        return obj

    return emits(build, emit)


def _with_attributes(made: Recipe, attrs: dict[str, Recipe]) -> Recipe:
    """`made`'s object with the attributes the trace set on it (its instance dict)."""

    def build(outs, L, G):
        obj = made(outs, L, G)
        for name, part in attrs.items():
            object.__setattr__(obj, name, part(outs, L, G))
        return obj

    def emit(code: RebuildCode) -> str:
        obj = code.temp(code.value(made))
        setter = code.const(object.__setattr__)
        for name, part in attrs.items():
            code.line(f"{setter}({obj}, {name!r}, {code.value(part)})")
        return obj

    return emits(build, emit)


@recipe_for(TracedObjectVariable)
def _traced_object(builder: RecipeBuilder, value: TracedObjectVariable) -> Recipe:
    _refuse_frame_local(value.cls, "an instance of ")
    return builder.object_recipe(value)


@recipe_for(ExceptionVariable)
def _exception(builder: RecipeBuilder, value: ExceptionVariable) -> Recipe:
    """An exception built (not raised) in the trace: `cls(*args)`, its args constants."""
    if value.caught:
        raise Unsupported("an exception caught in the trace leaving it (its traceback)")
    args = [constant_recipe(a) for a in value.raised.args_]
    return builder.once_per_call(value, construct_recipe(value.raised.exc_type, args, {}))


@recipe_for(WeakRefVariable)
def _weak_reference(builder: RecipeBuilder, value: WeakRefVariable) -> Recipe:
    """A reference to the object rebuilt for this call (kept alive only by its holders)."""
    referent = builder.recipe(value.referent)
    return builder.once_per_call(
        value,
        emits(
            lambda outs, L, G: weakref.ref(referent(outs, L, G)),
            lambda code: code.temp(f"{code.const(weakref.ref)}({code.value(referent)})"),
        ),
    )


@recipe_for(TypeVariable)
def _class(builder: RecipeBuilder, value: TypeVariable) -> Recipe:
    _refuse_frame_local(value.cls, "")
    if value.source is not None:
        return load_recipe(value.source)
    return constant_recipe(value.cls)


def _refuse_frame_local(cls: type, what: str) -> None:
    if cls in FRAME_LOCAL_CLASSES:
        raise Unsupported(
            f"{what}class {cls.__qualname__}, defined inside the traced frame, leaving the "
            "compiled region (eager makes a new class on every call)"
        )


@recipe_for(GradModeVariable)
def _grad_mode(builder: RecipeBuilder, value: GradModeVariable) -> Recipe:
    """A grad-mode context object held in a local at a break (`ctx = set_grad_enabled(m)`,
    entered after it): a fresh one per call, as eager makes."""
    arguments = (value.enabled, value.previous, value.applies_on_creation)
    return construct_recipe(rebuilt_grad_mode, [constant_recipe(a) for a in arguments], {})


@recipe_for(UserMethodVariable)
def _bound_method(builder: RecipeBuilder, value: UserMethodVariable) -> Recipe:
    """A bound method on the stack at a break (`ctx.__exit__(...)` is the call that breaks):
    the function the trace resolved, bound to its rebuilt owner."""
    owner = builder.recipe(value.owner)
    return construct_recipe(types.MethodType, [constant_recipe(value.fn), owner], {})


@recipe_for(ContextExitVariable)
def _context_exit(builder: RecipeBuilder, value: ContextExitVariable) -> Recipe:
    """The __exit__ a with-block left on the stack, at a break inside the block: a user
    class's is its `__exit__` bound to the rebuilt context object (the resume function
    calls it when the block ends, as eager does); the others restore a constant state."""
    context = value.context
    if isinstance(context, UserContextVariable):
        exit_fn = inspect.getattr_static(context.obj.python_type(), "__exit__")
        owner = builder.recipe(context.obj)
        return construct_recipe(types.MethodType, [constant_recipe(exit_fn), owner], {})
    return constant_recipe(value.as_python_constant())


@recipe_for(NullContextVariable)
def _null_context(builder: RecipeBuilder, value: NullContextVariable) -> Recipe:
    return construct_recipe(contextlib.nullcontext, [builder.recipe(value.enter_result)], {})


@recipe_for(NumpyArrayVariable)
def _array(builder: RecipeBuilder, value: NumpyArrayVariable) -> Recipe:
    """An array (or NumPy scalar) from the graph's outputs."""
    if value.node.op == "placeholder" and value.source is not None:
        load = source_loader(value.source)  # the caller's own array
        return lambda outs, L, G: load(L, G)
    index = builder.output_index(value.node)
    # detach(): an array has no autograd, and a backend may hand back an output aliasing a
    # grad-requiring input as requiring grad (`x.numpy(force=True)` under inductor), where
    # .numpy() raises; the trace refused the eager error (numpy() on such a tensor) already
    if value.scalar:
        return lambda outs, L, G: outs[index].detach().numpy()[()]
    return lambda outs, L, G: outs[index].detach().numpy()


@recipe_for(ConstantVariable)
def _constant(builder: RecipeBuilder, value: VariableTracker) -> Recipe:
    constant = value.value
    if type(constant) is set:  # mutable: a fresh one per call, as eager code makes
        return emits(
            lambda outs, L, G: set(constant),
            lambda code: code.temp(f"{code.const(set)}({code.const(constant)})"),
        )
    return constant_recipe(constant)


@recipe_for(InspectConstantVariable)
def _inspect_constant(builder: RecipeBuilder, value: InspectConstantVariable) -> Recipe:
    """A Signature or Parameter, baked in; not one of a function made in the trace whose
    defaults or annotations the trace did not know (its stand-in holds NOT_KNOWN)."""
    signature = value.value
    parameters = signature.parameters.values() if hasattr(signature, "parameters") else [signature]
    if any(NOT_KNOWN in (p.default, p.annotation) for p in parameters):
        raise Unsupported("returning the signature of a function made in the trace")
    return constant_recipe(signature)


@recipe_for(BoundArgumentsVariable)
def _bound_arguments(builder: RecipeBuilder, value: BoundArgumentsVariable) -> Recipe:
    """`inspect.BoundArguments(signature, arguments)`, once per call (its arguments dict is
    the one the trace's `bound.arguments` gave)."""
    signature = builder.recipe(ConstantVariable(value.signature))
    made = construct_recipe(
        inspect.BoundArguments, [signature, builder.recipe(value.arguments)], {}
    )
    return builder.once_per_call(value, made)


@recipe_for(CatchWarningsVariable)
def _catch_warnings(builder: RecipeBuilder, value: CatchWarningsVariable) -> Recipe:
    """A catch_warnings object made (not entered) in the trace: made again, once per call."""
    if value.entered:
        raise Unsupported("a warnings.catch_warnings() object entered in the trace")
    made = construct_recipe(warnings.catch_warnings, [], {"record": constant_recipe(value.record)})
    return builder.once_per_call(value, made)


@recipe_for(SetVariable)
def _set(builder: RecipeBuilder, value: SetVariable) -> Recipe:
    """A set of the trace, made once per call. Of constants: its operations run again
    (the table, and so the order the caller iterates it in, is eager's, a pop()'s cursor
    too); of tensors or objects: from its elements."""
    kind = type(value.keys)
    if value.source is not None:  # a set passed in: the trace's changes run on it
        return _same_set(builder, value)
    if value.ordered():
        if value.history is None:
            raise Unsupported("rebuilding a set whose operations are not known")
        replay = value.replay_operand()
        made = emits(
            lambda outs, L, G: replay.build(),
            lambda code: code.temp(f"{code.const(replay)}.build()"),
        )
    else:
        parts = [builder.recipe(value.element(k)) for k in value.keys]
        made = emits(
            lambda outs, L, G: kind(p(outs, L, G) for p in parts),
            lambda code: code.temp(f"{code.const(kind)}([{items_code(code, parts)}])"),
        )
    return builder.once_per_call(value, made)


def _same_set(builder: RecipeBuilder, value: SetVariable) -> Recipe:
    if id(value) in builder.mutated:
        load, expr, steps = source_loader(value.source), value.source.expr(), tuple(value.writes)

        def write(outs, L, G):
            target = load(L, G)
            return lambda: replay_onto(target, steps)

        def emit_write(code: RebuildCode) -> list[str]:
            target = code.temp(expr)
            return [f"{code.const(replay_onto)}({target}, {code.const(steps)})"]

        builder.write_once(value, emits_write(write, emit_write))
    return load_recipe(value.source)


@recipe_for(UserListVariable, UserDictVariable)
def _container_subclass(builder: RecipeBuilder, value: UserListVariable) -> Recipe:
    """An instance of a list or dict subclass made in the trace: `cls.__new__(cls)` filled
    through list's (dict's) own methods, with its attributes; its __init__ is not rerun."""
    cls, is_list = value.cls, value.base is list
    fill = list.extend if is_list else dict.update
    if value.source is not None:
        return _same_container(builder, value)
    if is_list:
        items: Any = [builder.recipe(v) for v in value.items]
    else:
        constant_keys(value.items)  # (tensor keys: rebuilt through _entries only)
        items = {k: builder.recipe(v) for k, v in value.items.items()}
    attrs = {k: builder.recipe(v) for k, v in value.attrs.items()}

    def build(outs, L, G):
        obj = cls.__new__(cls)
        if is_list:
            fill(obj, [p(outs, L, G) for p in items])
        else:
            fill(obj, {k: p(outs, L, G) for k, p in items.items()})
        obj.__dict__.update({k: p(outs, L, G) for k, p in attrs.items()})
        return obj

    def emit(code: RebuildCode) -> str:
        name, kind = code.name("o"), code.const(cls)
        code.line(f"{name} = {kind}.__new__({kind})")
        parts = f"[{items_code(code, items)}]" if is_list else f"{{{entries_code(code, items)}}}"
        code.line(f"{code.const(fill)}({name}, {parts})")
        code.line(f"{name}.__dict__.update({{{entries_code(code, attrs)}}})")
        return name

    return builder.once_per_call(value, emits(build, emit))


def _same_container(builder: RecipeBuilder, value: UserListVariable) -> Recipe:
    """An input list/dict subclass instance: itself, given the trace's items when the trace
    changed them (through list's/dict's own methods: the class's are not rerun)."""
    if id(value) in builder.mutated:
        load, expr = source_loader(value.source), value.source.expr()
        if value.base is list:
            parts = [builder.recipe(v) for v in value.items]

            def same_list(outs, L, G):
                target, new = load(L, G), [p(outs, L, G) for p in parts]
                return lambda: list.__setitem__(target, slice(None), new)

            def emit_list(code: RebuildCode) -> list[str]:
                target = code.temp(expr)
                new = code.temp(f"[{items_code(code, parts)}]")
                return [f"{code.const(list.__setitem__)}({target}, slice(None), {new})"]

            builder.write_once(value, emits_write(same_list, emit_list))
        else:
            constant_keys(value.items)
            entries = {k: builder.recipe(v) for k, v in value.items.items()}

            def same_dict(outs, L, G):
                target = load(L, G)
                new = {k: p(outs, L, G) for k, p in entries.items()}
                return lambda: (dict.clear(target), dict.update(target, new))

            def emit_dict(code: RebuildCode) -> list[str]:
                target = code.temp(expr)
                new = code.temp(f"{{{entries_code(code, entries)}}}")
                clear, update = code.const(dict.clear), code.const(dict.update)
                return [f"{clear}({target})", f"{update}({target}, {new})"]

            builder.write_once(value, emits_write(same_dict, emit_dict))
    return load_recipe(value.source)
