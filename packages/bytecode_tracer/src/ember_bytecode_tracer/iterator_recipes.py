"""Recipes of iterators the trace made and the frame returns or stores (reconstruct.py's
table): made again once per call, in the state the trace left them in.

A list iterator over items known at trace time is `iter([remaining items])`; a lazy one
(map, filter, starmap, accumulate, count, repeat) is the call its `rebuild` names, over its
rebuilt inputs (exhausted ones included: a map over exhausted iterators). Iterators that read a live container
(a for-loop's list, a dict view) or run user code (a generator) are not rebuilt: a break.
"""

from __future__ import annotations

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.rebuild_codegen import emits
from ember_bytecode_tracer.reconstruct import (
    Recipe,
    RecipeBuilder,
    construct_recipe,
    items_code,
    load_recipe,
    recipe_for,
)
from ember_bytecode_tracer.variables.iterator_tools import LazyIteratorVariable, RebuildCall
from ember_bytecode_tracer.variables.iterators import ListIteratorVariable

# the sequence each kind of iterator is made again over
_SEQUENCE_OF = {type(iter([])): ("[", "]", list), type(iter(())): ("(", ")", tuple)}


@recipe_for(ListIteratorVariable)
def _list_iterator(builder: RecipeBuilder, value: ListIteratorVariable) -> Recipe:
    if value.source is not None:  # passed in: the same object
        return load_recipe(value.source)
    if type(value) is not ListIteratorVariable or value.kind not in _SEQUENCE_OF:
        raise Unsupported(f"cannot rebuild {value} after the graph")
    opening, closing, sequence = _SEQUENCE_OF[value.kind]
    parts = [builder.recipe(item) for item in value.items[value.index :]]
    recipe = emits(
        lambda outs, L, G: iter(sequence(p(outs, L, G) for p in parts)),
        lambda code: code.temp(f"{code.const(iter)}({opening}{items_code(code, parts)}{closing})"),
    )
    return builder.once_per_call(value, recipe)


def _call_recipe(builder: RecipeBuilder, call: RebuildCall) -> Recipe:
    def part(arg) -> Recipe:
        return _call_recipe(builder, arg) if isinstance(arg, RebuildCall) else builder.recipe(arg)

    positional = [part(a) for a in call.args]
    return construct_recipe(call.fn, positional, {k: part(v) for k, v in call.kwargs.items()})


@recipe_for(LazyIteratorVariable)
def _lazy_iterator(builder: RecipeBuilder, value: LazyIteratorVariable) -> Recipe:
    if value.source is not None:  # passed in: the same object
        return load_recipe(value.source)
    if value.rebuild is None:
        raise Unsupported(f"cannot rebuild {value} after the graph")
    return builder.once_per_call(value, _call_recipe(builder, value.rebuild()))
