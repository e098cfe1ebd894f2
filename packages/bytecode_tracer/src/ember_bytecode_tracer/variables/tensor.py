"""Tensors in the graph: each TensorVariable is an FX node with a fake example value."""

from __future__ import annotations

import operator
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.fx
from torch import nn
from torch.multiprocessing.reductions import StorageWeakRef

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.guards import AttrSource, GuardKind
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import guard, guard_identity, wrap_rule
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.lists import (
    BaseListVariable,
    ListVariable,
    SizeVariable,
    SliceVariable,
    StructSequenceVariable,
    TupleVariable,
    is_struct_sequence,
)
from ember_bytecode_tracer.variables.sym_values import (
    SYM_TYPES,
    SymNodeVariable,
    as_fx_arg,
    wrap_scalar,
)
from ember_bytecode_tracer.variables.tensor_state import input_source, load_tensor_attribute

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator

# Tensor attributes that are plain metadata under static shapes: known at trace time.
STATIC_ATTRIBUTES = {
    "dtype", "device", "ndim", "requires_grad", "is_cuda", "is_sparse", "is_leaf",
    "is_quantized", "is_meta", "layout", "is_nested", "is_mps", "is_cpu", "is_xpu",
}  # fmt: skip
# Methods that read data out of the tensor into Python: a graph break.
DATA_DEPENDENT_METHODS = {
    "item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__", "nonzero_static",
    "data_ptr", "cpu_numpy",
}  # fmt: skip
# Methods that run autograd's engine: a graph break. The graph so far ends there with its
# outputs differentiable (the backend's training path), the engine runs in eager PyTorch,
# and what follows is traced in a resume function.
AUTOGRAD_METHODS = {
    "backward": "Tensor.backward() runs autograd's engine (a graph break)",
    "register_hook": "Tensor.register_hook() inside a traced region",
    # autograd state of the tensor itself, which no graph node keeps (dropped as dead code)
    "retain_grad": "Tensor.retain_grad() inside a traced region",
    "register_post_accumulate_grad_hook": (
        "Tensor.register_post_accumulate_grad_hook() inside a traced region"
    ),
}
STATIC_METHODS = {"size", "dim", "ndimension", "numel", "nelement", "element_size", "stride",
                  "is_contiguous", "is_floating_point", "is_complex", "get_device",
                  "storage_offset"}  # fmt: skip


class TensorVariable(VariableTracker):
    def __init__(self, node: torch.fx.Node, example: torch.Tensor, *, source: Source | None = None):
        super().__init__(source=source)
        self.node = node
        self.example = example

    def python_type(self) -> type:
        # a tensor read from the frame is guarded to its exact class (TENSOR_MATCH): an
        # nn.Parameter is one (isinstance(p, nn.Parameter) in the trace said False)
        known = getattr(self, "tensor_type", None)
        if known is not None:
            return known
        return type(self.example) if not _is_fake(self.example) else torch.Tensor

    def as_python_constant(self) -> Any:
        raise Unsupported("a tensor's value is not known at trace time")

    def truthiness(self, tx: Translator) -> bool:
        numel = self.example.numel()
        if isinstance(numel, int) and numel != 1:  # eager's error, whatever the values
            which = "no values" if numel == 0 else "more than one value"
            raise TracedException(
                RuntimeError, f"Boolean value of Tensor with {which} is ambiguous"
            )
        raise Unsupported("branching on a tensor's value (data-dependent control flow)")

    def var_getattr(self, tx: Translator, name: str) -> VariableTracker:
        if name in ("shape",):
            return SizeVariable(tuple(self.example.shape))
        if name in STATIC_ATTRIBUTES:
            return ConstantVariable(getattr(self.example, name))
        written = load_tensor_attribute(tx, self, name)  # tensor_state.py
        if written is not None:
            return written
        if name == "grad":
            return read_grad(tx, self)
        if name == "grad_fn":
            return _grad_fn(self)
        if name == "__class__":  # its exact class: guarded with the tensor (TENSOR_MATCH)
            return tx.wrap(getattr(self, "tensor_type", None) or self.python_type(), None)
        if name == "data":  # an alias without autograd history: detach, as make_fx has it
            if self.example.layout != torch.strided:
                raise Unsupported("Tensor.data of a sparse tensor inside a traced region")
            alias = TensorMethodVariable(self, "detach").call_function(tx, [], {})
            alias.node.meta["tensor_data"] = True  # leaves the graph as `.data` (recipe_rules)
            tx.output.data_aliases.add(StorageWeakRef(self.example.untyped_storage()))
            return alias
        if name in ("T", "mT", "H", "mH", "real", "imag"):
            return wrap_graph_value(
                tx, *tx.output.create_node("call_function", getattr, (self.node, name), {})
            )
        return TensorMethodVariable(self, name)

    def unpack(self, tx: Translator) -> list[VariableTracker]:
        if self.example.dim() == 0:
            raise Unsupported("iterating over a 0-d tensor")
        return [
            wrap_graph_value(
                tx, *tx.output.create_node("call_function", operator.getitem, (self.node, i), {})
            )
            for i in range(self.example.shape[0])
        ]

    def __repr__(self) -> str:
        return f"TensorVariable({self.node.name}: {tuple(self.example.shape)} {self.example.dtype})"


def _grad_fn(tensor: TensorVariable) -> VariableTracker:
    """`t.grad_fn`: None where no autograd history can exist (a tensor that does not
    require grad; an intermediate whose example has none, e.g. after `detach_()`); the node
    itself is a graph break (an input's history is not part of its guard either)."""
    example = tensor.example
    if not example.requires_grad or (tensor.source is None and example.grad_fn is None):
        return ConstantVariable(None)
    raise Unsupported("Tensor.grad_fn of a tensor with autograd history")


# Methods whose call another module answers, by name (numpy_arrays.py: `t.numpy()` is the
# same node seen as an array): (tx, tensor, args, kwargs) -> tracker, or None to decline.
MethodRule = Callable[["Translator", TensorVariable, list, dict], "VariableTracker | None"]
METHOD_RULES: dict[str, MethodRule] = {}


class TensorMethodVariable(VariableTracker):
    """`tensor.name` before it is called."""

    def __init__(self, tensor: TensorVariable, name: str) -> None:
        super().__init__()
        self.tensor = tensor
        self.name = name

    def call_function(self, tx, args, kwargs):
        name = self.name
        example = self.tensor.example
        rule = METHOD_RULES.get(name)
        if rule is not None:
            result = rule(tx, self.tensor, args, kwargs)
            if result is not None:
                return result
        if name in DATA_DEPENDENT_METHODS:
            raise Unsupported(f"Tensor.{name}() reads tensor data into Python")
        if name in AUTOGRAD_METHODS:
            raise Unsupported(AUTOGRAD_METHODS[name])
        if name == "type" and not args and not kwargs:
            # The type string ("torch.FloatTensor") follows dtype and device, both guarded.
            return ConstantVariable(example.type())
        if name in STATIC_METHODS:
            a = [x.as_python_constant() for x in args]
            k = {n: x.as_python_constant() for n, x in kwargs.items()}
            result = getattr(example, name)(*a, **k)
            return wrap_constant_result(result)
        node_args = (self.tensor.node, *(as_node_arg(tx, a) for a in args))
        node_kwargs = {k: as_node_arg(tx, v) for k, v in kwargs.items()}
        node, value = tx.output.create_node("call_method", name, node_args, node_kwargs)
        return wrap_graph_value(tx, node, value)


class TensorMethodDescriptorVariable(VariableTracker):
    """`torch.Tensor.<name>`, called with the tensor first: the method-call stack form."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def as_python_constant(self) -> Any:
        return getattr(torch.Tensor, self.name)

    def call_function(self, tx, args, kwargs):
        if not args or not isinstance(args[0], TensorVariable):
            raise Unsupported(f"Tensor.{self.name} called on a non-tensor")
        return TensorMethodVariable(args[0], self.name).call_function(tx, args[1:], kwargs)


def read_grad(tx: Translator, tensor: TensorVariable) -> VariableTracker:
    """`tensor.grad` of a tensor read from the frame: a guarded graph input (or None).

    The gradient is read through the tensor's own source (`<source>.grad`), so its presence
    and metadata are guarded like any input. A write made earlier in the trace (an
    optimizer's `zero_grad` setting it to None) is seen through any source that reaches the
    same tensor."""
    output = tx.output
    own = input_source(tx, tensor)  # also the result of an in-place op on an input
    real = output.real_value(own) if own is not None else None
    if real is None:
        raise Unsupported("Tensor.grad of a tensor computed inside the traced region")
    for (source, name), written in output.side_effects.attributes.items():
        if name == "grad" and output.real_value(source) is real:
            return written
    return tx.wrap(real.grad, AttrSource(own, "grad"))


def _is_fake(value: Any) -> bool:
    return type(value).__name__ == "FakeTensor"


def _holds_tensors(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    return isinstance(value, tuple | list) and any(_holds_tensors(v) for v in value)


def wrap_constant_result(result: Any) -> VariableTracker:
    if _holds_tensors(result):  # never let a fake example value pass for a constant
        raise Unsupported(f"a tensor inside a {type(result).__name__} result cannot be traced")
    if isinstance(result, torch.Size):
        return SizeVariable(tuple(result))
    if isinstance(result, tuple):
        return TupleVariable([wrap_constant_result(r) for r in result])
    return ConstantVariable(result)


def as_node_arg(tx: Translator, value: VariableTracker) -> Any:
    """The FX argument for a tracker: a node for tensors, a constant (or nested) otherwise."""
    if isinstance(value, TensorVariable):
        return value.node
    if isinstance(value, SymNodeVariable):  # a symbolic size or int: its graph node
        return as_fx_arg(tx.output, value)
    if isinstance(value, BaseListVariable):
        items = [as_node_arg(tx, v) for v in value.items]
        return list(items) if value.python_type() is list else tuple(items)
    parts = value.parts if isinstance(value, SliceVariable) else ()
    if any(isinstance(p, SymNodeVariable) for p in parts):  # symbolic bounds stay graph values
        return slice(*(as_node_arg(tx, p) for p in parts))
    if value.is_python_constant():
        return value.as_python_constant()
    raise Unsupported(f"{value} cannot be passed to a tensor operation")


def wrap_graph_value(tx: Translator, node: torch.fx.Node, value: Any) -> VariableTracker:
    """Tracker for the result of a graph node: tensors, tuples of tensors, sizes, scalars."""
    if isinstance(value, torch.Tensor):
        return TensorVariable(node, value)
    if isinstance(value, torch.Size):
        return SizeVariable(tuple(value))
    if isinstance(value, SYM_TYPES):  # x.size(0) as a node: a SymInt in the graph
        return wrap_scalar(value, node)
    if isinstance(value, tuple | list):
        items = []
        for i, item in enumerate(value):
            if _holds_tensors(item):  # a tensor, or a nested tuple/list of them
                item_node = tx.output.graph.call_function(operator.getitem, (node, i))
                item_node.meta["example_value"] = item
                items.append(wrap_graph_value(tx, item_node, item))
            else:
                items.append(wrap_constant_result(item))
        if is_struct_sequence(type(value)):
            return StructSequenceVariable(type(value), items)
        return TupleVariable(items) if isinstance(value, tuple) else ListVariable(items)
    if value is None or isinstance(value, bool | int | float | str | torch.dtype | torch.device):
        # A Python value computed from tensors (e.g. torch.is_floating_point): not a tensor.
        return ConstantVariable(value)
    raise Unsupported(f"graph operation returned a {type(value).__name__}")


# ---- wrapping real values (variables/builder.py) ----------------------------------------
_PLAIN_TENSOR_TYPES = (
    torch.Tensor,
    nn.Parameter,
    nn.Buffer if hasattr(nn, "Buffer") else torch.Tensor,
)


@wrap_rule("tensor", types=torch.Tensor)
def _wrap_tensor(tx: Translator, value: torch.Tensor, source: Source | None) -> VariableTracker:
    if source is None:
        raise Unsupported("a tensor created outside the trace without a source")
    if type(value) not in _PLAIN_TENSOR_TYPES:
        raise Unsupported(f"tensor subclass {type(value).__name__}")
    node, fake = tx.output.tensor_input(source, value)
    # Symbolic dims are checked by the shape guards, not exactly (dynamic.py).
    guard(tx, source, GuardKind.TENSOR_MATCH, tx.output.dynamic.tensor_spec(value, fake))
    tracker = TensorVariable(node, fake, source=source)
    tracker.tensor_type = type(value)
    return tracker


def _is_tensor_method_descriptor(tx: Translator, value: Any, source: Source | None) -> bool:
    """A C-implemented method of torch.Tensor, reached unbound (method/wrapper descriptors)."""
    owner = getattr(value, "__objclass__", None)
    return owner in (torch._C.TensorBase, torch.Tensor) and (
        getattr(torch.Tensor, value.__name__, None) is value
    )


@wrap_rule(
    "tensor_method_descriptor",
    types=(types.MethodDescriptorType, types.WrapperDescriptorType),
    when=_is_tensor_method_descriptor,
)
def _wrap_tensor_method(tx: Translator, value: Any, source: Source | None) -> VariableTracker:
    # torch.Tensor.add / Tensor.__getitem__ as a value (e.g. an op handed around): a call
    # with the tensor first is the method call.
    guard_identity(tx, value, source)
    return TensorMethodDescriptorVariable(value.__name__)
