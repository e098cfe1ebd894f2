"""Kernel kind, block sizes and num_warps from the static sizes of a kernel group.

* ``pointwise``: a 1-D grid over the outer points, ``XBLOCK`` points per program;
* ``tiled``: a pointwise kernel with transposed accesses (tiles.py) over [XBLOCK, RBLOCK]
  tiles: XBLOCK points of the flattened loops without the transposed variable by RBLOCK
  points of it, each access loading along its own grain;
* ``persistent``: a reduction whose whole row fits one block (``RBLOCK`` = next power of
  two of the row, up to PERSISTENT_MAX): the row stays in registers, every segment of the
  group runs straight-line;
* ``looped``: longer rows: each segment loops over the row ``RBLOCK`` at a time with
  lane-wise accumulators, reduced across lanes after the loop. Column rows (the kept
  dimension contiguous) always loop, over tiles whose loads run along the kept dimension:
  short rows over many output points (a pooling window over a channels-last feature map)
  one element at a time (``RBLOCK`` = 1) over ``XBLOCK`` neighbouring points, where a
  persistent [XBLOCK, 16] tile of a 3x3 window left 7 of 16 lanes idle and loaded across
  the grain; other column rows that are not split (a squeeze-excite mean over H x W) over
  [COLUMN_XBLOCK, COLUMN_RBLOCK] tiles;
* ``split``: long rows and too few of them to fill the GPU (a sum of a 16M tensor, the
  per-channel statistics of a batch norm over N, H, W): ``NSPLIT`` programs per row each
  reduce a chunk into a partial, a second kernel combines the partials; about
  SPLIT_MAX_PARTS programs in all. A column
  reduction (columns.py: the kept dimension contiguous, channels-last batch-norm statistics)
  splits whenever its rows are long: each program takes ``XBLOCK`` neighbouring rows over its
  chunk, so its loads are contiguous runs of the kept dimension.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

#: the longest row a persistent reduction keeps in registers
PERSISTENT_MAX = 4096
#: elements of one [XBLOCK, RBLOCK] tile
TILE_MAX = 4096
#: split a reduction when there are at most this many rows (fewer than two programs per SM
#: of an H200 when each row is one program) ...
SPLIT_MAX_ROWS = 256
#: ... and each is at least this long
SPLIT_MIN_ROW = 32768
#: programs per split row: enough (about 8 per SM of an H200) to keep memory busy; a sum
#: of 2^28 bfloat16 values reached 61% of copy bandwidth with 256 programs of 1024-wide loads
SPLIT_MAX_PARTS = 1024
SPLIT_RBLOCK = 2048
#: persistent rows at most SHORT_ROW_MAX long run [SHORT_ROW_TILE // RBLOCK, RBLOCK] tiles
#: of SHORT_ROW_WARPS warps: Swin's softmax over 49 keys ran 19% faster so than as [64, 64]
#: tiles of 8 warps (launch_configs.py), the whole step 13.63 -> 13.29 ms on an H200
#: (bisect_variants.py's short_rows at c2c90c6)
SHORT_ROW_MAX = 64
SHORT_ROW_TILE = 1024
SHORT_ROW_WARPS = 2
POINTWISE_XBLOCK = 1024
#: a tiled pointwise kernel's tile: 64 points along each grain (128 bytes of bfloat16)
TILED_XBLOCK = 64
TILED_RBLOCK = 64
LOOPED_RBLOCK = 1024
#: column reductions split when their rows are at least this long; each program's tile is
#: COLUMN_XBLOCK neighbouring rows (a 256-byte run of float32) by COLUMN_RBLOCK row elements
COLUMN_SPLIT_MIN_ROW = 1024
COLUMN_XBLOCK = 64
COLUMN_RBLOCK = 32
#: a persistent column tile's kept points at least (a 32-byte run of bfloat16)
COLUMN_PERSISTENT_XBLOCK = 16
#: programs a looped column reduction should have at least (about 4 per SM of an H200)
COLUMN_MIN_PROGRAMS = 512
#: column rows up to this long loop element by element over WINDOW_XBLOCK output points,
#: where that leaves at least WINDOW_MIN_PROGRAMS programs (a pooling window over a large
#: feature map); fewer output points (a squeeze-excite mean, 256 x 208 of them over 14 x 14:
#: 104 programs at 512 points each) loop over [COLUMN_XBLOCK, COLUMN_RBLOCK] tiles instead,
#: as do column rows too long for a window and too short to split: a persistent row-major
#: tile would load them across the grain, C elements apart
WINDOW_MAX_ROW = 256
WINDOW_XBLOCK = 512
WINDOW_MIN_PROGRAMS = 1024


@dataclass(frozen=True)
class LaunchConfig:
    XBLOCK: int
    RBLOCK: int = 1
    num_warps: int = 4
    num_stages: int = 1
    #: split reductions: programs per row and the row chunk each one reduces
    NSPLIT: int = 1
    CHUNK: int = 0

    def constexprs(self, reduction: bool) -> dict[str, int]:
        return (
            {"XBLOCK": self.XBLOCK, "RBLOCK": self.RBLOCK} if reduction else {"XBLOCK": self.XBLOCK}
        )

    def describe(self) -> str:
        text = f"XBLOCK={self.XBLOCK} RBLOCK={self.RBLOCK} num_warps={self.num_warps}"
        return text + (f" NSPLIT={self.NSPLIT}" if self.NSPLIT > 1 else "")


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _warps(elements: int) -> int:
    """About 256 elements of a tile per warp, between 1 and 8 warps."""
    return max(1, min(8, next_power_of_2(elements) // 256))


def choose_kind(
    xnumel: int, rnumel: int | None, split_ok: bool, column: bool = False, passes: int = 1
) -> str:
    """``passes``: the loop segments over each row (a softmax's max, then its sum)."""
    if rnumel is None:
        return "pointwise"
    if split_ok and xnumel <= SPLIT_MAX_ROWS and rnumel >= SPLIT_MIN_ROW:
        return "split"
    if split_ok and column and rnumel >= COLUMN_SPLIT_MIN_ROW:
        return "split"
    if column:
        return "persistent" if _column_in_registers(xnumel, rnumel, passes) else "looped"
    return "persistent" if rnumel <= PERSISTENT_MAX else "looped"


def _column_in_registers(xnumel: int, rnumel: int, passes: int) -> bool:
    """A short column row passed over more than once (ConViT's softmax over keys with the
    heads innermost: a max, then exp and sum) is held in a [COLUMN_PERSISTENT_XBLOCK, row]
    tile, loaded once along the kept dim's grain; looped, each pass loaded it again."""
    return (
        passes > 1
        and not _window(xnumel, rnumel)
        and next_power_of_2(rnumel) * COLUMN_PERSISTENT_XBLOCK <= TILE_MAX
    )


def _column_xblock(xnumel: int) -> int:
    """A looped column tile's kept points: COLUMN_XBLOCK, fewer (down to
    COLUMN_PERSISTENT_XBLOCK, a 32-byte run) where that would leave fewer than
    COLUMN_MIN_PROGRAMS programs; its rows get longer instead. XCiT's query and key norms
    over 784 tokens (16 x 768 columns) ran 192 programs of 25 serial steps a pass."""
    xblock = min(COLUMN_XBLOCK, next_power_of_2(xnumel))
    while xblock > COLUMN_PERSISTENT_XBLOCK and cdiv(xnumel, xblock) < COLUMN_MIN_PROGRAMS:
        xblock //= 2
    return xblock


def _window(xnumel: int, rnumel: int) -> bool:
    """Whether a column reduction loops element by element over WINDOW_XBLOCK points."""
    return rnumel <= WINDOW_MAX_ROW and cdiv(xnumel, WINDOW_XBLOCK) >= WINDOW_MIN_PROGRAMS


def default_config(kind: str, xnumel: int, rnumel: int, column: bool = False) -> LaunchConfig:
    if kind == "pointwise":
        xblock = min(POINTWISE_XBLOCK, next_power_of_2(xnumel))
        return LaunchConfig(xblock, num_warps=_warps(xblock))
    if kind == "tiled":
        xblock = min(TILED_XBLOCK, next_power_of_2(xnumel))
        rblock = min(TILED_RBLOCK, next_power_of_2(rnumel))
        return LaunchConfig(xblock, rblock, num_warps=min(4, _warps(xblock * rblock)))
    if kind == "persistent" and not column and rnumel <= SHORT_ROW_MAX:
        rblock = next_power_of_2(rnumel)
        xblock = max(1, min(next_power_of_2(xnumel), SHORT_ROW_TILE // rblock))
        return LaunchConfig(xblock, rblock, num_warps=SHORT_ROW_WARPS)
    if kind == "persistent":
        rblock = next_power_of_2(rnumel)
        xblock = max(1, min(next_power_of_2(xnumel), TILE_MAX // rblock, 64))
        return LaunchConfig(xblock, rblock, num_warps=_warps(xblock * rblock))
    if kind == "looped" and column and _window(xnumel, rnumel):
        xblock = min(WINDOW_XBLOCK, next_power_of_2(xnumel))
        return LaunchConfig(xblock, 1, num_warps=_warps(xblock))
    if kind == "looped" and column:
        xblock = _column_xblock(xnumel)
        rblock = min(COLUMN_XBLOCK * COLUMN_RBLOCK // xblock, next_power_of_2(rnumel))
        return LaunchConfig(xblock, rblock, num_warps=_warps(xblock * rblock))
    if kind == "looped":
        return LaunchConfig(1, LOOPED_RBLOCK, num_warps=4)
    if kind == "split" and column:
        xblock = min(COLUMN_XBLOCK, next_power_of_2(xnumel))
        rblock = COLUMN_RBLOCK
        groups = cdiv(xnumel, xblock)  # programs side by side over the kept dimension
        parts = max(1, min(SPLIT_MAX_PARTS // groups, cdiv(rnumel, rblock)))
        chunk = cdiv(cdiv(rnumel, parts), rblock) * rblock
        parts = cdiv(rnumel, chunk)
        return LaunchConfig(xblock, rblock, num_warps=_warps(xblock * rblock), NSPLIT=parts,
                            CHUNK=chunk)  # fmt: skip
    if kind == "split":
        rblock = SPLIT_RBLOCK
        parts = min(max(2, SPLIT_MAX_PARTS // xnumel), cdiv(rnumel, rblock))
        chunk = cdiv(cdiv(rnumel, parts), rblock) * rblock
        parts = cdiv(rnumel, chunk)
        return LaunchConfig(1, rblock, num_warps=8, NSPLIT=parts, CHUNK=chunk)
    raise ValueError(f"unknown kernel kind {kind!r}")


def split_candidates(config: LaunchConfig) -> list[LaunchConfig]:
    """A split kernel's candidates: its own tiling (the workspace and the finishing kernel
    are sized by its NSPLIT), with other warp counts."""
    return [config, *(replace(config, num_warps=w) for w in (4, 16) if w != config.num_warps)]


def candidate_configs(
    kind: str, xnumel: int, rnumel: int, column: bool = False
) -> list[LaunchConfig]:
    """The small set max-autotune benchmarks (the default first)."""
    base = default_config(kind, xnumel, rnumel, column)
    out = [base]
    if kind == "pointwise":
        for xblock, warps in ((256, 2), (512, 4), (1024, 8), (2048, 8)):
            xblock = min(xblock, next_power_of_2(xnumel))
            out.append(LaunchConfig(xblock, num_warps=warps))
    elif kind == "tiled":
        for xblock, rblock, warps in ((32, 32, 4), (64, 32, 4), (32, 64, 4), (128, 32, 4),
                                      (64, 64, 8)):  # fmt: skip
            xblock = min(xblock, next_power_of_2(xnumel))
            out.append(LaunchConfig(xblock, min(rblock, next_power_of_2(rnumel)), warps))
    elif kind == "persistent":
        for xblock in (1, 2, 4, 8, 16, 32):
            if xblock * base.RBLOCK <= 2 * TILE_MAX and xblock <= next_power_of_2(xnumel):
                for warps in (2, 4, 8):
                    out.append(replace(base, XBLOCK=xblock, num_warps=warps))
    elif kind == "looped" and column and base.RBLOCK > 1:  # column tiles
        for xblock, rblock, warps in ((32, 32, 4), (64, 16, 4), (128, 8, 4), (64, 64, 8)):
            xblock = min(xblock, next_power_of_2(xnumel))
            out.append(LaunchConfig(xblock, min(rblock, next_power_of_2(rnumel)), warps))
    elif kind == "looped" and base.RBLOCK == 1:  # a column window
        for xblock, warps in ((256, 2), (1024, 8)):
            out.append(LaunchConfig(min(xblock, next_power_of_2(xnumel)), 1, warps))
    elif kind == "looped":
        for xblock, rblock, warps in ((1, 2048, 8), (1, 512, 4), (2, 1024, 8), (4, 512, 8)):
            out.append(LaunchConfig(min(xblock, next_power_of_2(xnumel)), rblock, warps))
    elif kind == "split":
        out = split_candidates(base)
    unique: list[LaunchConfig] = []
    for config in out:
        if config not in unique:
            unique.append(config)
    return unique
