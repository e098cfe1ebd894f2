"""Compile a set of guards into one Python function `guard(L) -> bool`.

The generated function binds every value used more than once to a local on first use
(so `L['self']._modules['layers']` is read once however many guards go through it),
reads constants from closure cells, globals from the `f_globals` dict given here, and
wraps the body in one try/except: a source that no longer resolves (a missing attribute,
a shorter list, a deleted key) makes the guard false instead of raising. On CPython 3.11+
the try costs nothing while no exception happens, and it lets checks run in cost order
instead of the order their accesses would need to be safe.
"""

from __future__ import annotations

import builtins
import itertools
import keyword
import re
import types
from collections.abc import Callable, Iterable
from typing import Any

import torch

import ember_bytecode_tracer.guards.checks as checks
import ember_bytecode_tracer.guards.module_paths as module_paths
import ember_bytecode_tracer.guards.native as native
from ember_bytecode_tracer.guards.describe import explain_failure, summarize
from ember_bytecode_tracer.guards.guard import Guard, GuardKind
from ember_bytecode_tracer.guards.plan import implied_type, plan
from ember_bytecode_tracer.guards.sources import (
    AttrSource,
    GenericAttrSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    Scope,
    Source,
    TypeSource,
    builtins_of,
)
from ember_frame_hook import get_eval_frame

GuardFn = Callable[[dict[str, Any]], bool]

# Names the generated code uses for itself; constants and locals never take them.
_RESERVED = frozenset({"L", "G", "B", "torch", "guard", "type", "len", "map", "tuple", "id"})
_RESERVED |= frozenset({"hasattr", "getattr", "object", "Exception", "True", "False", "None"})
_counter = itertools.count()


class CompiledGuard:
    """One compiled check of many guards; call it with a frame's f_locals.

    `check` is the generated Python function, the reference: what logs show and what
    `failure_reason` explains. `native_for(owner)` is the same check as an
    `ember_frame_hook.GuardProgram` run in C (guards/native.py), which is what the frame
    hook gets; `native` is that program without the owner test.
    """

    def __init__(
        self,
        guards: tuple[Guard, ...],
        check: GuardFn,
        source_code: str,
        f_globals: dict[str, Any],
        f_builtins: dict[str, Any],
        assembled: native.Assembler | None = None,
        untranslated: tuple[Guard, ...] = (),
    ) -> None:
        self.guards = guards
        self.check = check
        self.source_code = source_code
        self.f_globals = f_globals
        self.f_builtins = f_builtins
        self._singles: list[GuardFn] | None = None
        self._assembled = assembled
        self.untranslated = untranslated  # guards the native program runs as Python
        self._fallback: GuardFn | None = None
        self._native: GuardFn | None = None
        if untranslated and assembled is not None:  # one Python function for all of them
            physical = assembled.physical
            self._fallback = _generate(untranslated, f_globals, f_builtins, physical)[0]

    @property
    def native(self) -> GuardFn:
        """The guard as a GuardProgram (no owner test), whatever the mode (built once)."""
        if self._native is None:
            self._native = self._program(None, None)
            assert self._native is not None
        return self._native

    def native_for(self, owner: Any = None, extra: GuardFn | None = None) -> GuardFn | None:
        """What the frame hook should run: the thread's hook setting is `owner` (or
        False, run-only), every guard holds, then `extra(L)` (shape guards). A
        GuardProgram; in verify mode a function that runs it and the Python form and
        insists they agree; None in mode '0' (the caller wraps `check` itself)."""
        mode = native.native_mode()
        if mode == "0" or self._assembled is None:
            return None
        program = self._program(owner, extra)
        if mode == "verify":
            return native.verifying(program, _python_form(owner, self.check, extra))
        return program

    def _program(self, owner: Any, extra: GuardFn | None) -> GuardFn | None:
        if self._assembled is None:
            return None
        checks = tuple(c for c in (self._fallback, extra) if c is not None)
        return native.build_program(
            self._assembled, self.f_globals, self.f_builtins, owner=owner, python_checks=checks
        )

    def __call__(self, f_locals: dict[str, Any]) -> bool:
        return self.check(f_locals)

    def failure_reason(self, f_locals: dict[str, Any]) -> str | None:
        """Why `f_locals` fails: the first failing guard and what was found; None if it passes."""
        if self._singles is None:  # slow path only: one plain function per guard
            self._singles = [
                _generate((g,), self.f_globals, self.f_builtins, physical=None)[0]
                for g in self.guards
            ]
        scope = Scope(f_locals, self.f_globals, self.f_builtins)
        for guard, single in zip(self.guards, self._singles, strict=True):
            if not single(f_locals):
                return explain_failure(guard, scope)
        if self.check(f_locals):
            return None
        return (
            "every guard passes alone but the compiled guard fails: a module attribute was "
            "moved out of _parameters/_buffers/_modules (into the instance __dict__?)"
        )

    def __repr__(self) -> str:
        return f"<CompiledGuard of {len(self.guards)} guards>"


def compile_guards(
    guards: Iterable[Guard],
    f_globals: dict[str, Any],
    *,
    f_locals: dict[str, Any] | None = None,
    f_builtins: dict[str, Any] | None = None,
) -> CompiledGuard:
    """Compile `guards` into one callable over a frame's f_locals.

    Globals are read from `f_globals` (the dict the frame will see), builtins from
    `f_builtins` (default: those `f_globals` implies). `f_locals`, the values the trace
    saw, is optional; given it, attribute reads on nn.Modules take their fast physical
    path (see module_paths) where the guard set pins the module's class.
    """
    if not isinstance(f_globals, dict):
        raise TypeError(f"compile_guards needs the frame's globals dict, got {type(f_globals)}")
    f_builtins = builtins_of(f_globals) if f_builtins is None else f_builtins
    planned = plan(guards)
    physical = _physical_paths(planned, Scope(f_locals or {}, f_globals, f_builtins), f_locals)
    check, source_code = _generate(planned, f_globals, f_builtins, physical)
    assembled, untranslated = native.assemble(planned, physical)
    source_code += (
        f"# native: {len(assembled.code)} instructions, {assembled.nregs} registers"
        f"{f', {len(untranslated)} guards run as Python' if untranslated else ''}\n"
    )
    compiled = CompiledGuard(
        planned, check, source_code, f_globals, f_builtins, assembled, tuple(untranslated)
    )
    physical.release()
    return compiled


def _python_form(owner: Any, check: GuardFn, extra: GuardFn | None) -> GuardFn:
    """What a native program with this owner and extra computes, in plain Python."""

    def guard(f_locals: dict[str, Any]) -> bool:
        setting = get_eval_frame()
        if owner is not None and setting is not owner and setting is not False:
            return False
        return bool(check(f_locals)) and (extra is None or bool(extra(f_locals)))

    return guard


def _physical_paths(
    guards: tuple[Guard, ...], scope: Scope, f_locals: dict[str, Any] | None
) -> Callable[[Source], Source]:
    pinned: dict[Source, type] = {}
    objects: dict[Source, Any] = {}
    keys: dict[Source, tuple] = {}
    for guard in guards:
        if guard.kind is GuardKind.DICT_KEYS:
            keys[guard.source] = guard.expected[1]
        cls = implied_type(guard)
        if guard.kind is GuardKind.ID_MATCH:
            cls = type(guard.expected)
            objects[guard.source] = guard.expected
        if cls is not None:
            pinned.setdefault(guard.source, cls)

    # The frame's values are read while the guards compile, never after (`release`): the
    # compiled checks must not keep the caller's tensors alive.
    frame_scope = [scope]
    no_locals = f_locals is None

    def value_of(source: Source) -> Any:
        if source in objects:
            return objects[source]
        if (no_locals and source.is_local()) or not frame_scope:
            return module_paths.unknown()
        try:
            return source._get(frame_scope[0])
        except Exception:
            return module_paths.unknown()

    cache: dict[Source, Source] = {}

    def physical(source: Source) -> Source:
        if source not in cache:
            cache[source] = module_paths.physical_source(
                source, pinned.get, value_of, keys.get, physical
            )
        return cache[source]

    def module_absent(source: Source) -> bool:
        return module_paths.absent_from_module_dicts(source, pinned.get, value_of)

    physical.module_absent = module_absent  # type: ignore[attr-defined]  # read by ABSENT

    def release() -> None:
        # the frame's values, and the classes and objects the guards pin (held weakly by
        # the guards themselves, weak_pins.py): the compiled checks must not keep them alive
        frame_scope.clear()
        pinned.clear()
        objects.clear()

    physical.release = release  # type: ignore[attr-defined]
    return physical


def compile_source_loader(
    sources: list[Source],
    guards: Iterable[Guard],
    f_globals: dict[str, Any],
    *,
    f_locals: dict[str, Any] | None = None,
) -> Callable[[dict[str, Any]], list[Any]]:
    """One generated `load(L) -> [value of each source]` for a graph's inputs.

    Runs only after the frame's guards (`guards`) passed, so module attributes take the
    same physical paths the guards read (module_paths), and a prefix shared by several
    sources (`L['self']._modules['h']`) is read once: a lambda per source would walk every
    parameter's chain through nn.Module.__getattr__ on each call.
    """
    f_builtins = builtins_of(f_globals)
    planned = plan(guards)
    physical = _physical_paths(planned, Scope(f_locals or {}, f_globals, f_builtins), f_locals)
    gen = _Codegen((), physical)
    uses: dict[Source, int] = {}
    for source in sources:
        node: Source | None = physical(source)
        while node is not None:
            uses[node] = uses.get(node, 0) + 1
            node = node.base
    gen._bind = {node for node, count in uses.items() if count >= 2 and node.base is not None}
    values = [gen.value(source) for source in sources]
    physical.release()
    params = ", ".join(["G", "B", "torch", *gen.consts])
    body = "\n".join(f"        {line}" for line in gen.lines)
    source_code = (
        f"def make_loader({params}):\n"
        f"    def load(L):\n"
        f"{body}{chr(10) if body else ''}"
        f"        return [{', '.join(values)}]\n"
        f"    return load\n"
    )
    load = _build("make_loader", source_code, "input loader", (f_globals, f_builtins, gen))
    load.source_code = source_code  # for logs and tests
    return load


class _Codegen:
    """Emits the body of one guard function; the EmitContext the kind emitters see."""

    def __init__(self, guards: tuple[Guard, ...], physical: Callable[[Source], Source]) -> None:
        self.physical = physical
        self.lines: list[str] = []
        self.consts: dict[str, Any] = {}
        self._const_ids: dict[int, str] = {}
        self._names: set[str] = set(_RESERVED)
        #: the next suffix to try for each base name (a guard set of a thousand constants
        #: named alike counted up from 1 for each: quadratic, 0.09 s of BERT's trace)
        self._next_suffix: dict[str, int] = {}
        self._bound: dict[Source, str] = {}
        self._bind = _sources_to_bind(guards, physical)

    # EmitContext ----------------------------------------------------------------------
    def value(self, source: Source) -> str:
        return self._expr(self.physical(source))

    def const(self, obj: Any, hint: str) -> str:
        name = self._const_ids.get(id(obj))
        if name is None:
            name = self._fresh(hint)
            self._const_ids[id(obj)] = name
            self.consts[name] = obj  # also keeps obj alive, so its id stays unique
        return name

    def local(self, hint: str) -> str:
        return self._fresh(hint)

    def module_absent(self, source: Source) -> bool:
        test = getattr(self.physical, "module_absent", None)
        return test is not None and test(source)

    # ----------------------------------------------------------------------------------
    def _expr(self, source: Source) -> str:
        if source in self._bound:
            return self._bound[source]
        base = source.base
        text = source.access(self._expr(base) if base is not None else "")
        if source in self._bind:
            name = self._fresh("v_" + _source_name(source))
            self.lines.append(f"{name} = {text}")
            self._bound[source] = name
            return name
        return text

    def _fresh(self, hint: str) -> str:
        base = re.sub(r"\W+", "_", hint).strip("_")[-40:].lstrip("0123456789_") or "c"
        n = self._next_suffix.get(base, 0)
        name = base if n == 0 else f"{base}_{n}"
        while name in self._names or keyword.iskeyword(name):
            n += 1
            name = f"{base}_{n}"
        self._next_suffix[base] = n + 1
        self._names.add(name)
        return name


def _sources_to_bind(
    guards: tuple[Guard, ...], physical: Callable[[Source], Source]
) -> set[Source]:
    """Physical sources whose expression would otherwise be written (and run) twice."""
    uses: dict[Source, int] = {}
    for guard in guards:
        weight = 1 if checks.uses_value_once(guard) else 2
        for source in checks.reads(guard):
            node = physical(source)
            uses[node] = uses.get(node, 0) + weight
            while node.base is not None:  # make sure every ancestor is in the table
                node = node.base
                if node in uses:  # and so are all of its own (put in with it)
                    break
                uses[node] = 0
    bind: set[Source] = set()
    for node in sorted(uses, key=lambda s: -s.depth()):  # children before their bases
        if uses[node] >= 2:
            bind.add(node)
        if node.base is not None:
            uses[node.base] += 1 if node in bind else uses[node]
    return bind


def _source_name(source: Source) -> str:
    """A short readable name: the last few steps, without nn.Module's storage dicts."""
    parts: list[str] = []
    node: Source | None = source
    while node is not None:
        if isinstance(node, LocalSource | GlobalSource):
            parts.append(node.name)
        elif isinstance(node, AttrSource | GenericAttrSource):
            parts.append(node.attr)
        elif isinstance(node, ItemSource):
            parts.append(str(node.key))
        elif isinstance(node, TypeSource):
            parts.append("type")
        else:
            parts.append(type(node).__name__)
        node = node.base
    parts = parts[:1] + [p for p in parts[1:] if p not in module_paths.MODULE_DICTS]
    return "_".join(reversed(parts[:3]))


def _generate(
    guards: tuple[Guard, ...],
    f_globals: dict[str, Any],
    f_builtins: dict[str, Any],
    physical: Callable[[Source], Source] | None,
) -> tuple[GuardFn, str]:
    gen = _Codegen(guards, physical or (lambda s: s))
    for guard in guards:
        where = f"  ({guard.user_location})" if guard.user_location else ""
        gen.lines.append(_comment(f"{guard.describe()}{where}"))
        test = checks.emit(guard, gen)
        gen.lines.append(f"if not ({test}):")
        gen.lines.append("    return False")
    params = ", ".join(["G", "B", "torch", *gen.consts])
    body = "\n".join(f"            {line}" for line in gen.lines) or "            pass"
    source_code = (
        f"def make_guard({params}):\n"
        f"    def guard(L):\n"
        f"        try:\n"
        f"{body}\n"
        f"        except Exception:  # a source that no longer resolves\n"
        f"            return False\n"
        f"        return True\n"
        f"    return guard\n"
    )
    check = _build("make_guard", source_code, "guard", (f_globals, f_builtins, gen))
    return check, _with_constants(source_code, gen.consts)


def _build(factory: str, source_code: str, label: str, scope: tuple) -> Any:
    """Exec generated `def factory(G, B, torch, *consts)` and call it with the closure
    values: the globals and builtins the frame sees, torch, the codegen's constants."""
    f_globals, f_builtins, gen = scope
    namespace: dict[str, Any] = {"__builtins__": builtins}
    exec(compile(source_code, f"<ember {label} {next(_counter)}>", "exec"), namespace)
    return namespace[factory](f_globals, f_builtins, torch, *gen.consts.values())


def _with_constants(source_code: str, consts: dict[str, Any]) -> str:
    """The generated code headed by what each closure constant holds (for EMBER_LOGS)."""
    header = [_comment(f"{name} = {_const_text(obj)}") for name, obj in consts.items()]
    return "\n".join([*header, source_code]) if header else source_code


def _const_text(obj: Any) -> str:
    if isinstance(obj, type | torch.dtype | torch.device | types.ModuleType):
        return repr(obj)
    return summarize(obj)


def _comment(text: str, limit: int = 160) -> str:
    """One safe comment line: user text may hold newlines or other control characters."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else "?" for c in text)
    return "# " + (text if len(text) <= limit else text[: limit - 3] + "...")
