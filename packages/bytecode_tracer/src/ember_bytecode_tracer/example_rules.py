"""Example values computed by a rule instead of by running the op on fake tensors.

The tracer computes each node's example value by calling the op on fake tensors. For a few
ops that is wrong under symbolic sizes: their device code inspects concrete sizes before any
meta kernel runs. `F.scaled_dot_product_attention` on CUDA picks its kernel (cuDNN, flash,
memory-efficient or math) in C++ from the shapes; handed symbolic sizes, that choice turns a
sequence length into a constant (a guard `Eq(s0, 78)`: one graph per length) or fails
("SymIntArrayRef expected to contain only concrete integers").

A rule computes such an example value without specializing, while the graph node stays the
original op (so a backend still runs eager's fused kernel). `rule_for` returns a thunk to run
under the trace's fake mode, or None where the plain call is right (CPU, static sizes).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

log = logging.getLogger("ember.dynamic")

ExampleRule = Callable[[tuple, dict], Callable[[], Any] | None]
_RULES: dict[Any, ExampleRule] = {}


def example_rule(target: Any) -> Callable[[ExampleRule], ExampleRule]:
    def register(rule: ExampleRule) -> ExampleRule:
        _RULES[target] = rule
        return rule

    return register


# Ops whose C++ composite reads concrete sizes on every device, CPU included (F.pad's
# constant_pad_nd): their example values need the Python dispatcher even on CPU fakes.
# Not every CPU op runs through it: that costs ~8% of a tiny GPT-2/BERT trace.
_SIZE_READING_ON_CPU: set[Any] = {F.pad, torch._C._nn.pad, torch.constant_pad_nd}


def dispatch_context(target: Any, fake_args: tuple, fake_kwargs: dict) -> Any:
    """Where an op runs on fakes of symbolic size, aten's composite kernels run through the
    Python dispatcher: C++ composites (on a machine with a GPU, `matmul` on CUDA; on any
    device, the ops of `_SIZE_READING_ON_CPU`) read `tensor.sizes()`, which FakeTensorMode
    answers by `int()` of each size, a guard `Eq(s0, 77)` per dim (one graph per length);
    their Python kernels keep sizes symbolic. AOT's symbolic trace runs every op under the
    same dispatch (`symbolic_dispatch`)."""
    try:
        any_device = target in _SIZE_READING_ON_CPU
    except TypeError:  # an unhashable callable
        any_device = False
    flat, _ = tree_flatten((fake_args, fake_kwargs))
    for value in flat:
        if isinstance(value, torch.SymInt) and not value.node.has_hint():
            # a size read from data (an item()) passed to a C++ composite (interpolate's
            # output size): it has no value to read, its Python kernel keeps it symbolic
            from torch._dispatch.python import enable_python_dispatcher

            return enable_python_dispatcher()
        if (
            isinstance(value, torch.Tensor)
            and (any_device or value.device.type != "cpu")
            and any(isinstance(s, torch.SymInt) for s in value.shape)
        ):
            from torch._dispatch.python import enable_python_dispatcher

            return enable_python_dispatcher()
    return contextlib.nullcontext()


def rule_for(op: str, target: Any, fake_args: tuple, fake_kwargs: dict) -> Callable[[], Any] | None:
    """The thunk computing `target(*fake_args, **fake_kwargs)`'s example value by rule, or
    None. Runs outside the fake mode (a rule may consult aten on static fakes of its own)."""
    if op != "call_function":
        return None
    try:
        rule = _RULES.get(target)
    except TypeError:  # an unhashable callable
        return None
    return rule(fake_args, fake_kwargs) if rule is not None else None


# ---- scaled dot-product attention ------------------------------------------------------

#: F.scaled_dot_product_attention's parameters in positional order
SDPA_PARAMS = (
    "query",
    "key",
    "value",
    "attn_mask",
    "dropout_p",
    "is_causal",
    "scale",
    "enable_gqa",
)
_SDPA_DEFAULTS = {"attn_mask": None, "dropout_p": 0.0, "is_causal": False, "scale": None,
                  "enable_gqa": False}  # fmt: skip

# aten's SDPBackend numbering (torch.nn.attention.SDPBackend)
MATH, FLASH, EFFICIENT, CUDNN = 0, 1, 2, 3


def _bind(args: tuple, kwargs: dict) -> dict[str, Any] | None:
    if len(args) > len(SDPA_PARAMS) or not set(kwargs) <= set(SDPA_PARAMS):
        return None
    bound = dict(_SDPA_DEFAULTS)
    bound.update(zip(SDPA_PARAMS, args, strict=False))
    if set(kwargs) & set(SDPA_PARAMS[: len(args)]):
        return None  # given twice: the plain call raises eager's TypeError
    bound.update(kwargs)
    return bound if all(p in bound for p in SDPA_PARAMS[:3]) else None


def _is_symbolic(t: torch.Tensor) -> bool:
    return any(isinstance(s, torch.SymInt) for s in (*t.shape, *t.stride(), t.storage_offset()))


def _hint(value: Any) -> int | None:
    if isinstance(value, torch.SymInt):
        hint = getattr(value.node, "hint", None)
        return int(hint) if hint is not None else None
    return int(value)


def _same(a: Any, b: Any) -> bool:
    """Equal as written (never a guard): both ints, or SymInts of one expression."""
    if isinstance(a, torch.SymInt) and isinstance(b, torch.SymInt):
        return a.node.expr == b.node.expr
    return type(a) is int and type(b) is int and a == b


def _hints(values: Any) -> list[int] | None:
    out = [_hint(v) for v in values]
    return None if any(v is None for v in out) else out


class SymbolicCudaAttention(NamedTuple):
    """A CUDA `F.scaled_dot_product_attention` call on fakes of symbolic size: its bound
    arguments, the static twins of its tensors at this call's sizes, and the kernel aten
    picks for them."""

    bound: dict[str, Any]
    statics: dict[str, torch.Tensor | None]
    backend: int


def symbolic_cuda_attention(args: tuple, kwargs: dict) -> SymbolicCudaAttention | None:
    """The kernel eager runs for this sdpa call, where the call is on CUDA fakes of symbolic
    size (else None: the plain call chooses as eager does without specializing). Asking aten
    on the symbolic fakes would specialize the sizes; the twins answer at the hints."""
    bound = _bind(args, kwargs)
    if bound is None:
        return None
    q, k, v, mask = (bound[p] for p in ("query", "key", "value", "attn_mask"))
    tensors = [t for t in (q, k, v, mask) if t is not None]
    if not all(isinstance(t, torch.Tensor) for t in (q, k, v, *tensors)):
        return None
    if q.device.type != "cuda" or not any(_is_symbolic(t) for t in tensors):
        return None
    constants = (bound["dropout_p"], bound["is_causal"], bound["scale"], bound["enable_gqa"])
    if not all(c is None or type(c) in (bool, int, float) for c in constants):
        return None
    if torch.is_autocast_enabled("cuda"):
        return None  # eager chooses after autocast's casts; leave that to the plain call
    hinted = [_static_twin(t) if t is not None else None for t in (q, k, v, mask)]
    if any(t is None for t, real in zip(hinted, (q, k, v, mask), strict=True) if real is not None):
        return None  # a size only known at run time
    statics = dict(zip(("query", "key", "value", "attn_mask"), hinted, strict=True))
    try:
        backend = choose_backend(statics, bound)
    except Exception as exc:
        # eager's input checks (or anything else aten's choice raises): the plain call
        # raises it again, as eager would, or decides as it did before this rule
        log.debug("sdpa kernel choice left to the plain call: %s: %s", type(exc).__name__, exc)
        return None
    return SymbolicCudaAttention(bound, statics, backend)


@example_rule(F.scaled_dot_product_attention)
def sdpa_rule(args: tuple, kwargs: dict) -> Callable[[], Any] | None:
    call = symbolic_cuda_attention(args, kwargs)
    if call is None:
        return None
    bound, statics, backend = call
    q, k, v, mask = (bound[p] for p in ("query", "key", "value", "attn_mask"))

    def compute() -> torch.Tensor:
        out = torch.ops.aten._scaled_dot_product_attention_math(
            q, k, v, mask, bound["dropout_p"], bound["is_causal"], None,
            scale=bound["scale"], enable_gqa=bound["enable_gqa"],
        )[0]  # fmt: skip
        strides = sdpa_output_strides(backend, q, statics["query"], out.shape)
        if all(_same(a, b) for a, b in zip(strides, out.stride(), strict=True)):
            return out
        laid_out = torch.empty_strided(out.shape, strides, dtype=out.dtype, device=out.device)
        return laid_out.copy_(out)  # keeps the autograd link to q, k, v

    return compute


# The kernel eager runs at this call's sizes. Kept a module attribute so tests can stand in
# for a GPU's choice.
def choose_backend(statics: dict[str, torch.Tensor | None], bound: dict[str, Any]) -> int:
    """Which kernel aten picks for static twins at this call's sizes: the fused kernel op the
    composite calls (aten's kernel choice reads the device and the twins' concrete sizes;
    asked directly, `torch._fused_sdp_choice` answers from its meta kernel: always math), else
    read off the layout of its output (where the fused layouts coincide, e.g. cuDNN's and the
    memory-efficient kernel's for a (B, L, H, E) query, only the op tells them apart). Runs
    eager's input checks too: an input eager refuses raises here."""
    args = (statics["query"], statics["key"], statics["value"], statics.get("attn_mask"))
    recorder = _KernelRecorder()
    with _static_mode(), recorder:
        out = F.scaled_dot_product_attention(
            *args, dropout_p=bound["dropout_p"], is_causal=bound["is_causal"],
            scale=bound["scale"], enable_gqa=bound["enable_gqa"],
        )  # fmt: skip
    if recorder.kernels:
        return recorder.kernels[0]
    query = statics["query"]
    for backend in (CUDNN, FLASH, EFFICIENT, MATH):
        if sdpa_output_strides(backend, query, query, out.shape) == tuple(out.stride()):
            return backend
    raise NotImplementedError(f"sdpa output strides {out.stride()} match no kernel's layout")


_FUSED_KERNELS = {
    torch.ops.aten._scaled_dot_product_flash_attention: FLASH,
    torch.ops.aten._scaled_dot_product_efficient_attention: EFFICIENT,
    torch.ops.aten._scaled_dot_product_cudnn_attention: CUDNN,
}


class _KernelRecorder(TorchDispatchMode):
    """Notes which fused attention kernel the composite dispatches (math dispatches none)."""

    def __init__(self) -> None:
        super().__init__()
        self.kernels: list[int] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kernel = _FUSED_KERNELS.get(func.overloadpacket)
        if kernel is not None:
            self.kernels.append(kernel)
        return func(*args, **(kwargs or {}))


_static_modes: list[Any] = []


def _static_mode() -> Any:
    """One FakeTensorMode without a ShapeEnv, for the static twins (made on first use)."""
    if not _static_modes:
        from torch._subclasses.fake_tensor import FakeTensorMode

        _static_modes.append(FakeTensorMode())
    return _static_modes[0]


def _static_twin(t: torch.Tensor) -> torch.Tensor | None:
    """A fake of `t`'s device, dtype and layout at the sizes of this call (no symbols)."""
    sizes, strides = _hints(t.shape), _hints(t.stride())
    offset = _hint(t.storage_offset())
    if sizes is None or strides is None or offset is None:
        return None
    meta = torch.empty_strided(sizes, strides, dtype=t.dtype, device="meta")
    if offset:
        meta = meta.as_strided(sizes, strides, offset)
    mode = _static_mode()
    with torch._C._DisableTorchDispatch():
        fake = mode.fake_tensor_converter.from_meta_and_device(mode, meta, t.device)
    if t.requires_grad:
        fake.requires_grad_(True)
    return fake


# ---- the layout each CUDA kernel gives its output ------------------------------------------
# Read from aten's CUDA sources: the math path returns a matmul's contiguous result; the
# memory-efficient kernel writes (B, L, H, E) and returns it transposed; flash writes into
# `empty_like(query.transpose(1, 2))` and cuDNN allocates matching the query: both give the
# query's own strides when it is dense, else a dense tensor in the order of its strides
# (`empty_like` of a strided tensor with gaps keeps its dim order); flash first pads a head dim
# that is not a multiple of 8 (into a contiguous tensor) and slices the output back.


def _dense_strides(sizes: Any, order: list[int]) -> tuple:
    """Strides of a dense tensor whose dims run `order`, innermost first."""
    strides: list[Any] = [0] * len(sizes)
    step: Any = 1
    for d in order:
        strides[d] = step
        step = step * sizes[d]
    return tuple(strides)


def _stride_order(strides: list[int]) -> list[int]:
    """Dims innermost first by stride (a stable sort; a zero stride counts as outermost)."""
    big = max(strides, default=0) + 1
    return sorted(range(len(strides)), key=lambda d: strides[d] if strides[d] else big)


def _dense(sizes: list[int], strides: list[int]) -> bool:
    """Non-overlapping and dense (dims of size 1 do not count), as aten tests it."""
    expected = 1
    for d in sorted((d for d in range(len(sizes)) if sizes[d] != 1), key=lambda d: strides[d]):
        if strides[d] != expected:
            return False
        expected *= sizes[d]
    return True


def sdpa_output_strides(
    backend: int, query: torch.Tensor, static_query: torch.Tensor, shape: Any
) -> tuple:
    """The strides (symbolic where `shape` is) of the output eager's kernel `backend` gives for
    `query` (its layout read from `static_query`, its twin at this call's sizes)."""
    n = len(shape)
    if backend == MATH or n != 4:
        return _dense_strides(shape, list(range(n - 1, -1, -1)))
    if backend == EFFICIENT:
        return _dense_strides(shape, [3, 1, 2, 0])
    sizes, strides = list(static_query.shape), list(static_query.stride())
    same_shape = _same(shape[3], query.shape[3])  # B, H, L are the query's by construction
    if backend == FLASH and sizes[3] % 8:
        padded = (*shape[:3], -(-sizes[3] // 8) * 8)
        return _dense_strides(padded, [3, 2, 1, 0])
    if backend in (FLASH, CUDNN):
        if same_shape and _dense(sizes, strides):
            return tuple(query.stride())  # empty_like keeps them, size-1 dims' included
        return _dense_strides(shape, _stride_order(strides))
    return _dense_strides(shape, [3, 2, 1, 0])
