"""Encode source positions into co_linetable (PEP 626/657 format, same on 3.11 and 3.12).

An entry covers 1-8 code units. Its first byte is 0x80 | code << 3 | (units - 1); the
code picks a form: 15 no location, 14 long (all four fields as varints), 13 line only,
10-12 one line with small columns (line delta = code - 10), 0-9 short (same line, column
< 80, width < 16). Line numbers are deltas from the previous entry's line, starting at
co_firstlineno. Entries and forms are chosen the way CPython's assembler chooses them, so compiled
code round-trips to identical bytes.
"""

from __future__ import annotations

import dis
from collections.abc import Iterable

from .version import LINE_TABLE_MERGES

_NONE, _LONG, _NO_COLUMN, _ONE_LINE = 15, 14, 13, 10
_MAX_UNITS = 8


def _varint(out: bytearray, value: int) -> None:
    # little-endian 6-bit chunks, 0x40 = more follows
    while value >= 64:
        out.append(64 | (value & 63))
        value >>= 6
    out.append(value)


def _signed_varint(out: bytearray, value: int) -> None:
    _varint(out, (-value << 1) | 1 if value < 0 else value << 1)


class _Writer:
    def __init__(self, firstlineno: int) -> None:
        self.out = bytearray()
        self.line = firstlineno

    def entry(self, pos: dis.Positions | None, units: int) -> None:
        while units > _MAX_UNITS:
            self._one(pos, _MAX_UNITS)
            units -= _MAX_UNITS
        if units:
            self._one(pos, units)

    def _first(self, code: int, units: int) -> None:
        self.out.append(0x80 | (code << 3) | (units - 1))

    def _one(self, pos: dis.Positions | None, units: int) -> None:
        if pos is None or pos.lineno is None:
            self._first(_NONE, units)
            return
        line, col, end_col = pos.lineno, pos.col_offset, pos.end_col_offset
        end_line = line if pos.end_lineno is None else pos.end_lineno
        if end_line < line:
            raise ValueError(f"position ends before it starts: {pos}")
        delta = line - self.line
        if col is None or end_col is None:
            if end_line == line:
                self._first(_NO_COLUMN, units)
                _signed_varint(self.out, delta)
                self.line = line
                return
        elif end_line == line:
            if delta == 0 and col < 80 and 0 <= end_col - col < 16:
                self._first(col >> 3, units)
                self.out.append(((col & 7) << 4) | (end_col - col))
                return
            if 0 <= delta < 3 and col < 128 and end_col < 128:
                self._first(_ONE_LINE + delta, units)
                self.out += bytes((col, end_col))
                self.line = line
                return
        self._first(_LONG, units)
        _signed_varint(self.out, delta)
        _varint(self.out, end_line - line)
        _varint(self.out, 0 if col is None else col + 1)
        _varint(self.out, 0 if end_col is None else end_col + 1)
        self.line = line


def _same(a: dis.Positions | None, b: dis.Positions | None) -> bool:
    if a is None or a.lineno is None:
        return b is None or b.lineno is None
    return b is not None and tuple(a) == tuple(b)


def encode_line_table(
    spans: Iterable[tuple[dis.Positions | None, int]],
    firstlineno: int,
    *,
    merge: bool = LINE_TABLE_MERGES,
) -> bytes:
    """`spans`: (positions, code units) per instruction, in layout order. With `merge`
    (CPython 3.12's choice) consecutive instructions at the same position share entries;
    3.11 writes at least one entry per instruction."""
    writer = _Writer(firstlineno)
    current: dis.Positions | None = None
    units = 0
    for pos, size in spans:
        if not merge or not _same(current, pos):
            writer.entry(current, units)
            current, units = pos, 0
        units += size
    writer.entry(current, units)
    return bytes(writer.out)
