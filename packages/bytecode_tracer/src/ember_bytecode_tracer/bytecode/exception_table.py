"""co_exceptiontable bytes <-> entries (same format on 3.11 and 3.12).

Each entry is four varints: start, length and handler offset in code units, then
(depth << 1) | lasti. A varint is big-endian 6-bit chunks with 0x40 meaning "more
follows"; the first byte of an entry also carries 0x80 so the interpreter can bisect.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import NamedTuple


class RawEntry(NamedTuple):
    """One table row, in code units (2 bytes each); `end` is exclusive."""

    start: int
    end: int
    target: int
    depth: int
    lasti: bool


def _write_varint(out: bytearray, value: int, first: bool) -> None:
    if value < 0:
        raise ValueError(f"exception table value must be >= 0, got {value}")
    chunks = [value & 63]
    value >>= 6
    while value:
        chunks.append(value & 63)
        value >>= 6
    chunks.reverse()
    for i, chunk in enumerate(chunks):
        byte = chunk | (64 if i < len(chunks) - 1 else 0)
        if first and i == 0:
            byte |= 128
        out.append(byte)


def encode_exception_table(entries: Iterable[RawEntry]) -> bytes:
    out = bytearray()
    for entry in entries:
        if entry.end <= entry.start:
            raise ValueError(f"empty exception table range {entry}")
        _write_varint(out, entry.start, first=True)
        _write_varint(out, entry.end - entry.start, first=False)
        _write_varint(out, entry.target, first=False)
        _write_varint(out, (entry.depth << 1) | int(entry.lasti), first=False)
    return bytes(out)


def _read_varint(it: Iterator[int]) -> int:
    byte = next(it)
    value = byte & 63
    while byte & 64:
        byte = next(it)
        value = (value << 6) | (byte & 63)
    return value


def parse_exception_table(table: bytes) -> list[RawEntry]:
    entries = []
    it = iter(table)
    while True:
        try:
            start = _read_varint(it)
        except StopIteration:
            return entries
        try:
            length = _read_varint(it)
            target = _read_varint(it)
            depth_lasti = _read_varint(it)
        except StopIteration:
            raise ValueError("truncated exception table") from None
        entries.append(
            RawEntry(start, start + length, target, depth_lasti >> 1, bool(depth_lasti & 1))
        )
