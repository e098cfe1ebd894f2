"""Vectorizable reduction loops: per-lane float partials, flushed into double lanes.

A scalar ``acc = acc + x`` loop does not vectorize (without -ffast-math the compiler may
not reassociate it), and a double accumulator or a Welford division per element makes
every element cost a latency-bound scalar op. Here the innermost reduction loop runs in
blocks of ``LANES`` independent partials (one per vector lane), so each block is a few
vector instructions:

    for rc in chunks of CHUNK:                 # bounds the float partials' length
        lane partials = 0 (float)
        for rb in blocks of LANES in the chunk:
            for lane in 0..LANES:  body(r = rb + lane); partial[lane] op= value
        wide[lane] op= partial[lane]           # double (sum, Welford) per lane
    tail (r not a whole block): scalar updates into wide[0]
    acc = combine(wide[0..LANES])              # pairwise, in a fixed order: deterministic

Each float partial sums at most CHUNK / LANES values before it is flushed into a double,
so accuracy is that of a double accumulation of short float sums (well inside eager's
tolerance of its own cascade sum). One form per reduction type, keyed by name; a float64
sum (batch-norm statistics in eager's float64) runs in double lanes without float partials
(``sum_f64``, chosen by lane_form).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .index_printer import cpp_index

LANES = 16
#: lanes of a loop that loads 1-byte values (bool masks): with 16, GCC picks 8-byte vectors
#: for the bytes and runs the float work 8 wide; 64 lanes fill a 64-byte vector of bytes and
#: four of floats (a masked softmax ran 2.1x faster)
BYTE_LANES = 64
#: elements of the innermost reduction loop per flush of the float partials
CHUNK = 4096
#: innermost reduction loops shorter than this stay scalar (too few blocks to pay off)
MIN_EXTENT = 2 * LANES


@dataclass(frozen=True)
class LaneForm:
    """C++ text for one reduction type in the lane loop (``n`` is the accumulator's name)."""

    wide: Callable[[str, str, int], list[str]]  # (n, init, lanes) -> declarations before loops
    chunk: Callable[[str, str, int], list[str]]  # (n, init, lanes) -> decls at each chunk start
    block: Callable[[str, int], list[str]]  # (n, lanes) -> statements before a block's lane loop
    update: Callable[[str, str], str]  # (n, value) -> statement inside the lane loop
    flush: Callable[[str, int], str]  # (n, lanes) -> statement per lane ``l`` at chunk end
    tail: Callable[[str, str], str]  # (n, value) -> scalar statement into wide lane 0
    combine: Callable[[str, str], str]  # (n, lane) -> statement: fold wide[lane] into n
    pair: Callable[[str, int], str]  # (n, w) -> statement per lane ``l``: fold lane l + w in
    direct: Callable[[str, str, str], str]  # (n, value, lane) -> update of wide[lane]


LANE_FORMS: dict[str, LaneForm] = {}


def register_lane_form(*names: str) -> Callable[[LaneForm], LaneForm]:
    def register(form: LaneForm) -> LaneForm:
        for name in names:
            LANE_FORMS[name] = form
        return form

    return register


register_lane_form("sum")(
    LaneForm(
        wide=lambda n, init, k: [f"double {n}_w[{k}] = {{}};"],
        chunk=lambda n, init, k: [f"float {n}_l[{k}] = {{}};"],
        block=lambda n, k: [],
        update=lambda n, v: f"{n}_l[lane] = {n}_l[lane] + {v};",
        flush=lambda n, k: f"{n}_w[l] = {n}_w[l] + static_cast<double>({n}_l[l]);",
        tail=lambda n, v: f"{n}_w[0] = {n}_w[0] + static_cast<double>({v});",
        combine=lambda n, i: f"{n} = {n} + {n}_w[{i}];",
        pair=lambda n, w: f"{n}_w[l] = {n}_w[l] + {n}_w[l + {w}];",
        direct=lambda n, v, i: f"{n}_w[{i}] = {n}_w[{i}] + static_cast<double>({v});",
    )
)


# A double sum (float32 values widened by the program, batch-norm statistics in eager's
# float64): double lanes updated directly, no float partials, so every addition is a double
# one as in the scalar loop. Only the order differs: 16 running sums combined pairwise
# instead of one, a difference in the last bits of a double that a float32 result rounded
# from it keeps (both sums are within a few double ulps of the exact one).
def _direct_lanes(
    wide: Callable[[str, str, int], list[str]], op: Callable[[str, str], str]
) -> LaneForm:
    """Lanes that update their wide partials directly with ``op(partial, value)`` (no
    narrow partials, no flushes), combined with the same ``op``."""
    return LaneForm(
        wide=wide,
        chunk=lambda n, init, k: [],
        block=lambda n, k: [],
        update=lambda n, v: f"{n}_w[lane] = {op(f'{n}_w[lane]', v)};",
        flush=lambda n, k: "",
        tail=lambda n, v: f"{n}_w[0] = {op(f'{n}_w[0]', v)};",
        combine=lambda n, i: f"{n} = {op(n, f'{n}_w[{i}]')};",
        pair=lambda n, w: f"{n}_w[l] = {op(f'{n}_w[l]', f'{n}_w[l + {w}]')};",
        direct=lambda n, v, i: f"{n}_w[{i}] = {op(f'{n}_w[{i}]', v)};",
    )


register_lane_form("sum_f64")(
    _direct_lanes(lambda n, init, k: [f"double {n}_w[{k}] = {{}};"], lambda a, b: f"{a} + {b}")
)


def _extreme(fn: str) -> LaneForm:
    # exact in any order: the lanes update the wide partials directly
    return _direct_lanes(
        lambda n, init, k: [
            f"float {n}_w[{k}];",
            f"for (int l = 0; l < {k}; ++l) {n}_w[l] = {init};",
        ],
        lambda a, b: f"ember::{fn}({a}, {b})",
    )


register_lane_form("max")(_extreme("maximum"))
register_lane_form("min")(_extreme("minimum"))

# Welford: every lane of a block has seen the same count, so the division becomes one
# shared reciprocal per block; chunks merge into double Welford lanes.
register_lane_form("welford")(
    LaneForm(
        wide=lambda n, init, k: [f"ember::Welford<double> {n}_w[{k}] = {{}};"],
        chunk=lambda n, init, k: [f"float {n}_m[{k}] = {{}};", f"float {n}_s[{k}] = {{}};"],
        block=lambda n, k: [
            f"const float {n}_inv = 1.0f / static_cast<float>((rb - rc) / {k} + 1);"
        ],
        update=lambda n, v: (
            f"{{ const float d = {v} - {n}_m[lane]; {n}_m[lane] = {n}_m[lane] + d * {n}_inv; "
            f"{n}_s[lane] = {n}_s[lane] + d * ({v} - {n}_m[lane]); }}"
        ),
        flush=lambda n, k: (
            f"{n}_w[l] = ember::welford_combine({n}_w[l], ember::Welford<double>{{"
            f"{n}_m[l], {n}_s[l], static_cast<double>((rc_end - rc) / {k})}});"
        ),
        tail=lambda n, v: f"{n}_w[0] = ember::welford_update({n}_w[0], static_cast<double>({v}));",
        combine=lambda n, i: f"{n} = ember::welford_combine({n}, {n}_w[{i}]);",
        pair=lambda n, w: f"{n}_w[l] = ember::welford_combine({n}_w[l], {n}_w[l + {w}]);",
        direct=lambda n, v, i: (
            f"{n}_w[{i}] = ember::welford_update({n}_w[{i}], static_cast<double>({v}));"
        ),
    )
)


@dataclass
class LaneAcc:
    """One accumulator of a loop segment as the lane emitter needs it; ``form`` keys
    LANE_FORMS (see lane_form), None where no lane form fits its types."""

    name: str
    rtype: str
    init: str
    value: str
    form: str | None = None


#: (reduction type, accumulated dtype, source dtype) -> lane form, for what is not float32
_WIDE_FORMS = {("sum", torch.float64, torch.float64): "sum_f64"}


def lane_form(rtype: str, dtype: torch.dtype, src_dtype: torch.dtype) -> str | None:
    """The lane form of a reduction: float32 ones by type, a float64 sum in double lanes."""
    if dtype == torch.float32 and src_dtype == torch.float32:
        return rtype if rtype in LANE_FORMS else None
    return _WIDE_FORMS.get((rtype, dtype, src_dtype))


def lane_count(extent: int, loads_bytes: bool) -> int:
    """Lanes of a segment's lane loop: BYTE_LANES when it loads 1-byte values and the
    loop is long enough for two blocks of them, else LANES."""
    return BYTE_LANES if loads_bytes and extent >= 2 * BYTE_LANES else LANES


def lanes_apply(
    accs: list[LaneAcc], dtypes: list[tuple[torch.dtype, torch.dtype]], extent: int
) -> bool:
    """Whether a segment's reductions can run in lanes: float32 sum/max/min/welford and
    float64 sums (lane_form)."""
    if not accs or extent < MIN_EXTENT:
        return False
    return all(lane_form(a.rtype, d, s) is not None for a, (d, s) in zip(accs, dtypes, strict=True))


def lane_loops(
    accs: list[LaneAcc],
    outer_heads: list[str],
    var: str,
    extent: Any,
    body: list[str],
    marker: Callable[[str], str],
    split: bool = False,
    lanes: int = LANES,
) -> list[str]:
    """The segment's loop nest (without prologue/epilogue) in lane form.

    ``outer_heads`` are the ``for`` lines of the reduction loops outside the innermost one;
    ``body`` is the innermost body with one ``marker(name)`` line per accumulator update.
    ``split``: inside an OpenMP team, the outermost reduction loop is shared out (the chunk
    loop when there is only the one), each thread folding its share into its own lanes;
    the caller merges the threads' scalar accumulators. ``lanes``: see lane_count.
    """
    if isinstance(extent, int):
        full = extent - extent % lanes
        full_text, extent_text, tail = str(full), str(extent), full < extent
    else:  # a symbolic length (a kernel argument): whole blocks and the tail at run time
        extent_text = cpp_index(extent)
        full_text = f"({extent_text} - {extent_text} % {lanes})"
        tail = True
    lines: list[str] = []
    for acc in accs:
        lines += LANE_FORMS[acc.form].wide(acc.name, acc.init, lanes)
    depth = len(outer_heads)
    if split and depth:
        lines.append("#pragma omp for schedule(static) nowait")
    lines += ["  " * k + head for k, head in enumerate(outer_heads)]
    pad = "  " * depth

    def with_updates(update: Callable[[LaneAcc], str], indent: str) -> list[str]:
        out = []
        for line in body:
            for acc in accs:
                if marker(acc.name) in line:
                    line = line.replace(marker(acc.name), update(acc))
            out.append(indent + line)
        return out

    if split and not depth:
        lines.append("#pragma omp for schedule(static) nowait")
    lines.append(f"{pad}for (int64_t rc = 0; rc < {full_text}; rc += {CHUNK}) {{")
    lines.append(
        f"{pad}  const int64_t rc_end = rc + {CHUNK} < {full_text} ? rc + {CHUNK} : {full_text};"
    )
    for acc in accs:
        chunk = LANE_FORMS[acc.form].chunk(acc.name, acc.init, lanes)
        lines += [f"{pad}  {text}" for text in chunk]
    lines.append(f"{pad}  for (int64_t rb = rc; rb < rc_end; rb += {lanes}) {{")
    for acc in accs:
        lines += [f"{pad}    {text}" for text in LANE_FORMS[acc.form].block(acc.name, lanes)]
    # without the pragma GCC unrolls the lane loop and vectorizes the block loop with
    # strided gathers instead (measured: 2.7x slower softmax)
    lines.append(f"{pad}    #pragma omp simd")
    lines.append(f"{pad}    for (int64_t lane = 0; lane < {lanes}; ++lane) {{")
    lines.append(f"{pad}      const int64_t {var} = rb + lane;")
    lines += with_updates(lambda a: LANE_FORMS[a.form].update(a.name, a.value), pad + "      ")
    lines += [f"{pad}    }}", f"{pad}  }}"]
    flushes = [LANE_FORMS[a.form].flush(a.name, lanes) for a in accs]
    flushes = [f for f in flushes if f]
    if flushes:
        lines.append(f"{pad}  for (int l = 0; l < {lanes}; ++l) {{")
        lines += [f"{pad}    {f}" for f in flushes]
        lines.append(f"{pad}  }}")
    lines.append(f"{pad}}}")
    if tail:
        guard = "if (tid == 0) " if split and not depth else ""  # the tail once, not per thread
        lines.append(
            f"{pad}{guard}for (int64_t {var} = {full_text}; {var} < {extent_text}; ++{var}) {{"
        )
        lines += with_updates(lambda a: LANE_FORMS[a.form].tail(a.name, a.value), pad + "  ")
        lines.append(f"{pad}}}")
    for k in reversed(range(depth)):
        lines.append("  " * k + "}")
    lines += combine_lanes(accs, lanes)
    return lines


def combine_lanes(accs: list[LaneAcc], lanes: int) -> list[str]:
    """Fold the wide lanes into each scalar accumulator pairwise (lane l takes lane l + w,
    w halving): log2(lanes) vector steps instead of a serial chain of ``lanes`` dependent
    ops, which cost as much as the loop itself on a 128-wide softmax row. Fixed order."""
    lines: list[str] = []
    width = lanes // 2
    while width >= 1:
        lines.append("#pragma omp simd")
        lines.append(f"for (int l = 0; l < {width}; ++l) {{")
        lines += [f"  {LANE_FORMS[a.form].pair(a.name, width)}" for a in accs]
        lines.append("}")
        width //= 2
    lines += [LANE_FORMS[a.form].combine(a.name, "0") for a in accs]
    return lines
