"""Mapping between an instruction's semantic `argval` and its raw oparg.

`CodeTables` holds the co_consts / co_names / localsplus tables of the code object being
built and grows them when an instruction needs a constant, name or local they lack.
"""

from __future__ import annotations

import math
import types
from typing import Any

from .instruction import UNSET, Instruction, takes_plain_arg
from .version import (
    COMPARE_OPS,
    CONST_OPS,
    FREE_OPS,
    LOCAL_OPS,
    NAME_OPS,
    NAME_SHIFT,
    NO_ARG_OPS,
    decode_compare,
    encode_compare,
    localsplus_names,
)

MAX_ARG = 0xFFFF_FFFF  # four bytes: at most three EXTENDED_ARG prefixes


def _const_key(value: Any) -> Any:
    """Equal keys <=> CPython would merge the constants (cf. _PyCode_ConstantKey): 1, 1.0
    and True stay distinct, so do 0.0 and -0.0; other objects merge only with themselves."""
    kind = type(value)
    if kind is float:
        if math.isnan(value):
            return ("id", id(value))
        return (kind, value, math.copysign(1.0, value))
    if kind is complex:
        return (kind, _const_key(value.real), _const_key(value.imag))
    if kind is tuple:
        return (kind, tuple(_const_key(item) for item in value))
    if kind is frozenset:
        return (kind, frozenset(_const_key(item) for item in value))
    if kind in (int, bool, str, bytes, types.NoneType, types.EllipsisType):
        return (kind, value)
    return ("id", id(value))


def _describe(inst: Instruction) -> str:
    where = f" at offset {inst.offset}" if inst.offset is not None else ""
    return f"{inst.opname}{where} (argval={inst.argval!r}, arg={inst.arg!r})"


class CodeTables:
    """The name and constant tables of one code object under construction."""

    def __init__(
        self,
        consts: tuple[Any, ...],
        names: tuple[str, ...],
        varnames: tuple[str, ...],
        cellvars: tuple[str, ...],
        freevars: tuple[str, ...],
    ) -> None:
        self.consts = list(consts)
        self.names = list(names)
        self.varnames = list(varnames)
        self.cellvars = tuple(cellvars)
        self.freevars = tuple(freevars)
        self._const_index: dict[Any, int] = {}
        for i, value in enumerate(self.consts):
            self._const_index.setdefault(_const_key(value), i)
        self._name_index = {name: i for i, name in reversed(list(enumerate(self.names)))}
        self._localsplus: list[str] | None = None
        self._local_index: dict[str, int] = {}

    # -- constants and names: appending never moves an existing index
    def const_index(self, value: Any, hint: int | None) -> int:
        if hint is not None and 0 <= hint < len(self.consts) and self.consts[hint] is value:
            return hint
        key = _const_key(value)
        index = self._const_index.get(key)
        if index is None:
            index = len(self.consts)
            self.consts.append(value)
            self._const_index[key] = index
        return index

    def name_index(self, name: str, hint: int | None) -> int:
        if hint is not None and 0 <= hint < len(self.names) and self.names[hint] == name:
            return hint
        index = self._name_index.get(name)
        if index is None:
            index = len(self.names)
            self.names.append(name)
            self._name_index[name] = index
        return index

    # -- fast slots: a new local shifts every cell and free index, so locals are collected
    # first (add_local) and indices handed out only after freeze_locals
    def add_local(self, name: str) -> None:
        assert self._localsplus is None, "locals are frozen"
        if name not in self.varnames and name not in self.cellvars and name not in self.freevars:
            self.varnames.append(name)

    def freeze_locals(self) -> None:
        self._localsplus = localsplus_names(tuple(self.varnames), self.cellvars, self.freevars)
        for i, name in reversed(list(enumerate(self._localsplus))):
            self._local_index[name] = i

    @property
    def localsplus(self) -> list[str]:
        assert self._localsplus is not None, "call freeze_locals first"
        return self._localsplus

    def size_for(self, opname: str) -> int:
        """Length of the table an opcode's raw oparg indexes (compare ops: cmp_op)."""
        if opname in CONST_OPS:
            return len(self.consts)
        if opname in NAME_OPS:
            return len(self.names)
        if opname in COMPARE_OPS:
            return 1 << 32  # any oparg decodes; flag bits are opaque
        return len(self.localsplus)

    def local_index(self, name: str, hint: int | None) -> int | None:
        slots = self.localsplus
        if hint is not None and 0 <= hint < len(slots) and slots[hint] == name:
            return hint
        return self._local_index.get(name)


def check_name(inst: Instruction) -> str:
    if not isinstance(inst.argval, str):
        raise TypeError(f"{_describe(inst)}: argval must be a name (str)")
    return inst.argval


def collect_locals(inst: Instruction, tables: CodeTables) -> None:
    """First pass: a LOAD_FAST/STORE_FAST of an unknown name declares a new local."""
    if inst.opname in LOCAL_OPS and inst.argval is not UNSET:
        tables.add_local(check_name(inst))


def encode_arg(inst: Instruction, tables: CodeTables) -> int:
    """The oparg of a non-jump instruction, growing `tables` as needed."""
    opname, argval, hint = inst.opname, inst.argval, inst.arg
    if hint is not None and (not isinstance(hint, int) or hint < 0):
        raise TypeError(f"{_describe(inst)}: arg must be a non-negative int")
    if opname in NO_ARG_OPS:
        return hint or 0
    if takes_plain_arg(opname):
        return _plain_arg(inst)
    if argval is UNSET:
        # raw oparg against the final tables (e.g. create_instruction("LOAD_FAST", arg=0))
        if hint is None:
            raise ValueError(f"{_describe(inst)}: needs an argval (or a raw arg)")
        if hint >> NAME_SHIFT.get(opname, 0) >= tables.size_for(opname):
            raise ValueError(f"{_describe(inst)}: raw arg is out of range for the code's tables")
        return _checked(inst, hint)
    if opname in CONST_OPS:
        if opname == "KW_NAMES" and not (
            isinstance(argval, tuple) and all(isinstance(n, str) for n in argval)
        ):
            raise TypeError(f"{_describe(inst)}: KW_NAMES argval must be a tuple of str")
        return _checked(inst, tables.const_index(argval, hint))
    if opname in NAME_OPS:
        name = check_name(inst)
        shift = NAME_SHIFT.get(opname, 0)
        index = tables.name_index(name, None if hint is None else hint >> shift)
        flags = 0
        if shift:
            flags = int(inst.push_null) | (int(inst.super_two_args) << 1 if shift == 2 else 0)
        return _checked(inst, (index << shift) | flags)
    if opname in LOCAL_OPS or opname in FREE_OPS:
        name = check_name(inst)
        index = tables.local_index(name, hint)
        is_cell = name in tables.cellvars or name in tables.freevars
        if index is None or (opname in FREE_OPS and not is_cell):
            raise ValueError(
                f"{_describe(inst)}: {argval!r} is not a cell or free variable of the code "
                f"(cellvars={tables.cellvars}, freevars={tables.freevars})"
            )
        return _checked(inst, index)
    if opname in COMPARE_OPS:
        if hint is not None and _decodes_to_compare(hint, argval):
            return _checked(inst, hint)
        try:
            return encode_compare(argval)
        except ValueError:
            raise ValueError(f"{_describe(inst)}: unknown comparison {argval!r}") from None
    raise AssertionError(f"unhandled opcode kind: {opname}")


def _decodes_to_compare(arg: int, op: Any) -> bool:
    try:
        return decode_compare(arg) == op
    except IndexError:
        return False


def _plain_arg(inst: Instruction) -> int:
    arg, argval = inst.arg, inst.argval
    if argval is not UNSET and argval is not None:
        if not isinstance(argval, int) or isinstance(argval, bool):
            raise TypeError(f"{_describe(inst)}: argval must be an int for {inst.opname}")
        if arg is not None and arg != argval:
            raise ValueError(f"{_describe(inst)}: arg and argval disagree")
        arg = argval
    if arg is None:
        raise ValueError(f"{_describe(inst)}: {inst.opname} needs an integer argument")
    return _checked(inst, arg)


def _checked(inst: Instruction, arg: int) -> int:
    if not 0 <= arg <= MAX_ARG:
        raise ValueError(f"{_describe(inst)}: oparg {arg} does not fit in 32 bits")
    return arg


def decode_argval(inst: Instruction, arg: int, code: types.CodeType, slots: list[str]) -> None:
    """Fill `argval` (and flag fields) of a freshly decoded non-jump instruction."""
    opname = inst.opname
    if opname in CONST_OPS:
        inst.argval = code.co_consts[arg]
    elif opname in NAME_OPS:
        shift = NAME_SHIFT.get(opname, 0)
        inst.argval = code.co_names[arg >> shift]
        inst.push_null = bool(shift and arg & 1)
        inst.super_two_args = bool(shift == 2 and arg & 2)
    elif opname in LOCAL_OPS or opname in FREE_OPS:
        inst.argval = slots[arg]
    elif opname in COMPARE_OPS:
        inst.argval = decode_compare(arg)
    elif opname in NO_ARG_OPS:
        inst.argval = None
    else:
        inst.argval = arg
