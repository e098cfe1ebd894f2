"""The loop-IR verifier: invariants every lowering result must keep.

Checked: buffer names are unique and every operation's outputs are registered; every load
reads a buffer defined earlier (an input, a constant, or an earlier operation); index
expressions only use the node's own iteration variables (or indirect-index symbols); every
body type-checks under the dtype handler and produces the buffer's dtype; reductions have
reduction loops; sizes are non-negative; layouts have one stride per dim; graph outputs
name known buffers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import VerificationError
from .extern import ExternKernel
from .handlers.dtypes import DtypeHandler
from .handlers.readwrite import ReadWriteHandler
from .indexing import index_vars, is_indirect
from .nodes import ComputedBuffer, ConstantBuffer, InputBuffer, Reduction

if TYPE_CHECKING:
    from .graph import GraphLowering


def verify(lowering: GraphLowering) -> None:
    """Raise VerificationError naming the first broken invariant."""
    defined = {
        name for name, b in lowering.buffers.items() if isinstance(b, (InputBuffer, ConstantBuffer))
    }
    dtypes = {name: b.get_dtype() for name, b in lowering.buffers.items()}
    seen_ops: set[str] = set()
    env = lowering.shape_env
    sizes = frozenset(env.var_to_val) | frozenset(env.unbacked) if env is not None else frozenset()
    for op in lowering.operations:
        if isinstance(op, ExternKernel):
            for arg in op.tensor_args():
                if arg.name not in defined:
                    raise VerificationError(f"{op.name} reads {arg.name} before it is written")
            for out in op.outputs:
                _check_registered(lowering, out.name, seen_ops)
                defined.add(out.name)
            continue
        _check_registered(lowering, op.name, seen_ops)
        _verify_buffer(op, defined, dtypes, sizes)
        defined.add(op.name)
    for spec in lowering.graph_outputs:
        if spec.name is not None and spec.name not in defined:
            raise VerificationError(f"graph output {spec.name} is never written")


def _check_registered(lowering: GraphLowering, name: str, seen: set[str]) -> None:
    if lowering.buffers.get(name) is None:
        raise VerificationError(f"operation output {name} is not a registered buffer")
    if name in seen:
        raise VerificationError(f"buffer {name} is written by two operations")
    seen.add(name)


def _verify_buffer(
    buf: ComputedBuffer, defined: set[str], dtypes: dict, sizes: frozenset = frozenset()
) -> None:
    """``sizes``: the graph's size symbols (kernel arguments, not loop variables)."""
    if buf.data is None:
        raise VerificationError(f"{buf.name} has no computation")
    layout = buf.layout
    if len(layout.size) != len(layout.stride):
        raise VerificationError(
            f"{buf.name}: {len(layout.size)} sizes, {len(layout.stride)} strides"
        )
    for size in [*buf.ranges, *buf.reduction_ranges]:
        if size.is_number and int(size) < 0:
            raise VerificationError(f"{buf.name}: negative loop size {size}")
    if list(buf.ranges) != list(layout.size):
        raise VerificationError(f"{buf.name}: loops {buf.ranges} but layout size {layout.size}")
    if isinstance(buf.data, Reduction) and not buf.reduction_ranges:
        raise VerificationError(f"{buf.name}: a reduction with no reduction loops")
    index = index_vars("i", len(buf.ranges))
    rindex = index_vars("r", len(buf.reduction_ranges))
    allowed = set(index) | set(rindex)
    rw = ReadWriteHandler()
    buf.store_body(rw, index, rindex)
    for name, expr in rw.reads:
        if name not in defined:
            raise VerificationError(f"{buf.name} loads {name}, which is not written before it")
        stray = {s for s in expr.free_symbols if not is_indirect(s)} - allowed - sizes
        if stray:
            raise VerificationError(f"{buf.name} loads {name} at {expr}: unknown vars {stray}")
    if [name for name, _ in rw.writes] != [buf.name]:
        raise VerificationError(f"{buf.name} must store itself exactly once, stores {rw.writes}")
    dtype_pass = DtypeHandler(dtypes)
    try:
        buf.store_body(dtype_pass, index, rindex)
    except VerificationError as exc:
        raise VerificationError(f"{buf.name}: {exc}") from exc
    if dtype_pass.stored.get(buf.name) != buf.get_dtype():
        raise VerificationError(
            f"{buf.name} is {buf.get_dtype()} but its body produces {dtype_pass.stored.get(buf.name)}"
        )
