"""The Triton matmul template: which extern matmuls it can replace, and its kernel source.

A qualifying extern (mm, addmm, bmm over float32/float16/bfloat16 with static sizes and any
strides) becomes a :class:`MatmulSpec`: its operands as (buffer, strides, offset) over the
buffer's storage, so views (a transposed weight) need no copy. The kernel tiles the output
in BLOCK_M x BLOCK_N tiles (programs grouped GROUP_M rows at a time so neighbouring programs
share operand tiles in L2; a second grid axis over the batch), accumulates in float32 over
K in BLOCK_K steps with ``tl.dot`` and hands the accumulator to the epilogue (epilogue.py),
which rounds it to the output dtype, stores it where needed and runs the fused pointwise
ops on it. Sizes and strides are literals of the source (the graph's sizes are static);
the tile sizes are constexpr parameters chosen per launch (template_choice.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ember_inductor_ir import Schedule
from ember_inductor_ir.extern import ExternKernel, TensorArg

from .cache import interpreting
from .heuristics import cdiv, next_power_of_2
from .index_printer import fits_int32

log = logging.getLogger("ember.autotune")

TEMPLATE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class Operand:
    """A matrix operand: element (b, i, j) is at ``offset + b*stride[0] + i*stride[1] +
    j*stride[2]`` of ``buffer``'s data pointer (offset relative to the buffer's own)."""

    buffer: str
    stride: tuple[int, int, int]
    offset: int


@dataclass(frozen=True)
class MatmulSpec:
    kind: str  # the extern's kernel name
    out: str  # the extern's output buffer
    a: Operand  # [batch, m, k]
    b: Operand  # [batch, k, n]
    bias: Operand | None  # [batch, m, n] with broadcast (zero) strides
    batch: int
    m: int
    n: int
    k: int
    dtype: torch.dtype
    out_rank: int  # 2 (mm) or 3 (bmm): the output buffer's rank

    def describe(self) -> str:
        shape = f"{self.m}x{self.k} @ {self.k}x{self.n}"
        if self.out_rank == 3:
            shape = f"{self.batch} x ({shape})"
        return f"{self.kind} {shape} {str(self.dtype).removeprefix('torch.')}"


@dataclass(frozen=True)
class TemplateConfig:
    BLOCK_M: int
    BLOCK_N: int
    BLOCK_K: int
    GROUP_M: int = 8
    num_warps: int = 4
    num_stages: int = 2

    def constexprs(self, spec: MatmulSpec) -> dict[str, int]:
        return {"BLOCK_M": self.BLOCK_M, "BLOCK_N": self.BLOCK_N, "BLOCK_K": self.BLOCK_K,
                "GROUP_M": self.GROUP_M, "EVEN_K": int(spec.k % self.BLOCK_K == 0)}  # fmt: skip

    def grid(self, spec: MatmulSpec) -> tuple[int, int]:
        return (cdiv(spec.m, self.BLOCK_M) * cdiv(spec.n, self.BLOCK_N), spec.batch)

    def describe(self) -> str:
        return (f"BLOCK {self.BLOCK_M}x{self.BLOCK_N}x{self.BLOCK_K} GROUP_M={self.GROUP_M} "
                f"num_warps={self.num_warps} num_stages={self.num_stages}")  # fmt: skip


class NotATemplate(Exception):
    """Why an extern cannot run as the template (logged; the extern stays with aten)."""


_READERS: dict[str, Callable[[ExternKernel, Schedule], tuple]] = {}


def operand_reader(*names: str) -> Callable:
    """Register how to read (a, b, bias) TensorArgs from the args of these externs."""

    def register(fn: Callable) -> Callable:
        for name in names:
            _READERS[name] = fn
        return fn

    return register


@operand_reader("mm", "bmm")
def _product(extern: ExternKernel, sched: Schedule) -> tuple:
    if len(extern.args) != 2 or extern.kwargs:
        raise NotATemplate("unexpected arguments")
    return extern.args[0], extern.args[1], None


@operand_reader("addmm")
def _product_plus_bias(extern: ExternKernel, sched: Schedule) -> tuple:
    if len(extern.args) != 3 or extern.kwargs:
        raise NotATemplate("unexpected arguments")
    return extern.args[1], extern.args[2], extern.args[0]


def _static(values: Any) -> list[int]:
    out = []
    for v in values:
        if not getattr(v, "is_Integer", False) and not isinstance(v, int):
            raise NotATemplate(f"symbolic size or stride {v}")
        out.append(int(v))
    return out


def _operand(arg: Any, sched: Schedule, rank3: list[int]) -> Operand:
    """``arg`` broadcast (right-aligned) to ``rank3`` ([batch, rows, cols])."""
    if not isinstance(arg, TensorArg):
        raise NotATemplate(f"operand {arg!r} is not a tensor")
    base = sched.layout(arg.name)
    layout = arg.view or base
    size, stride = _static(layout.size), _static(layout.stride)
    if len(size) > 3:
        raise NotATemplate(f"operand {arg.name} has rank {len(size)}")
    size, stride = [1] * (3 - len(size)) + size, [0] * (3 - len(stride)) + stride
    full = []
    for n, s, want in zip(size, stride, rank3, strict=True):
        if n != want and n != 1:
            raise NotATemplate(f"operand {arg.name} of size {size} does not fit {rank3}")
        full.append(0 if n == 1 and want != 1 else s)
    offset = _static([layout.offset])[0] - _static([base.offset])[0]
    return Operand(arg.name, (full[0], full[1], full[2]), offset)


def matmul_spec(extern: ExternKernel, sched: Schedule) -> MatmulSpec:
    """The template's view of ``extern``; raises NotATemplate with the reason otherwise."""
    reader = _READERS.get(extern.kernel_name)
    if reader is None or extern.fallback:
        raise NotATemplate(f"{extern.kernel_name} has no template")
    if len(extern.outputs) != 1:
        raise NotATemplate("not one output")
    out = extern.outputs[0]
    a_arg, b_arg, bias_arg = reader(extern, sched)
    out_size = _static(out.layout.size)
    a_layout = (a_arg.view or sched.layout(a_arg.name)) if isinstance(a_arg, TensorArg) else None
    if a_layout is None:
        raise NotATemplate("operand a is not a tensor")
    k = _static(a_layout.size)[-1]
    batch, m, n = [1, *out_size] if len(out_size) == 2 else out_size
    dtype = out.layout.dtype
    if dtype not in TEMPLATE_DTYPES:
        raise NotATemplate(f"dtype {dtype}")
    args = [x for x in (a_arg, b_arg, bias_arg) if x is not None]
    if any(sched.layout(x.name).dtype != dtype for x in args if isinstance(x, TensorArg)):
        raise NotATemplate("operands of mixed dtypes")
    if min(batch, m, n) == 0:
        raise NotATemplate("empty output")
    a = _operand(a_arg, sched, [batch, m, k])
    b = _operand(b_arg, sched, [batch, k, n])
    bias = _operand(bias_arg, sched, [batch, m, n]) if bias_arg is not None else None
    return MatmulSpec(extern.kernel_name, out.name, a, b, bias, batch, m, n, k, dtype,
                      len(out_size))  # fmt: skip


def needs_int64(spec: MatmulSpec, sched: Schedule) -> bool:
    names = [spec.a.buffer, spec.b.buffer, spec.out] + ([spec.bias.buffer] if spec.bias else [])
    sizes = [sched.layout(n).storage_numel() for n in names]
    return not fits_int32(spec.batch * spec.m * spec.n, *sizes)


def template_configs(spec: MatmulSpec, interpreter: bool) -> list[TemplateConfig]:
    """The tile configurations benchmarked (the first is the one used without a benchmark):
    a few common shapes for H100-class GPUs, clamped to the problem; float32 halves BLOCK_K
    (twice the shared memory per element). Under the CPU interpreter one or two small ones."""
    if interpreter:
        table = [(32, 32, 32, 4, 4, 1), (16, 64, 16, 4, 4, 1)]
    else:
        table = [
            (128, 128, 64, 8, 8, 3), (128, 256, 64, 8, 8, 3), (256, 128, 64, 8, 8, 3),
            (64, 128, 64, 8, 4, 4), (128, 64, 64, 8, 4, 4), (64, 64, 64, 8, 4, 4),
            (128, 128, 32, 8, 4, 4), (64, 32, 32, 8, 2, 5), (32, 64, 32, 8, 2, 5),
        ]  # fmt: skip
    out: list[TemplateConfig] = []
    for bm, bn, bk, group, warps, stages in table:
        if spec.dtype == torch.float32 and not interpreter:
            bk = max(16, bk // 2)
        config = TemplateConfig(
            max(16, min(bm, next_power_of_2(spec.m))),
            max(16, min(bn, next_power_of_2(spec.n))),
            max(16, min(bk, next_power_of_2(spec.k))),
            group, warps, stages,
        )  # fmt: skip
        if config not in out:
            out.append(config)
    return out


def allow_tf32() -> bool:
    return bool(torch.backends.cuda.matmul.allow_tf32)


def _dot(spec: MatmulSpec, tf32: bool) -> str:
    if spec.dtype == torch.bfloat16 and interpreting():
        # the CPU interpreter multiplies bfloat16 tiles as their raw bits; widened to float32
        # the products are exact, as in the GPU's bfloat16 MMA with float32 accumulation
        return 'tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")'
    if spec.dtype != torch.float32:
        return "tl.dot(a, b, acc, out_dtype=tl.float32)"
    precision = "tf32" if tf32 else "ieee"
    return f'tl.dot(a, b, acc, input_precision="{precision}", out_dtype=tl.float32)'


def render_template(
    name: str,
    spec: MatmulSpec,
    params: list[str],
    epilogue: list[str],
    *,
    int64: bool,
    tf32: bool,
) -> str:
    """The kernel's source; ``epilogue`` (lines at one indent) stores the results from
    ``acc`` ([BLOCK_M, BLOCK_N] float32) over ``row`` / ``col`` / ``bz`` with the masks
    ``rmask`` / ``cmask`` / ``tmask``."""
    a, b = spec.a, spec.b
    cast = ".to(tl.int64)" if int64 else ""
    batch = "tl.program_id(1)" + cast if spec.batch > 1 else "0"
    args = ", ".join(f"ptr_{p}" for p in params)
    lines = [
        f"# ember matmul template: {spec.describe()}",
        "@triton.jit",
        f"def {name}({args}, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, "
        "BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr):",
        "    pid = tl.program_id(0)",
        f"    bz = {batch}",
        f"    grid_m = tl.cdiv({spec.m}, BLOCK_M)",
        f"    grid_n = tl.cdiv({spec.n}, BLOCK_N)",
        "    width = GROUP_M * grid_n",
        "    first_m = (pid // width) * GROUP_M",
        "    group_rows = tl.minimum(grid_m - first_m, GROUP_M)",
        "    pid_m = first_m + (pid % width) % group_rows",
        "    pid_n = (pid % width) // group_rows",
        f"    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)){cast}",
        f"    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)){cast}",
        f"    offs_k = tl.arange(0, BLOCK_K){cast}",
        "    # rows and columns past the edge read a valid row/column; they are never stored",
        f"    in_m = offs_m % {spec.m}",
        f"    in_n = offs_n % {spec.n}",
        f"    a_ptrs = ptr_{a.buffer} + ({a.offset} + bz * {a.stride[0]} + "
        f"in_m[:, None] * {a.stride[1]} + offs_k[None, :] * {a.stride[2]})",
        f"    b_ptrs = ptr_{b.buffer} + ({b.offset} + bz * {b.stride[0]} + "
        f"offs_k[:, None] * {b.stride[1]} + in_n[None, :] * {b.stride[2]})",
        "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
        f"    for k0 in range(0, {spec.k}, BLOCK_K):",
        "        if EVEN_K:",
        "            a = tl.load(a_ptrs)",
        "            b = tl.load(b_ptrs)",
        "        else:",
        f"            kmask = offs_k < {spec.k} - k0",
        "            a = tl.load(a_ptrs, mask=kmask[None, :], other=0.0)",
        "            b = tl.load(b_ptrs, mask=kmask[:, None], other=0.0)",
        f"        acc = {_dot(spec, tf32)}",
        f"        a_ptrs += BLOCK_K * {a.stride[2]}",
        f"        b_ptrs += BLOCK_K * {b.stride[1]}",
        "    row = offs_m[:, None]",
        "    col = offs_n[None, :]",
        f"    rmask = row < {spec.m}",
        f"    cmask = col < {spec.n}",
        "    tmask = rmask & cmask",
        *epilogue,
    ]
    return "\n".join(lines)
