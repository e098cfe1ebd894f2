"""What a code generator can do, as data: the capability record the loop IR lowers for, and
the registry code generators fill.

Every lowering choice that depends on the code generator reads a field of its
:class:`Target` (never its name): whether a cat of many inputs or an add of a matmul product
becomes a library call, which library calls write into planned storage, whether graphs with
symbolic sizes are taken, when convolutions run channels-last. Code generators declare their
records beside their op tables and register them here by name and device type (ember_codegen
registers "cpp" for the CPU and "triton" for CUDA when imported); this package imports no
code generator. ``REFERENCE`` is the IR's own: what ``run_scheduled`` executes, used for a
device no code generator has claimed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .channels_last import OFF, ChannelsLastPolicy
from .errors import LoweringError
from .ops import OP_NAMES

if TYPE_CHECKING:
    from .scheduler.combine import CombinePolicy


@dataclass(frozen=True)
class Target:
    """One code generator's capabilities, as the loop IR reads them."""

    #: the name it is registered under (and the name ``compile_graph`` knows it by)
    name: str
    #: the torch device type whose graphs it compiles ("cpu", "cuda"); "" for none
    device_type: str
    #: the ``ops`` of the loop IR (ops.OP_NAMES) its kernels implement
    ops: frozenset[str] = field(repr=False)
    #: ops it lacks, each a function ``(ops, *args) -> value`` over ops it implements
    decompositions: Mapping[str, Callable[..., Any]] = field(default_factory=dict, compare=False)
    #: whether it compiles graphs with symbolic sizes (kernels taking size arguments)
    symbolic_sizes: bool = True
    #: whether its kernels take float scalar arguments (a float ``t.item()`` read on the
    #: host and used as an operand: lowering/scalar_reads.py); int ones are size arguments
    float_scalar_args: bool = False
    #: library prims (extern.OUT_VARIANT_PRIMS) whose results it has written into planned
    #: storage through their ``out=`` variant, rather than returned by the library
    out_variant_prims: frozenset[str] = frozenset()
    #: ``addend + a @ b`` lowered as one addmm (add_folds.py) instead of an add kernel
    fold_matmul_epilogues: bool = False
    #: the matmuls over the steps of one tensor merged into one (matmul_batching.py)
    batch_step_matmuls: bool = False
    #: a cat of at least this many inputs is a library copy (None: always a loop body)
    cat_extern_inputs: int | None = None
    #: which graphs run their 2-d convolutions channels-last (channels_last.py)
    channels_last: ChannelsLastPolicy = OFF
    #: float32 buffers holding only bfloat16/float16 values, read by its loop kernels
    #: only, stored narrow and widened on load (narrow_stores.py); its stores cast to the
    #: buffer's dtype and its loads of a narrow buffer give the narrow dtype
    narrow_stores: bool = False
    #: a convolution's bias added by a loop body (fused into the kernel reading the result)
    #: instead of by the library, which on CUDA adds it in a pass of its own
    conv_bias_in_kernels: bool = False
    #: a pointwise value read by several users is computed once into a buffer when its
    #: body runs more than this many ops a point (graph.py: recompute_cost); cheaper bodies
    #: are recomputed inside each reader
    inline_op_limit: int = 16
    #: what one transcendental op (exp, erf, ...) counts for in that cost. At 16, softmax's
    #: exp(x - max), read by the sum and the division, is computed once: the C++ kernel
    #: keeps it in a per-row scratch.
    transcendental_op_cost: int = 16
    #: large matmuls with a dim that is not a multiple of this many bytes run on zero-padded
    #: operands (matmul_padding.py: cuBLAS's kernels for unaligned sizes); 0: never
    matmul_alignment_bytes: int = 0
    #: runs of small independent loops groups launched as one kernel (scheduler/combine.py);
    #: None: every group its own launch
    combine: CombinePolicy | None = None

    def writes_out(self, prim: str) -> bool:
        """Whether the library call of ``prim`` writes into planned storage (``out=``)."""
        return prim in self.out_variant_prims

    def cat_is_extern(self, inputs: int) -> bool:
        return self.cat_extern_inputs is not None and inputs >= self.cat_extern_inputs

    def missing_ops(self) -> set[str]:
        """The IR's ops it neither implements nor decomposes (empty for a usable target)."""
        return set(OP_NAMES) - self.ops - set(self.decompositions)


#: the torch reference executor (run.py): every op, no library rewrites
REFERENCE = Target(name="reference", device_type="", ops=frozenset(OP_NAMES))

_BY_NAME: dict[str, Target] = {REFERENCE.name: REFERENCE}
_BY_DEVICE: dict[str, Target] = {}


def register_target(target: Target) -> Target:
    """File ``target`` under its name and, for graphs on its device type, as the default."""
    _BY_NAME[target.name] = target
    if target.device_type:
        _BY_DEVICE[target.device_type] = target
    return target


def registered_targets() -> dict[str, Target]:
    return dict(_BY_NAME)


def target_for_device(device_type: str) -> Target:
    """The target registered for ``device_type``, else REFERENCE."""
    return _BY_DEVICE.get(device_type, REFERENCE)


def resolve_target(target: Target | str) -> Target:
    """``target`` itself, or the record registered under that name."""
    if isinstance(target, Target):
        return target
    found = _BY_NAME.get(target)
    if found is None:
        raise LoweringError(
            f"unknown target {target!r}; registered: {', '.join(sorted(_BY_NAME))} (code "
            "generators register theirs on import: import ember_codegen for 'cpp' and 'triton')"
        )
    return found


__all__ = [
    "REFERENCE",
    "Target",
    "register_target",
    "registered_targets",
    "resolve_target",
    "target_for_device",
]
