"""The rule tables that replaced the ladders in variables/builder.py, objects.py and
reconstruct.py: each value resolves to the tracker (and the guards) the ladders gave it,
and the precedence of the recipe table is the order the ladder tested the classes in."""

from __future__ import annotations

import collections
import enum
import functools
import inspect
import math
import operator
import os

import numpy as np
import pytest
import torch
from torch import nn

import ember_bytecode_tracer.convert_frame  # noqa: F401  (every table filled)
from ember_bytecode_tracer.dynamic import DynamicPolicy
from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import LocalSource
from ember_bytecode_tracer.output_graph import OutputGraph
from ember_bytecode_tracer.reconstruct import RECIPES, recipe_rule
from ember_bytecode_tracer.variables import objects
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import WRAP_ORDER, resolve_rule, wrap_rules, wrap_value
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
    RealContextExit,
)
from ember_bytecode_tracer.variables.dicts import ConstDictVariable, DictViewVariable
from ember_bytecode_tracer.variables.exceptions import ExceptionVariable
from ember_bytecode_tracer.variables.functions import (
    NestedUserFunctionVariable,
    UserMethodVariable,
)
from ember_bytecode_tracer.variables.iterator_tools import LazyIteratorVariable
from ember_bytecode_tracer.variables.iterators import ListIteratorVariable
from ember_bytecode_tracer.variables.lists import BaseListVariable, SizeVariable
from ember_bytecode_tracer.variables.numpy_arrays import NumpyArrayVariable
from ember_bytecode_tracer.variables.objects import TypeVariable
from ember_bytecode_tracer.variables.sets import SetVariable
from ember_bytecode_tracer.variables.signatures import (
    BoundArgumentsVariable,
    InspectConstantVariable,
)
from ember_bytecode_tracer.variables.sym_values import SymNodeVariable
from ember_bytecode_tracer.variables.tensor import TensorVariable
from ember_bytecode_tracer.variables.traced_objects import TracedObjectVariable
from ember_bytecode_tracer.variables.warning_calls import CatchWarningsVariable
from ember_bytecode_tracer.variables.weak_refs import WeakRefVariable


class _Tx:
    """The part of a translator that wrapping uses."""

    def __init__(self, dynamic: bool | None = None) -> None:
        policy = DynamicPolicy(dynamic) if dynamic else None
        self.output = OutputGraph(f_globals={}, code_name="rules", dynamic=policy)

    def location(self) -> str:
        return "rules:1"

    def wrap(self, value, source):
        return wrap_value(self, value, source)


class Color(enum.Enum):
    RED = 1


class Level(enum.IntEnum):
    LOW = 1


Point = collections.namedtuple("Point", "x y")


class Identity(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class Plain:
    def method(self):
        return 1


def user_fn(x):
    return x


_LINEAR = nn.Linear(2, 2)
E, ID, L, T, D = "EQUALS_MATCH", "ID_MATCH", "LEN_MATCH", "TYPE_MATCH", "DICT_KEYS"
U = Unsupported
_OD, _OD_VALUE = "OrderedDictVariable", collections.OrderedDict(a=1)
_DEFAULTS, _DEFAULT_DICT = collections.defaultdict(list, {"a": 1}), "DefaultDictVariable"

# name: (value, rule, tracker with a source, its guards, tracker without a source), as the
# ladder of variables/builder.py answered before it became a table.
CASES = {
    "tensor": (torch.randn(2), "tensor", "TensorVariable", ("TENSOR_MATCH",), U),
    "parameter": (nn.Parameter(torch.randn(2)), "tensor", "TensorVariable", ("TENSOR_MATCH",), U),
    "size": (torch.Size([2, 3]), "torch_size", "SizeVariable", (E,), "SizeVariable"),
    "int": (3, "constant", "ConstantVariable", (E,), "ConstantVariable"),
    "dtype": (torch.float32, "constant", "ConstantVariable", (E,), "ConstantVariable"),
    # a container's plain-constant entries are guarded when the trace reads them (lazy.py)
    "const_tuple": ((1, 2), "list_or_tuple", "TupleVariable", (L,), "ConstantVariable"),
    "slice": (slice(1, 2), "constant", "ConstantVariable", (E,), "ConstantVariable"),
    "code": (user_fn.__code__, "code", "ConstantVariable", (ID,), "ConstantVariable"),
    "enum": (Color.RED, "enum", "ConstantVariable", (ID,), "ConstantVariable"),
    "intenum": (Level.LOW, "enum", "ConstantVariable", (ID,), "ConstantVariable"),
    "module": (_LINEAR, "nn_module", "NNModuleVariable", (T,), "NNModuleVariable"),
    "namedtuple": (Point(1, 2), "namedtuple", "ConstructedObjectVariable", (T, E, E), U),
    "list": ([1, 2.0], "list_or_tuple", "ListVariable", (L,), "ListVariable"),
    "tuple": ((1, torch.randn(1)), "list_or_tuple", "TupleVariable", (L, "TENSOR_MATCH"), U),
    "dict": ({"a": 1}, "dict", "ConstDictVariable", (D,), "ConstDictVariable"),
    "defaultdict": (_DEFAULTS, "defaultdict", "DefaultDictVariable", (D, ID), _DEFAULT_DICT),
    "class_key_dict": ({int: 1}, "dict", "ConstDictVariable", (L, ID), "ConstDictVariable"),
    "ndarray": (np.ones(2), "numpy", "NumpyArrayVariable", (T, E, E, E, E), U),
    "np_add": (np.add, "numpy", "NumpyFunctionVariable", (ID,), "NumpyFunctionVariable"),
    "apply": (
        Identity.apply,
        "autograd_function_apply",
        "AutogradFunctionApplyVariable",
        (ID, ID, ID, ID),  # the class, its forward, setup_context and backward
        "AutogradFunctionApplyVariable",
    ),
    "context_exit": (RealContextExit(True), "context_exit", "ContextExitVariable", (T, E), U),
    "math": (math, "python_module", "PythonModuleVariable", (ID,), "PythonModuleVariable"),
    "tensor_add": (
        torch.Tensor.add,
        "tensor_method_descriptor",
        "TensorMethodDescriptorVariable",
        (ID,),
        "TensorMethodDescriptorVariable",
    ),
    "manual_seed": (
        torch.manual_seed,
        "rng_function",
        "RngFunctionVariable",
        (ID,),
        "RngFunctionVariable",
    ),
    "relu": (torch.relu, "torch_function", "TorchFunctionVariable", (ID,), "TorchFunctionVariable"),
    "is_floating_point": (
        torch.is_floating_point,
        "torch_function",
        "TorchFunctionVariable",
        (ID,),
        "TorchFunctionVariable",
    ),
    "autograd_grad": (
        torch.autograd.grad,
        "autograd_call",
        "AutogradCallVariable",
        (ID,),
        "AutogradCallVariable",
    ),
    "sgd": (
        torch.optim.SGD(_LINEAR.parameters(), lr=0.1),
        "optimizer",
        "OptimizerVariable",
        (T,),
        U,
    ),
    "clip": (
        nn.utils.clip_grad_norm_,
        "optimizer",
        "ClipGradNormVariable",
        (ID,),
        "ClipGradNormVariable",
    ),
    "signature": (
        inspect.signature,
        "trace_time_rule_function",
        "BuiltinVariable",
        (ID,),
        "BuiltinVariable",
    ),
    "user_fn": (user_fn, "user_function", "UserFunctionVariable", (ID,), "UserFunctionVariable"),
    "method": (Plain().method, "method", "UserMethodVariable", (T, ID), U),
    "partial": (functools.partial(user_fn, 1), "partial", "PartialVariable", (ID, E, L, D, T), U),
    "reduce": (functools.reduce, "builtin_with_rule", "BuiltinVariable", (ID,), "BuiltinVariable"),
    "sqrt": (math.sqrt, "builtin_function", "BuiltinVariable", (ID,), "BuiltinVariable"),
    "op_add": (operator.add, "builtin_with_rule", "BuiltinVariable", (ID,), "BuiltinVariable"),
    "user_class": (Plain, "class", "TypeVariable", (ID,), "TypeVariable"),
    "environ": (os.environ, "environ", "EnvironVariable", (T,), U),
    "object": (Plain(), "object", "UserDefinedObjectVariable", (T,), U),
    "set": ({1, 2}, "set", "SetVariable", (D,), U),  # of constants: guarded in order
    "object_set": ({Color.RED}, "object", "UserDefinedObjectVariable", (T,), U),
    "ordered_dict": (_OD_VALUE, "ordered_dict", _OD, (D,), _OD),
    # (issue 26: instances of plain list/dict subclasses are their items, as list and dict)
    "list_subclass": (
        type("L", (list,), {})([1]),
        "container_subclass",
        "UserListVariable",
        (L, E),
        U,
    ),
    "dict_subclass": (
        type("M", (dict,), {})(a=1),
        "container_subclass",
        "UserDictVariable",
        (D, E),
        U,
    ),
    "list_subclass_own_getitem": (
        type("G", (list,), {"__getitem__": lambda self, i: 0})([1]),
        "object",
        "UserDefinedObjectVariable",
        (T,),
        U,
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_wrapping_resolves_as_the_ladder_did(name):
    value, rule, sourced, guards, unsourced = CASES[name]
    tx = _Tx()
    found, tracker = resolve_rule(tx, value, LocalSource(name))
    assert (found, type(tracker).__name__) == (rule, sourced)
    assert tuple(g.kind.name for g in tx.output.guards) == guards
    if unsourced is Unsupported:
        with pytest.raises(Unsupported):
            wrap_value(_Tx(), value, None)
    else:
        assert type(wrap_value(_Tx(), value, None)).__name__ == unsourced


def test_a_dynamic_int_is_symbolic_before_it_is_a_constant():
    tx = _Tx(dynamic=True)
    found, tracker = resolve_rule(tx, 3, LocalSource("n"))
    assert (found, type(tracker)) == ("symbolic_int", SymNodeVariable)
    assert [g.kind.name for g in tx.output.guards] == ["TYPE_MATCH"]


def test_every_rule_is_registered_in_its_written_order():
    assert [r.name for r in wrap_rules()] == list(WRAP_ORDER)
    assert list(objects._CONSTRUCTORS) and set(objects._CONSTRUCTORS) == set(
        objects.CONSTRUCT_ORDER
    )


# The order reconstruct.recipe tested tracker classes in before it became a table.
_RECIPE_LADDER = [
    TensorVariable,
    SymNodeVariable,
    SizeVariable,
    DictViewVariable,  # a view of its rebuilt dict, before the lists it subclasses
    UserListVariable,  # list and dict subclass instances, before list and dict
    UserDictVariable,
    BaseListVariable,
    DefaultDictVariable,  # rebuilt with its factory
    ConstDictVariable,
    ConstructedObjectVariable,
    TracedObjectVariable,
    NumpyArrayVariable,
    SetVariable,
    InspectConstantVariable,  # a Signature or Parameter: refused when it holds NOT_KNOWN
    BoundArgumentsVariable,  # BoundArguments(signature, its rebuilt arguments dict)
    CatchWarningsVariable,  # warnings.catch_warnings(record=...), when never entered
    ConstantVariable,
    ExceptionVariable,  # built (not caught) in the trace: cls(*args)
    WeakRefVariable,  # weakref.ref of the rebuilt object
    TypeVariable,  # frame-local classes refused, else source or constant
    NestedUserFunctionVariable,  # made again (without cells)
    UserMethodVariable,  # a bound method at a break: its function bound to the rebuilt owner
    GradModeVariable,  # a grad-mode context object live at a break: a fresh one
    NullContextVariable,  # nullcontext (and a no-op profiler block's) live at a break
    ContextExitVariable,  # a with-block's __exit__ at a break: a user's bound to its object
    LazyIteratorVariable,  # the call its `rebuild` names (iterator_recipes.py)
    ListIteratorVariable,  # iter() over its remaining items, list and tuple iterators only
]


def _subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _subclasses(sub)
    return found


def test_recipe_table_picks_what_the_ladder_picked():
    assert set(RECIPES) == set(_RECIPE_LADDER)
    for cls in _subclasses(VariableTracker):
        ladder = next((k for k in _RECIPE_LADDER if issubclass(cls, k)), None)
        table = next((k for k in cls.__mro__ if k in RECIPES), None)
        assert table is ladder, cls
        assert recipe_rule(cls) is (RECIPES[ladder] if ladder else None)
