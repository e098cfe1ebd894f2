"""Native guards: a planned guard set as an `ember_frame_hook.GuardProgram`, run in C.

The generated Python guard (compile.py) stays the reference: it is what logs show, what
`failure_reason` explains, and what any guard this module cannot translate falls back
to. Here each guard becomes a few register-machine instructions (guard_program.c in
ember_frame_hook documents them); every instruction does what the Python expression of
the same guard does, exceptions included, so the two answer alike on every input.

Sources get one register each, loaded on first use in the planned order (so a base's
type check runs before reads through it, as in the Python guard), reading the same
physical paths (module_paths). A tensor match is one call of the C++ check where that is
built (native_tensor.py), else attribute reads and comparisons. Guards of kinds with no translation run as one generated
Python function called from the program (`CHECK_CALL`), after everything else.

`EMBER_NATIVE_GUARDS` picks the mode: `1` (default) native, `0` the Python guard only,
`verify` both on every call, raising `GuardMismatch` when they disagree (for tests).
"""

from __future__ import annotations

import collections
import dataclasses
import os
from collections.abc import Callable
from typing import Any

import torch

import ember_bytecode_tracer.guards.native_tensor as native_tensor
import ember_frame_hook as fh
from ember_bytecode_tracer.guards.checks import (
    _SINGLETON_TYPES,
    MODULE_STORAGE,
    _contiguity_decides_strides,
)
from ember_bytecode_tracer.guards.constants import needs_slow_equal, strict_equal
from ember_bytecode_tracer.guards.guard import Guard, GuardKind
from ember_bytecode_tracer.guards.sources import (
    AttrSource,
    BuiltinSource,
    DictKeysSource,
    DictValuesSource,
    GenericAttrSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    MethodCallSource,
    Source,
    TorchStateSource,
    TypeSource,
    torch_state_path,
)
from ember_bytecode_tracer.guards.tensor_spec import DYNAMIC_MIN_SIZE, TensorSpec
from ember_bytecode_tracer.guards.weak_pins import is_ref_of, type_is_ref_of

Instruction = tuple[str, int, int, Any]  # (opname, dst, src, arg)
_L, _G, _B = 0, 1, 2  # registers holding the frame's namespaces
_ROOTS = {LocalSource: _L, GlobalSource: _G, BuiltinSource: _B}
MODES = ("0", "1", "verify")
_mode = os.environ.get("EMBER_NATIVE_GUARDS", "1")


class GuardMismatch(AssertionError):
    """verify mode: the native and the Python guard answered differently."""


def native_mode() -> str:
    return _mode


def set_native_mode(mode: str) -> str:
    """Set the mode for guards compiled from now on ('0', '1', 'verify'); returns the old."""
    global _mode
    if mode not in MODES:
        raise ValueError(f"native guard mode must be one of {MODES}, got {mode!r}")
    old, _mode = _mode, mode
    return old


@dataclasses.dataclass(frozen=True)
class KnownType:
    """`type(x)` where a TYPE_MATCH guard of the same program says it is `cls`: the class
    itself, so that a class-level guard read through many instances (each Conv2d's
    `type(m).forward.__globals__['F']`) is loaded and checked once. The guard set is a
    conjunction, so if `x`'s type is not `cls` the program fails on that guard anyway."""

    cls: type
    base = None


class Assembler:
    """Builds one program: registers for sources, instructions for guards."""

    def __init__(self, physical: Callable[[Source], Source]) -> None:
        self.physical = physical
        self.code: list[Instruction] = []
        self.nregs = 3
        self._regs: dict[Any, int] = {}
        self._scratch: int | None = None
        self.known_types: dict[Source, type] = {}  # physical source -> its checked class
        self._checked: set[tuple[str, int, int]] = set()

    def emit(self, op: str, dst: int, src: int, arg: Any = None) -> None:
        self.code.append((op, dst, src, arg))

    def check(self, op: str, src: int, arg: Any = None) -> None:
        """A check, once: the same test of the same register (not the scratch one, which
        holds a new value each time) with the same argument object is emitted once."""
        if src != self._scratch:
            key = (op, src, id(arg))
            if key in self._checked:
                return
            self._checked.add(key)
        self.emit(op, 0, src, arg)

    def new_reg(self) -> int:
        self.nregs += 1
        return self.nregs - 1

    def scratch(self) -> int:
        """A register for a value read once (a tensor's dtype), overwritten freely."""
        if self._scratch is None:
            self._scratch = self.new_reg()
        return self._scratch

    def module_absent(self, source: Source) -> bool:
        test = getattr(self.physical, "module_absent", None)
        return test is not None and test(source)

    def value(self, source: Source) -> int:
        """The register holding the value the guard reads for `source` (physical path)."""
        return self._reg(self._canonical(self.physical(source)))

    def _canonical(self, source: Source) -> Any:
        """`source` with each `type(x)` of a checked class replaced by the class."""
        if isinstance(source, TypeSource) and source.base in self.known_types:
            return KnownType(self.known_types[source.base])
        base = source.base
        if base is None:
            return source
        canonical = self._canonical(base)
        return source if canonical is base else dataclasses.replace(source, base=canonical)

    def _reg(self, source: Source) -> int:
        if source in self._regs:
            return self._regs[source]
        reg = _LOADERS[type(source)](self, source)  # translatable() checked the type
        self._regs[source] = reg
        return reg

    def load(self, op: str, src: int, arg: Any = None) -> int:
        dst = self.new_reg()
        self.emit(op, dst, src, arg)
        return dst


def _load_root(asm: Assembler, source: Source) -> int:
    return asm.load("LOAD_ITEM", _ROOTS[type(source)], source.name)  # type: ignore[attr-defined]


def _load_torch_state(asm: Assembler, source: TorchStateSource) -> int:
    # `torch.<path>(arg)`, reading each attribute on every call as the Python guard does
    fn = asm._regs.get(("torch",))
    if fn is None:
        fn = asm._regs[("torch",)] = asm.load("LOAD_CONST", -1, torch)
    for part in torch_state_path(source.name).split("."):
        fn = asm.load("LOAD_ATTR", fn, part)
    return asm.load("CALL", fn, () if source.arg is None else (source.arg,))


_LOADERS: dict[type, Callable[[Assembler, Any], int]] = {
    LocalSource: _load_root,
    GlobalSource: _load_root,
    BuiltinSource: _load_root,
    TorchStateSource: _load_torch_state,
    AttrSource: lambda asm, s: asm.load("LOAD_ATTR", asm._reg(s.base), s.attr),
    GenericAttrSource: lambda asm, s: asm.load("LOAD_GENERIC_ATTR", asm._reg(s.base), s.attr),
    ItemSource: lambda asm, s: asm.load("LOAD_ITEM", asm._reg(s.base), s.key),
    TypeSource: lambda asm, s: asm.load("LOAD_TYPE", asm._reg(s.base)),
    KnownType: lambda asm, s: asm.load("LOAD_CONST", -1, s.cls),
    MethodCallSource: lambda asm, s: asm.load(
        "CALL", asm.load("LOAD_ATTR", asm._reg(s.base), s.method), ()
    ),
    DictKeysSource: lambda asm, s: asm.load("LOAD_LIST", asm._reg(s.base)),
    DictValuesSource: lambda asm, s: asm.load("LOAD_VALUES", asm._reg(s.base)),
}

# ---- one translation per guard kind (mirrors checks.py's emitters) ------------------

Translator = Callable[[Guard, Assembler], None]
TRANSLATORS: dict[GuardKind, Translator] = {}


def translator(kind: GuardKind) -> Callable[[Translator], Translator]:
    def register(fn: Translator) -> Translator:
        TRANSLATORS[kind] = fn
        return fn

    return register


@translator(GuardKind.TYPE_MATCH)
def _type_match(guard: Guard, asm: Assembler) -> None:
    ref = guard.weak_ref()  # a class that may die: compared through its weak reference
    if ref is not None:
        asm.check("CHECK_CALL", asm.value(guard.source), (type_is_ref_of, (ref,)))
    else:
        asm.check("CHECK_TYPE", asm.value(guard.source), guard.expected)


@translator(GuardKind.ID_MATCH)
def _id_match(guard: Guard, asm: Assembler) -> None:
    ref = guard.weak_ref()  # an object that may die: compared through its weak reference
    if ref is not None:
        asm.check("CHECK_CALL", asm.value(guard.source), (is_ref_of, (ref,)))
    else:
        asm.check("CHECK_IS", asm.value(guard.source), guard.expected)


@translator(GuardKind.NONE_MATCH)
def _none_match(guard: Guard, asm: Assembler) -> None:
    asm.check("CHECK_IS", asm.value(guard.source), None)


@translator(GuardKind.NOT_NONE)
def _not_none(guard: Guard, asm: Assembler) -> None:
    asm.check("CHECK_IS_NOT", asm.value(guard.source), None)


@translator(GuardKind.EQUALS_MATCH)
def _equals_match(guard: Guard, asm: Assembler) -> None:
    v, expected = asm.value(guard.source), guard.expected
    kind = type(expected)
    if kind in _SINGLETON_TYPES:
        asm.check("CHECK_IS", v, expected)
    elif kind is float and needs_slow_equal(expected):  # NaN, 0.0 or -0.0
        asm.check("CHECK_FLOAT", v, expected)  # strict_equal for a float, in C
    elif needs_slow_equal(expected):
        asm.check("CHECK_CALL", v, (strict_equal, (expected,)))
    else:
        asm.check("CHECK_TYPE", v, kind)
        asm.check("CHECK_EQ", v, tuple(expected) if kind is torch.Size else expected)
        if kind is tuple:  # (1, 2) == (True, 2): the items' types must match too
            asm.check("CHECK_ITEM_TYPES", v, tuple(type(item) for item in expected))


@translator(GuardKind.TENSOR_MATCH)
def _tensor_match(guard: Guard, asm: Assembler) -> None:
    spec: TensorSpec = guard.expected
    t = asm.value(guard.source)
    asm.check("CHECK_TYPE", t, spec.tensor_type)  # makes the reads below safe
    data = native_tensor.spec_data(spec)
    capsule = native_tensor.capsule() if data is not None else None
    if capsule is not None:  # the C++ check, built (native_tensor.py): one call
        asm.check("CHECK_NATIVE", t, (capsule, data))
        return
    s = asm.scratch()
    asm.emit("LOAD_ATTR", s, t, "shape")
    asm.check("CHECK_DIMS", s, (spec.sizes, DYNAMIC_MIN_SIZE if None in spec.sizes else None))
    asm.emit("LOAD_ATTR", s, t, "dtype")
    asm.check("CHECK_IS", s, spec.dtype)
    if spec.device.type in ("cpu", "meta"):
        asm.emit("LOAD_ATTR", s, t, f"is_{spec.device.type}")
        asm.check("CHECK_TRUE", s)
    else:
        asm.emit("LOAD_ATTR", s, t, "device")
        asm.check("CHECK_EQ", s, spec.device)
    if spec.strides is None or all(st is None for st in spec.strides):
        asm.emit("LOAD_ATTR", s, t, "layout")
        asm.check("CHECK_IS", s, spec.layout)
    asm.emit("LOAD_ATTR", s, t, "requires_grad")
    asm.check("CHECK_TRUE" if spec.requires_grad else "CHECK_FALSE", s)
    if spec.dtype.is_complex:  # lazily conjugated/negated views read memory differently
        for method in ("is_conj", "is_neg"):
            asm.emit("CALL_METHOD", s, t, method)
            asm.check("CHECK_FALSE", s)
    if _contiguity_decides_strides(spec):
        asm.emit("CALL_METHOD", s, t, "is_contiguous")
        asm.check("CHECK_TRUE", s)
    elif spec.strides is not None and any(st is not None for st in spec.strides):
        asm.emit("CALL_METHOD", s, t, "stride")
        asm.check("CHECK_DIMS", s, (spec.strides, None))


@translator(GuardKind.LEN_MATCH)
def _len_match(guard: Guard, asm: Assembler) -> None:
    kind, length = guard.expected
    v = asm.value(guard.source)
    asm.check("CHECK_TYPE", v, kind)
    asm.check("CHECK_LEN", v, length)


@translator(GuardKind.DICT_KEYS)
def _dict_keys(guard: Guard, asm: Assembler) -> None:
    kind, keys = guard.expected
    v = asm.value(guard.source)
    asm.check("CHECK_TYPE", v, kind)
    asm.check("CHECK_KEYS", v, list(keys))
    if any(type(k) is not str for k in keys):  # {1: ...} and {True: ...} have equal keys
        asm.check("CHECK_ITEM_TYPES", v, tuple(type(k) for k in keys))


@translator(GuardKind.MODULE_TRAINING)
def _module_training(guard: Guard, asm: Assembler) -> None:
    s = asm.scratch()
    asm.emit("LOAD_ATTR", s, asm.value(guard.source), "training")
    asm.check("CHECK_IS", s, guard.expected)


@translator(GuardKind.TENSOR_ALIASING)
def _tensor_aliasing(guard: Guard, asm: Assembler) -> None:
    asm.check("CHECK_SAME", asm.value(guard.source), asm.value(guard.expected))


@translator(GuardKind.NO_TENSOR_ALIASING)
def _no_tensor_aliasing(guard: Guard, asm: Assembler) -> None:
    asm.check("CHECK_DISTINCT", -1, tuple(asm.value(s) for s in guard.sources()))


@translator(GuardKind.ABSENT)
def _absent(guard: Guard, asm: Assembler) -> None:
    source = guard.source
    if type(source) in _ROOTS:
        asm.check("CHECK_NOT_IN", _ROOTS[type(source)], source.name)  # type: ignore[attr-defined]
    elif isinstance(source, AttrSource) and asm.module_absent(source):
        for storage in MODULE_STORAGE:  # an nn.Module attribute: its four dicts
            asm.check("CHECK_NOT_IN", asm.value(AttrSource(source.base, storage)), source.attr)
    elif isinstance(source, AttrSource):
        asm.check("CHECK_NO_ATTR", asm.value(source.base), source.attr)
    elif isinstance(source, ItemSource):
        asm.check("CHECK_NOT_IN", asm.value(source.base), source.key)
    else:  # translatable() lets no other source through
        raise AssertionError(f"ABSENT on {type(source).__name__}")


# ---- whole programs -------------------------------------------------------------------


def assemble(
    guards: tuple[Guard, ...],
    physical: Callable[[Source], Source],
) -> tuple[Assembler, list[Guard]]:
    """Instructions for `guards` (already planned), and the guards left untranslated."""
    asm = Assembler(physical)
    left: list[Guard] = []
    for guard in guards:  # classes held strongly by their guard (a dying one is weakly held)
        if guard.kind is GuardKind.TYPE_MATCH and guard.weak_ref() is None:
            asm.known_types[physical(guard.source)] = guard.expected
    for guard in guards:
        if translatable(guard, physical):
            TRANSLATORS[guard.kind](guard, asm)
        else:
            left.append(guard)
    return asm, left


def translatable(guard: Guard, physical: Callable[[Source], Source]) -> bool:
    """Whether every step `guard` needs has a native form (checked before emitting any)."""
    if guard.kind not in TRANSLATORS:
        return False
    if guard.kind is GuardKind.ABSENT and not isinstance(
        guard.source, AttrSource | ItemSource | LocalSource | GlobalSource | BuiltinSource
    ):
        return False
    sources = guard.sources()
    if guard.kind is GuardKind.ABSENT:
        sources = () if guard.source.base is None else (guard.source.base,)
    for source in sources:
        node: Source | None = physical(source)
        while node is not None:
            if type(node) not in _LOADERS:
                return False
            node = node.base
    return True


def build_program(
    asm: Assembler,
    f_globals: dict[str, Any],
    f_builtins: dict[str, Any],
    *,
    owner: Any = None,
    python_checks: tuple[Callable[[dict[str, Any]], bool], ...] = (),
) -> fh.GuardProgram:
    """The program: `owner` first (the thread's hook setting must be it or False, see
    convert_frame._owned_by), then the translated guards, then each of `python_checks`
    called with f_locals (untranslated guards, shape guards)."""
    head = [] if owner is None else [("CHECK_OWNER", 0, -1, owner)]
    # their exceptions propagate, as from the Python form (a generated guard catches its own)
    tail = [("CHECK_CALL", 0, _L, (check, (), True)) for check in python_checks]
    body = with_blocks(asm.code, asm._scratch) if blocks_enabled() else asm.code
    return fh.GuardProgram(tuple(head + body + tail), asm.nregs, f_globals, f_builtins)


# ---- blocks: checks skipped while what they read is unchanged --------------------------

#: loads a block may hold (what they read the frame hook stamps: the dicts and classes
#: they read, at their versions; ember_frame_hook's stamps.c)
_STAMPABLE_LOADS = frozenset({"LOAD_ATTR", "LOAD_GENERIC_ATTR", "LOAD_CONST", "LOAD_TYPE"})
#: checks of identity, always stable while the value's container is
_IDENTITY_CHECKS = frozenset({"CHECK_TYPE", "CHECK_IS", "CHECK_IS_NOT"})
#: checks of a value's contents: stable when the value is immutable or a stamped dict
_CONTENT_CHECKS = frozenset({"CHECK_EQ", "CHECK_FLOAT", "CHECK_TRUE", "CHECK_FALSE"})
_CONTAINER_CHECKS = frozenset({"CHECK_LEN", "CHECK_NOT_IN", "CHECK_KEYS", "CHECK_ITEM_TYPES"})
_IMMUTABLE = (type(None), bool, int, float, complex, str, bytes)
_CONTAINERS = (dict, collections.OrderedDict, tuple)
#: attributes that are dicts by construction (a module's tables, an instance's __dict__)
_DICT_ATTRS = frozenset({"__dict__", "_modules", "_parameters", "_buffers", "__globals__"})
#: function attributes that can be assigned without a dict write (no stamp sees it)
_UNSTAMPABLE_ATTRS = frozenset({"__defaults__", "__kwdefaults__", "__code__"})
#: instructions a block holds at most: a block whose stamps fail (an attribute that
#: changes every call) costs only its own instructions
BLOCK_SIZE = 512


def blocks_enabled() -> bool:
    """EMBER_GUARD_BLOCKS=0 runs every check on every call (for comparison)."""
    return os.environ.get("EMBER_GUARD_BLOCKS", "1") != "0"


def with_blocks(code: list[Instruction], scratch: int | None) -> list[Instruction]:
    """`code` reordered as [loads the blocks start from] [BLOCKs] [the rest, in order].

    A block holds the loads and checks of module state (attributes, hook dicts, class
    attributes): what stays the same from call to call. The frame hook skips a block whose
    stamps hold and sets the registers later instructions read from it. Outside stay the
    checks that must run on every call: tensors (their metadata changes in place), torch's
    state, anything read from f_locals itself, values that are not plain immutable data,
    and the Python checks. The guard is a conjunction, so the order of its checks does not
    change its answer; each instruction still comes after the loads it reads.
    """
    made: dict[int, str] = {_L: "pre", _G: "pre", _B: "pre"}  # register -> where loaded
    # register -> its class, as the guard checks it anywhere (a wrong guess costs speed:
    # what the frame hook cannot stamp at run time makes its block run always)
    kind: dict[int, type] = {_G: dict, _B: dict}
    for op, dst, src, arg in code:
        if op == "CHECK_TYPE":
            kind[src] = arg
        if op in ("LOAD_ATTR", "LOAD_GENERIC_ATTR") and arg in _DICT_ATTRS:
            kind[dst] = dict
    parts: dict[str, list[Instruction]] = {"pre": [], "block": [], "post": []}
    for ins in code:
        op, dst, src, arg = ins
        is_load = op.startswith(("LOAD", "CALL"))
        where = {made.get(r, "post") for r in _reads(ins)}
        in_scratch = scratch is not None and scratch in (src, dst)
        if (
            _stampable(ins, kind)
            and not (where == {"pre"} and _read_through(ins, kind))
            and not in_scratch
            and src != _L
            and "post" not in where
            and (is_load or "pre" not in where or op == "CHECK_TYPE")
        ):
            part = "block"  # a check of a value from f_locals (an int argument) runs always
        elif is_load and where <= {"pre"} and not in_scratch:
            part = "pre"  # f_locals' items and what is loaded from them alone
        else:
            part = "post"
        parts[part].append(ins)
        if is_load:
            made[dst] = part
    blocked = parts["block"]
    body = parts["pre"]
    for i in range(0, len(blocked), BLOCK_SIZE):
        chunk = blocked[i : i + BLOCK_SIZE]
        body += [("BLOCK", 0, -1, len(chunk)), *chunk]
    return body + parts["post"]


def _stampable(ins: Instruction, kind: dict[int, type]) -> bool:
    op, _, src, arg = ins
    value_kind = kind.get(src)
    if op in _STAMPABLE_LOADS:
        return arg not in _UNSTAMPABLE_ATTRS
    if op == "LOAD_ITEM":
        return value_kind in _CONTAINERS
    if op in _IDENTITY_CHECKS:
        return True
    if op in _CONTENT_CHECKS:
        return value_kind in _IMMUTABLE and (op != "CHECK_EQ" or type(arg) in _IMMUTABLE)
    if op in _CONTAINER_CHECKS:
        if op == "CHECK_ITEM_TYPES":
            return value_kind is tuple and all(t in _IMMUTABLE for t in arg)
        return value_kind in _CONTAINERS
    return False


def _read_through(ins: Instruction, kind: dict[int, type]) -> bool:
    """Whether `ins` reads what only the identity of its source vouches for: a tuple's
    item. The frame hook knows a value from f_locals by its address only (a freed
    argument tuple's address is soon the next one's), and a tuple of tensors is not held
    by its stamp: such a read would make its whole block run always, so it runs every
    call outside the blocks."""
    op, _, src, _ = ins
    return op == "LOAD_ITEM" and kind.get(src) not in (dict, collections.OrderedDict)


def _reads(ins: Instruction) -> tuple[int, ...]:
    op, _, src, arg = ins
    if op == "CHECK_SAME":
        return (src, arg)
    if op == "CHECK_DISTINCT":
        return tuple(arg)
    if op in ("LOAD_CONST", "CHECK_OWNER"):
        return ()
    return (src,)


def verifying(native: Callable[[dict], bool], python: Callable[[dict], bool]) -> Callable:
    """verify mode: run both, insist on the same answer."""

    def guard(f_locals: dict[str, Any]) -> bool:
        expected = bool(python(f_locals))
        got = bool(native(f_locals))
        if got != expected:
            raise GuardMismatch(
                f"native guard says {got}, Python guard says {expected} for {sorted(f_locals)}"
            )
        return expected

    guard.native = native  # type: ignore[attr-defined]
    return guard


def describe_program(program: fh.GuardProgram) -> str:
    """One instruction a line, for logs and tests."""
    lines = []
    for i, (op, dst, src, arg) in enumerate(program.instructions):
        target = f"r{dst} = " if op.startswith(("LOAD", "CALL")) else ""
        if op == "BLOCK":
            lines.append(f"{i:4d}  BLOCK of {arg}")
            continue
        text = arg.__name__ if isinstance(arg, type) else repr(arg)
        lines.append(f"{i:4d}  {target}{op} r{src} {text[:80]}")
    return "\n".join(lines)
