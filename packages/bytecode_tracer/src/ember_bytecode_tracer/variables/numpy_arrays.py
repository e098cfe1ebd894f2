"""NumPy arrays in the trace: each array is a tensor in the graph with NumPy's dtype.

An `np.ndarray` read from the frame becomes a graph input loaded as `torch.from_numpy(a)`
(`NumpyTensorSource`, memory shared as NumPy views share it), guarded by type, dtype,
shape, strides and writeability; its sizes are symbolic where a tensor's would be
(dynamic.py). A read-only array is read through a copy (`NumpyCopySource`), with no write in
its trace. `tensor.numpy()` (a view) and `torch.from_numpy(a)` inside the trace connect the
two worlds. NumPy functions, methods and operators map to torch ops through
`numpy_rules.RULES`, which compute NumPy's result dtype (NumPy's own type resolution, run on
dtypes at trace time) and cast before the op. After the graph, an array result is rebuilt
with `.numpy()` of its output tensor; a NumPy scalar (`np.float32`) where NumPy returns one
(full reductions, 0-d ufunc results, integer indexing).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import AttrSource, Guard, GuardKind, Source
from ember_bytecode_tracer.guards.sources import source_class
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.tensor import METHOD_RULES, TensorVariable

if TYPE_CHECKING:
    import torch.fx

    from ember_bytecode_tracer.variables.base import Translator


@cache
def torch_dtype(dtype: np.dtype) -> torch.dtype:
    try:
        return torch.from_numpy(np.empty((0,), dtype=dtype)).dtype
    except TypeError:
        raise Unsupported(f"NumPy dtype {dtype} has no torch equivalent") from None


@cache
def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    return torch.empty((0,), dtype=dtype).numpy().dtype


@source_class
class NumpyTensorSource(Source):
    """`torch.from_numpy(base)`: the tensor sharing an array's memory (a graph input)."""

    base: Source

    def access(self, base_expr: str) -> str:
        return f"torch.from_numpy({base_expr})"

    def step(self, base_value: Any, scope: Any) -> Any:
        return torch.from_numpy(base_value)


@source_class
class NumpyCopySource(Source):
    """`torch.from_numpy(base.copy())`: a tensor over a copy of a read-only array."""

    base: Source

    def access(self, base_expr: str) -> str:
        return f"torch.from_numpy({base_expr}.copy())"

    def step(self, base_value: Any, scope: Any) -> Any:
        return torch.from_numpy(base_value.copy())


# NumPy's semantics for an array's attributes ("attribute": (tx, array, name)) and items
# ("getitem": (tx, array, key)): registered by numpy_rules.py, which imports this module.
ARRAY_RULES: dict[str, Callable[..., VariableTracker]] = {}


class NumpyArrayVariable(VariableTracker):
    """An ndarray (or, with `scalar`, a NumPy scalar) held as a graph tensor of its dtype."""

    def __init__(
        self,
        node: torch.fx.Node,
        example: torch.Tensor,
        *,
        scalar: bool = False,
        source: Source | None = None,
    ) -> None:
        super().__init__(source=source)
        self.node = node
        self.example = example
        self.scalar = scalar and example.dim() == 0

    @property
    def dtype(self) -> np.dtype:
        return numpy_dtype(self.example.dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        """The sizes as ints, for a rule that computes with them: a symbolic size is
        specialized (its value guarded), a recompile for another size rather than a break."""
        return tuple(int(s) for s in self.example.shape)

    @property
    def ndim(self) -> int:
        return self.example.dim()

    def python_type(self) -> type:
        return self.dtype.type if self.scalar else np.ndarray

    def as_python_constant(self) -> Any:
        raise Unsupported("a NumPy array's values are not known at trace time")

    def truthiness(self, tx: Translator) -> bool:
        raise Unsupported("branching on a NumPy array's value (data-dependent control flow)")

    def var_getattr(self, tx: Translator, name: str) -> VariableTracker:
        return ARRAY_RULES["attribute"](tx, self, name)

    def unpack(self, tx: Translator) -> list[VariableTracker]:
        if not self.shape:
            raise Unsupported("iterating over a 0-d NumPy array")
        getitem = ARRAY_RULES["getitem"]
        return [getitem(tx, self, ConstantVariable(i)) for i in range(self.shape[0])]

    def python_len(self, tx: Translator) -> VariableTracker:
        if not self.ndim:
            raise Unsupported("len() of a 0-d NumPy array")
        return ConstantVariable(self.example.shape[0])  # a symbolic size stays one

    def __repr__(self) -> str:
        kind = "scalar" if self.scalar else "ndarray"
        shape = tuple(self.example.shape)
        return f"NumpyArrayVariable({self.node.name}: {kind} {shape} {self.dtype})"


def wrap_array(tx: Translator, value: np.ndarray, source: Source) -> VariableTracker:
    """An ndarray read from the frame: a graph input, guarded by what the trace relied on."""
    dtype = value.dtype
    if dtype.kind not in "biufc" or not dtype.isnative:
        raise Unsupported(f"a NumPy array of dtype {dtype} (not a native numeric dtype)")
    writeable = bool(value.flags.writeable)
    if writeable and any(s < 0 or s % dtype.itemsize for s in value.strides):
        raise Unsupported("a NumPy array with negative or unaligned strides")
    facts = [
        (source, GuardKind.TYPE_MATCH, np.ndarray),
        (AttrSource(AttrSource(source, "dtype"), "str"), GuardKind.EQUALS_MATCH, dtype.str),
        (AttrSource(AttrSource(source, "flags"), "writeable"), GuardKind.EQUALS_MATCH, writeable),
    ]
    for where, kind, expected in facts:
        tx.output.add_guard(Guard(where, kind, expected, user_location=tx.location()))
    known = _arrays_seen(tx.output)
    seen = known.get(id(value))
    if seen is not None and seen[0] is value:  # the same array reached two ways
        tx.output.add_guard(Guard(source, GuardKind.TENSOR_ALIASING, seen[1].source))
        return seen[1]
    if known:  # distinct arrays traced as distinct: a later call aliasing them retraces
        others = tuple(tracker.source for _, tracker in known.values())
        tx.output.add_guard(Guard(source, GuardKind.NO_TENSOR_ALIASING, others))
    if not writeable:
        tensor_source, tensor, fake = _read_only_input(tx, source, value)
    else:
        tensor_source, tensor = NumpyTensorSource(source), torch.from_numpy(value)
        # Symbolic sizes where the dynamic policy makes a tensor's (dynamic.py): an array's
        # sizes vary between calls as a tensor's do.
        fake = tx.output.dynamic.fake_tensor(tensor_source, tensor)
        _guard_layout(tx, source, value, tensor, fake)
    node = tx.output._new_input(tensor_source, tensor, fake).node
    tracker = NumpyArrayVariable(node, fake, source=source)
    known[id(value)] = (value, tracker)
    return tracker


def _guard_layout(
    tx: Translator, source: Source, value: np.ndarray, tensor: torch.Tensor, fake: torch.Tensor
) -> None:
    """Static sizes: the shape and strides exactly. Symbolic ones: the tensor over the array
    (its rank, static sizes, dtype; torch.from_numpy fails the guard for a layout it
    refuses), the trace's shape guards checking the symbolic dims and strides."""
    if any(isinstance(s, torch.SymInt) for s in fake.shape):
        spec = tx.output.dynamic.tensor_spec(tensor, fake)
        facts = [(NumpyTensorSource(source), GuardKind.TENSOR_MATCH, spec)]
    else:
        facts = [
            (AttrSource(source, "shape"), GuardKind.EQUALS_MATCH, tuple(value.shape)),
            (AttrSource(source, "strides"), GuardKind.EQUALS_MATCH, tuple(value.strides)),
        ]
    for where, kind, expected in facts:
        tx.output.add_guard(Guard(where, kind, expected, user_location=tx.location()))


def _read_only_input(
    tx: Translator, source: Source, value: np.ndarray
) -> tuple[Source, torch.Tensor, torch.Tensor]:
    """A read-only array (`np.broadcast_to`, a read-only buffer): the graph reads a copy
    (torch.from_numpy of the array itself would warn, and share memory eager never lets
    anyone write); a write into it in the trace is refused (eager raises), so the copy is
    only ever read. Static sizes: its shape is guarded, its strides need not be."""
    shape = AttrSource(source, "shape")
    tx.output.add_guard(
        Guard(shape, GuardKind.EQUALS_MATCH, tuple(value.shape), user_location=tx.location())
    )
    tensor_source = NumpyCopySource(source)
    tensor = tensor_source.step(value, None)
    fake = tx.output.fake_mode.from_tensor(tensor, static_shapes=True)
    tx.output.add_read_only(fake)
    return tensor_source, tensor, fake


def _arrays_seen(output: Any) -> dict[int, tuple[np.ndarray, NumpyArrayVariable]]:
    found = getattr(output, "_numpy_arrays", None)
    if found is None:
        found = output._numpy_arrays = {}
    return found


def array_of_tensor(tx: Translator, tensor: Any) -> NumpyArrayVariable:
    """`tensor.numpy()` in the trace: the same node, seen as an array (memory shared)."""
    example = tensor.example
    if example.requires_grad:
        raise Unsupported("Tensor.numpy() on a tensor that requires grad (eager raises)")
    if example.device.type != "cpu" or example.layout != torch.strided:
        raise Unsupported("Tensor.numpy() on a non-CPU or non-strided tensor")
    if example.is_conj() or example.is_neg():
        raise Unsupported("Tensor.numpy() on a tensor with a conjugate/negative bit")
    numpy_dtype(example.dtype)  # raises for dtypes NumPy lacks (bfloat16)
    return NumpyArrayVariable(tensor.node, example)


def is_array_operand(value: VariableTracker) -> bool:
    return isinstance(value, NumpyArrayVariable)


def is_tensor(value: VariableTracker) -> bool:
    return isinstance(value, TensorVariable)


def tensor_from_array(tx: Translator, fn: Any, args, kwargs) -> VariableTracker | None:
    """`torch.from_numpy(a)` / `torch.as_tensor(a)` (the same memory: the same node) and
    `torch.tensor(a)` (a copy) on an array of the trace, `dtype=` (a converted copy where it
    differs) for the last two; None for other arguments."""
    if len(args) != 1 or not isinstance(args[0], NumpyArrayVariable):
        return None
    dtype = kwargs.get("dtype", ConstantVariable(None))
    if set(kwargs) - {"dtype"} or (kwargs and fn is torch.from_numpy):
        return None
    if not dtype.is_python_constant() or not isinstance(dtype.as_python_constant(), _DTYPE_ARG):
        return None
    array, dtype = args[0], dtype.as_python_constant()
    if dtype is not None and dtype != array.example.dtype:  # a new tensor of that dtype
        node, example = tx.output.create_node("call_method", "to", (array.node, dtype), {})
        return TensorVariable(node, example)
    if fn is torch.tensor:
        node, example = tx.output.create_node("call_function", torch.clone, (array.node,), {})
        return TensorVariable(node, example)
    # A new tensor object over the same memory, as eager's: a view (its own example, so
    # that `is` and identity-keyed containers tell the two calls' tensors apart).
    node, example = tx.output.create_node("call_method", "view_as", (array.node, array.node), {})
    return TensorVariable(node, example)


_DTYPE_ARG = (torch.dtype, type(None))


def _tensor_numpy(tx: Translator, tensor: TensorVariable, args, kwargs) -> VariableTracker | None:
    force = kwargs.get("force", args[0] if args else ConstantVariable(False))
    if len(args) + len(kwargs) > 1 or set(kwargs) - {"force"} or not force.is_python_constant():
        return None
    if force.as_python_constant() and tensor.example.requires_grad:
        # numpy(force=True): of the tensor detached (its memory, no autograd)
        tensor = TensorVariable(*tx.output.create_node("call_method", "detach", (tensor.node,), {}))
        return array_of_tensor(tx, tensor)
    array_of_tensor(tx, tensor)  # what eager refuses is refused before a node is added
    # a new array over the same memory, as eager's: a view (its own node)
    view = tx.output.create_node("call_method", "view_as", (tensor.node, tensor.node), {})
    return array_of_tensor(tx, TensorVariable(*view))


METHOD_RULES["numpy"] = _tensor_numpy
