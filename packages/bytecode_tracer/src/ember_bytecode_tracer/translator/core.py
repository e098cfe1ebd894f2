"""The symbolic interpreter: runs a frame's instructions over VariableTrackers.

`InstructionTranslator` walks one code object with a symbolic value stack and symbolic
locals, dispatching each instruction to its handler (translator/handlers/*). Tensor
operations land in the OutputGraph as FX nodes; Python-level work is done at trace time.
`InliningTranslator` runs a called user function inside the caller's trace.

When a handler raises `Unsupported`, the root translator ends the trace at the current
instruction: the graph so far is compiled and the rest of the frame continues in plain
Python (see graph_break.py). An inlined call that cannot be traced makes the whole call
the break point of its caller.
"""

from __future__ import annotations

import sys
import traceback
from typing import TYPE_CHECKING, Any

import ember_symbolic as es
from ember_bytecode_tracer.bytecode import decode
from ember_bytecode_tracer.exc import TracedException, TracerError, Unsupported
from ember_bytecode_tracer.guards import (
    FREE_CELL,
    AttrSource,
    GlobalSource,
    Guard,
    GuardKind,
    ItemSource,
    LocalSource,
    is_frame_cell,
)
from ember_bytecode_tracer.internal_errors import raised_by_ember, report_once
from ember_bytecode_tracer.translator.handlers.operators import apply_operator, subscript
from ember_bytecode_tracer.translator.raising_handlers import handler_always_raises
from ember_bytecode_tracer.translator.registry import lookup
from ember_bytecode_tracer.translator.signals import GeneratorYield, ReturnValue
from ember_bytecode_tracer.variables import catalog  # noqa: F401  (fills the rule tables)
from ember_bytecode_tracer.variables.builder import wrap_value
from ember_bytecode_tracer.variables.builtins import wrap_builtin
from ember_bytecode_tracer.variables.constant import ConstantVariable, is_constant_value
from ember_bytecode_tracer.variables.exceptions import ExceptionVariable
from ember_bytecode_tracer.variables.foreign_patches import unwrap_foreign
from ember_bytecode_tracer.variables.functions import bind_arguments
from ember_bytecode_tracer.variables.iterator_tools import GeneratorVariable
from ember_bytecode_tracer.variables.iterators import ListIteratorVariable
from ember_bytecode_tracer.variables.object_identity import note_object
from ember_bytecode_tracer.variables.objects import TypeVariable

if TYPE_CHECKING:
    from types import CodeType

    from ember_bytecode_tracer.bytecode import Instruction
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.output_graph import OutputGraph
    from ember_bytecode_tracer.variables.base import VariableTracker

MAX_INLINE_DEPTH = 32


# Raised through `step` on purpose: the translator's own control flow, the tracer's errors,
# and a dim the user marked dynamic that the trace forced to a constant (the user's error).
_PROPAGATED = (ReturnValue, GeneratorYield, TracerError, es.ConstraintViolationError)


class InstructionTranslator:
    """Traces one code object. The root translator's frame is the one being compiled."""

    def __init__(
        self,
        *,
        code: CodeType,
        instructions: list[Instruction],
        symbolic_locals: dict[str, VariableTracker],
        f_globals: dict[str, Any],
        f_builtins: dict[str, Any],
        output: OutputGraph,
        globals_source: Source | None = None,
        closure_cells: dict[str, Any] | None = None,
        parent: InstructionTranslator | None = None,
        decoded: DecodedCode | None = None,
    ) -> None:
        self.code = code
        self.instructions = instructions
        if decoded is None:
            decoded = DecodedCode(code, instructions)
        assert decoded.instructions is instructions
        self.index_of = decoded.index_of
        # id(instruction) -> handler_may_catch's answer (a property of the code alone)
        self._may_catch = decoded.may_catch
        self.symbolic_locals = symbolic_locals
        self.f_globals = f_globals
        self.f_builtins = f_builtins
        self.output = output
        self.globals_source = globals_source  # None: the root frame's globals, G[...]
        self.closure_cells = closure_cells or {}
        # The compiled frame's own closure cells (root translator only; its free variables
        # are symbolic locals): written ones are handed to the runner (guards.FREE_CELL).
        self.frame_cells: dict[str, Any] = {}
        self.parent = parent
        self.stack: list[VariableTracker] = []
        self.ip = 0
        self.current: Instruction | None = None
        self.kw_names: tuple[str, ...] | None = None  # 3.11 KW_NAMES, consumed by CALL
        self.depth = 0 if parent is None else parent.depth + 1
        self.version = sys.version_info[:2]
        self.closure_vars: dict[str, Any] = {}
        self.fn_source: Source | None = None
        self.yielded: list[VariableTracker] | None = None  # set while running a generator
        self.suspends_on_yield = False  # a generator driven step by step (TracedGenerator)
        self.is_class_body = False  # symbolic_locals are a class namespace (LOAD_NAME...)
        # the exceptions being handled by this frame's `except` blocks, innermost last
        # (PUSH_EXC_INFO / POP_EXCEPT): what a bare `raise` re-raises
        self.handling: list[VariableTracker] = []

    # ---- stack -------------------------------------------------------------------
    def push(self, value: VariableTracker) -> None:
        self.stack.append(value)

    def pop(self) -> VariableTracker:
        return self.stack.pop()

    def popn(self, n: int) -> list[VariableTracker]:
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    def peek(self, depth: int = 1) -> VariableTracker:
        return self.stack[-depth]

    # ---- control flow ------------------------------------------------------------
    def jump(self, target: Instruction) -> None:
        self.ip = self.index_of[id(target)]

    def run(self) -> VariableTracker:
        """Runs to a return; returns the returned value (raises Unsupported on a break)."""
        try:
            while True:
                self.step()
        except ReturnValue as ret:
            return ret.value

    def step(self) -> None:
        inst = self.instructions[self.ip]
        self.current = inst
        self.ip += 1
        # Tensor ops under a user's try/except must not go into a graph: an error raised by
        # the compiled graph at run time would skip the handler. Under a plain try/finally,
        # or an except clause that only raises again, they may: the error still reaches the
        # caller, and the graph's deferred side effects (the try body's and the finally
        # body's alike) are simply not applied.
        self.output.in_user_try = self._in_user_try(inst)
        self.output.where_tx = self  # shape guards recorded now name this line
        fn = lookup(inst.opname)
        if fn is None:
            raise Unsupported(f"opcode {inst.opname} is not supported by the tracer")
        try:
            fn(self, inst)
        except TracedException as exc:
            if self._enter_handler(inst, exc):
                self.stamp_new_nodes()
                return
            if exc.location is None:
                exc.location = self.location()
                exc.user_stack = self.user_stack()
            raise
        except Unsupported as exc:
            if exc.location is None:
                exc.location = self.location()
                exc.user_stack = self.user_stack()
            raise
        except _PROPAGATED:
            raise
        except Exception as exc:
            # A Python error at trace time (`range(2.0)`, a tracer bug): a graph break before
            # this instruction, which then runs as plain Python and raises its own error (after
            # the graph and the writes of the code before it), never a crash where eager works
            error = Unsupported(f"{type(exc).__name__} raised at trace time: {exc}")
            error.location, error.user_stack = self.location(), self.user_stack()
            if raised_by_ember(exc):  # not the user's error: never silent
                report_once(exc, error.location)
            raise error from exc
        self.stamp_new_nodes()

    def stamp_new_nodes(self) -> None:
        """The nodes this instruction added get the user's stack (`node.stack_trace`, as
        Dynamo's have it): printed graphs name the line each group of nodes comes from, and
        reports (ember.trace.describe) show it. An inlined call's nodes, stamped by the
        callee's own steps, keep their deeper stack."""
        stack = None
        for node in reversed(self.output.graph.nodes):
            if node.op in ("placeholder", "output") or "stack_trace" in node.meta:
                break
            if stack is None:
                stack = self.stack_text()
            node.meta["stack_trace"] = stack

    def stack_text(self) -> str:
        """This frame and every inlining caller as a traceback formats them, innermost last
        (formatted once per stack in a trace: every layer's nodes come from the same lines)."""
        key = []
        tx: InstructionTranslator | None = self
        while tx is not None:
            key.append((tx.code.co_filename, tx.lineno(), tx.code.co_name))
            tx = tx.parent
        texts = self.output.stack_texts
        text = texts.get(stack := tuple(key))
        if text is None:
            frames = [traceback.FrameSummary(*frame) for frame in reversed(key)]
            text = texts[stack] = "".join(traceback.format_list(frames))
        return text

    def _enter_handler(self, inst: Instruction, exc: TracedException) -> bool:
        """Follows the exception table as CPython would: unwind the stack to the handler's
        depth, push the last instruction's offset if asked, push the exception, jump."""
        entry = inst.exn_tab_entry
        if entry is None:
            return False
        del self.stack[entry.depth :]
        if entry.lasti:
            self.push(ConstantVariable(inst.offset or 0))
        self.push(ExceptionVariable(exc, caught=True))
        self.jump(entry.target)
        return True

    def _in_user_try(self, inst: Instruction) -> bool:
        """Whether a user's handler of this frame or of an inlining caller (at the call it
        is running) may catch what `inst` raises."""
        tx: InstructionTranslator | None = self
        current: Instruction | None = inst
        while tx is not None and current is not None:
            # no exception-table entry: no handler at all (try_block_covers)
            if current.exn_tab_entry is not None and tx.handler_may_catch(current):
                return True
            tx = tx.parent
            current = tx.current if tx is not None else None
        return False

    def handler_may_catch(self, inst: Instruction) -> bool:
        """Whether a user's handler covering `inst` may catch what it raises: a try/except
        (a plain `finally:` always re-raises, so an error from a graph propagates as in
        eager, past effects it would have had, as every effect of a graph that raises).
        Asked on every step (for this frame and each inlining caller's): read from the
        code once per instruction."""
        known = self._may_catch.get(id(inst))
        if known is None:
            known = self.try_block_covers(inst) and not (
                self._handler_only_finalizes(inst) or self._handler_always_raises(inst)
            )
            self._may_catch[id(inst)] = known
        return known

    def try_block_covers(self, inst: Instruction) -> bool:
        """Whether a user's try/except or try/finally of this code covers `inst` (a `with`
        block's own cleanup and compiler-made handlers do not count)."""
        entry = inst.exn_tab_entry
        if entry is None:
            return False
        handler = self.index_of.get(id(entry.target))
        if handler is None or self.instructions[handler].opname != "PUSH_EXC_INFO":
            return False  # a compiler-made cleanup (comprehensions, except-clause bodies)
        following = self.instructions[handler + 1] if handler + 1 < len(self.instructions) else None
        return following is None or following.opname != "WITH_EXCEPT_START"  # with: allowed

    def _handler_always_raises(self, inst: Instruction) -> bool:
        """Whether the handler covering `inst` is an except clause that raises on every path
        and does nothing else (raising_handlers.py): graph ops may sit in its try."""
        start = self.index_of[id(inst.exn_tab_entry.target)]
        return handler_always_raises(
            self.instructions, self.index_of, start, self.f_globals, self.f_builtins
        )

    def _handler_only_finalizes(self, inst: Instruction) -> bool:
        """Whether the handler covering `inst` is a plain `finally:` body, which always
        re-raises: an error from a graph propagates as in eager, so graph ops may sit in its
        try. Read from the handler's code: a `finally` body reaches `RERAISE` before any
        `CHECK_EXC_MATCH` / `POP_EXCEPT` of an `except` clause (nested handling inside the
        body reads as `except`, the safe answer)."""
        entry = inst.exn_tab_entry
        index = self.index_of[id(entry.target)] + 1
        while index < len(self.instructions):
            opname = self.instructions[index].opname
            if opname in ("CHECK_EXC_MATCH", "CHECK_EG_MATCH", "POP_EXCEPT"):
                return False
            if opname == "RERAISE":
                return True
            index += 1
        return False

    # ---- where we are ------------------------------------------------------------
    def lineno(self) -> int:
        inst = self.current
        if inst is not None and inst.positions is not None and inst.positions.lineno:
            return inst.positions.lineno
        return self.code.co_firstlineno

    def location(self) -> str:
        return f"{self.code.co_filename}:{self.lineno()}"

    def user_stack(self) -> list[str]:
        """file:line of this frame and every inlining caller, innermost last."""
        frames = []
        tx: InstructionTranslator | None = self
        while tx is not None:
            frames.append(f"{tx.code.co_filename}:{tx.lineno()} in {tx.code.co_name}")
            tx = tx.parent
        return frames[::-1]

    def is_root(self) -> bool:
        return self.parent is None

    def root(self) -> InstructionTranslator:
        tx = self
        while tx.parent is not None:
            tx = tx.parent
        return tx

    def load_closure_cell(self, name: str) -> VariableTracker:
        """The contents of a real closure cell of the function being inlined (as the
        trace last wrote it, if it did)."""
        cell = self.closure_cells[name]
        self._check_not_a_frame_cell(name, cell, writing=False)
        try:
            value = cell.cell_contents
        except ValueError:
            raise Unsupported(f"free variable {name!r} referenced before assignment") from None
        if self.fn_source is None:
            if is_constant_value(value):
                return ConstantVariable(value)
            if name == "__class__" and isinstance(value, type):
                # super()'s cell (3.12 reads it with LOAD_DEREF): the class whose body
                # defined the method, fixed with the function found on a guarded type.
                return TypeVariable(value)
            raise Unsupported(f"closure variable {name!r} of a function without a source")
        cell_source = self.cell_source(name)
        written = self.output.side_effects.attributes.get((cell_source, "cell_contents"))
        if written is not None:
            return written
        return wrap_value(self, value, AttrSource(cell_source, "cell_contents"))

    def store_closure_cell(self, name: str, value: VariableTracker) -> None:
        """`nonlocal name; name = value` on a real closure cell (of the inlined function, or
        of the compiled frame): seen by later reads of that cell however it is reached,
        replayed after the graph."""
        if name in self.frame_cells:
            self.symbolic_locals[name] = value
        else:
            self._check_not_a_frame_cell(name, self.closure_cells[name], writing=True)
            if self.fn_source is None:
                raise Unsupported(
                    f"assigning the closure variable {name!r} of a sourceless function"
                )
        key = (self.cell_source(name), "cell_contents")
        self.output.side_effects.attributes[key] = value

    def _check_not_a_frame_cell(self, name: str, cell: Any, *, writing: bool) -> None:
        """The compiled frame reads and writes its own free variables as symbolic locals. An
        inlined function over one of those same cells (a function the frame made before a
        graph break, called in the resume function) breaks where the two would disagree: it
        writes the cell (the frame would read its stale local), or reads it after the frame
        wrote it (the write is not in the cell yet)."""
        root = self.root()
        for own_name, own in root.frame_cells.items():
            written = (LocalSource(FREE_CELL + own_name), "cell_contents")
            if cell is own and (writing or written in self.output.side_effects.attributes):
                raise Unsupported(f"closure variable {name!r} shared with the compiled frame")

    def cell_source(self, name: str) -> Source:
        """The source of the real cell `name`: the first one it was reached through (a cell
        shared by two functions is one object; reaching it another way guards the alias).
        The compiled frame's own cell (reached here only to write it: its reads are symbolic
        locals) is the runner's argument FREE_CELL + name, which no guard reads: a second
        way to it is a graph break."""
        frame_cell = self.frame_cells.get(name)
        cell = frame_cell if frame_cell is not None else self.closure_cells[name]
        seen = self.output.objects_by_id.get(id(cell))
        seen_source = seen[1] if seen is not None and seen[0] is cell else None
        if frame_cell is not None:
            source = LocalSource(FREE_CELL + name)
        else:
            index = self.code.co_freevars.index(name)
            source = ItemSource(AttrSource(self.fn_source, "__closure__"), index)
        if seen_source is not None and is_frame_cell(seen_source) != is_frame_cell(source):
            raise Unsupported(f"closure variable {name!r} shared with the compiled frame")
        note_object(self, cell, source)
        return self.output.objects_by_id[id(cell)][1]

    # ---- helpers used by handlers ------------------------------------------------
    def load_global(self, name: str) -> VariableTracker:
        if name in self.f_globals:
            if self.globals_source is None:
                source = GlobalSource(name)
            else:
                source = ItemSource(self.globals_source, name)
            return wrap_value(self, self.f_globals[name], source)
        if name in self.f_builtins:
            # Defining a global of that name later would shadow the builtin: guard it.
            if self.globals_source is None:
                self.output.add_guard(
                    Guard(GlobalSource(name), GuardKind.ABSENT, user_location=self.location())
                )
            return wrap_builtin(self, self.f_builtins[name], name)
        raise Unsupported(f"name {name!r} is not defined")

    def inline_call(
        self,
        fn: Any,
        fn_source: Source | None,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
        *,
        closure_vars: dict[str, VariableTracker] | None = None,
    ) -> VariableTracker:
        """Traces a call of the user function `fn` inside this trace."""
        if self.depth >= MAX_INLINE_DEPTH:
            raise Unsupported(f"inlining depth limit ({MAX_INLINE_DEPTH}) reached at {fn!r}")
        if closure_vars is None:  # torch.compile's Module.__init__: the original it wraps
            fn, fn_source = unwrap_foreign(self, fn, fn_source)
        return InliningTranslator.inline(self, fn, fn_source, args, kwargs, closure_vars)

    def start_generator(
        self,
        fn: Any,
        fn_source: Source | None,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> TracedGenerator:
        """The generator a call of the user generator function `fn` makes, not started."""
        if self.depth >= MAX_INLINE_DEPTH:
            raise Unsupported(f"inlining depth limit ({MAX_INLINE_DEPTH}) reached at {fn!r}")
        if not fn.__code__.co_flags & inspect_flags.CO_GENERATOR:
            raise Unsupported(f"{fn.__qualname__} is not a generator function")
        tx = InliningTranslator.prepare(self, fn, fn_source, args, kwargs, None)
        return TracedGenerator(tx)

    # ---- what trackers call back (variables/base.py's Translator) -----------------
    def wrap(self, value: Any, source: Source | None) -> VariableTracker:
        return wrap_value(self, value, source)

    def inline_code(
        self,
        code: CodeType,
        f_globals: dict[str, Any],
        bound: dict[str, VariableTracker],
        closure_vars: dict[str, VariableTracker],
    ) -> VariableTracker:
        return InliningTranslator.run_code(self, code, f_globals, bound, closure_vars)

    def start_code_generator(
        self,
        code: CodeType,
        f_globals: dict[str, Any],
        bound: dict[str, VariableTracker],
        closure_vars: dict[str, VariableTracker],
    ) -> TracedGenerator:
        inner = InliningTranslator._make(
            self, code, f_globals, bound, _made_globals(self, f_globals)
        )
        inner.closure_vars = closure_vars
        inner.fn_source = None
        return TracedGenerator(inner)

    def run_generator(
        self, fn: Any, fn_source: Source | None, args: list[VariableTracker]
    ) -> list[VariableTracker]:
        if self.depth >= MAX_INLINE_DEPTH:
            raise Unsupported(f"inlining depth limit ({MAX_INLINE_DEPTH}) reached at {fn!r}")
        generator = InliningTranslator.prepare(self, fn, fn_source, args, {}, None)
        generator.yielded = []
        generator.run()
        return generator.yielded

    def run_class_body(
        self, code: CodeType, f_globals: dict[str, Any], closure_vars: dict[str, VariableTracker]
    ) -> tuple[VariableTracker, dict[str, VariableTracker]]:
        inner = InliningTranslator._make(self, code, f_globals, {}, _made_globals(self, f_globals))
        inner.closure_vars = closure_vars
        inner.fn_source = None
        inner.is_class_body = True
        returned = inner.run()
        return returned, dict(inner.symbolic_locals)

    def apply_operator(self, fn: Any, args: list[VariableTracker]) -> VariableTracker:
        return apply_operator(self, fn, args)

    def subscript(self, container: VariableTracker, key: VariableTracker) -> VariableTracker:
        return subscript(self, container, key)


class InliningTranslator(InstructionTranslator):
    """Traces a user function called from a traced frame, sharing the caller's graph."""

    @classmethod
    def inline(
        cls,
        parent: InstructionTranslator,
        fn: Any,
        fn_source: Source | None,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
        closure_vars: dict[str, VariableTracker] | None,
    ) -> VariableTracker:
        tx = cls.prepare(parent, fn, fn_source, args, kwargs, closure_vars)
        if fn.__code__.co_flags & inspect_flags.CO_GENERATOR:
            # the generator object: its code runs to each next yield as it is consumed
            return GeneratorVariable(TracedGenerator(tx), fn.__qualname__)
        return tx.run()

    @classmethod
    def prepare(
        cls,
        parent: InstructionTranslator,
        fn: Any,
        fn_source: Source | None,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
        closure_vars: dict[str, VariableTracker] | None,
    ) -> InliningTranslator:
        """The translator of a call of `fn` with its arguments bound, not run yet."""
        bound = bind_arguments(parent, fn, fn_source, args, kwargs)
        globals_source = parent.globals_source
        if fn.__globals__ is not parent.f_globals:
            if fn_source is None and fn.__globals__ is not parent.root().f_globals:
                globals_source = _module_globals_source(fn.__globals__, fn.__qualname__)
            elif fn_source is not None:
                globals_source = AttrSource(fn_source, "__globals__")
            else:
                globals_source = None
        cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False))
        tx = cls._make(parent, fn.__code__, fn.__globals__, bound, globals_source)
        tx.closure_cells = cells
        tx.fn_source = fn_source
        tx.closure_vars = closure_vars or {}
        return tx

    @classmethod
    def run_code(
        cls,
        parent: InstructionTranslator,
        code: CodeType,
        f_globals: dict[str, Any],
        bound: dict[str, VariableTracker],
        closure_vars: dict[str, VariableTracker],
    ) -> VariableTracker:
        """Inlines a function made during the trace (its closure cells are trackers)."""
        if parent.depth >= MAX_INLINE_DEPTH:
            raise Unsupported(f"inlining depth limit ({MAX_INLINE_DEPTH}) reached")
        tx = cls._make(parent, code, f_globals, bound, _made_globals(parent, f_globals))
        tx.closure_vars = closure_vars
        tx.fn_source = None
        if code.co_flags & inspect_flags.CO_GENERATOR:
            # A generator made during the trace (e.g. a generator expression) is run to
            # completion here: its items are what iterating it would produce.
            tx.yielded = []
            tx.run()
            return ListIteratorVariable(tx.yielded)
        return tx.run()

    @classmethod
    def _make(cls, parent, code, f_globals, bound, globals_source) -> InliningTranslator:

        if code.co_flags & inspect_flags.CO_COROUTINE:
            raise Unsupported(f"inlining coroutine {code.co_qualname}")
        known = decoded(parent.output, code)
        return cls(
            code=code,
            instructions=known.instructions,
            decoded=known,
            symbolic_locals=bound,
            f_globals=f_globals,
            f_builtins=_builtins_of(f_globals),
            output=parent.output,
            globals_source=globals_source,
            parent=parent,
        )


class DecodedCode:
    """A code object's instructions as the translator reads them: the list, each one's
    index (jumps) and, filled as asked, whether a user's handler may catch what it raises.
    The trace never edits them, so the translators of every call of one function in a
    trace (each layer's forward) share one (`decoded`)."""

    __slots__ = ("code", "index_of", "instructions", "may_catch")

    def __init__(self, code: CodeType, instructions: list[Instruction]) -> None:
        self.code = code  # kept alive: the trace's table is keyed by its id
        self.instructions = instructions
        self.index_of = {id(inst): i for i, inst in enumerate(instructions)}
        self.may_catch: dict[int, bool] = {}


def decoded(output: OutputGraph, code: CodeType) -> DecodedCode:
    """`code` decoded once per trace (the table lives on the trace's OutputGraph)."""
    known = output.decoded_code.get(id(code))
    if known is None or known.code is not code:
        known = output.decoded_code[id(code)] = DecodedCode(code, decode(code))
    return known


class TracedGenerator:
    """A generator running inside the trace one step at a time (`with` over a
    @contextmanager: the body up to the yield on enter, the rest on exit).

    Each `send` runs the generator's translator until its next yield or its return, with
    the translator that sends as its parent (for locations and the try/except checks).
    """

    def __init__(self, tx: InstructionTranslator) -> None:
        self.tx = tx
        tx.suspends_on_yield = True
        self.started = False
        self.finished = False

    def send(
        self, caller: InstructionTranslator, value: VariableTracker
    ) -> tuple[bool, VariableTracker]:
        """(True, yielded value) at a yield, (False, returned value) when it returned."""
        if self.finished:
            raise Unsupported("resuming a generator that already finished")
        tx = self.tx
        tx.parent = caller
        tx.depth = caller.depth + 1
        if self.started:
            tx.push(value)  # what the paused YIELD_VALUE evaluates to
        self.started = True
        try:
            returned = tx.run()
        except GeneratorYield as paused:
            return True, paused.value
        self.finished = True
        return False, returned


def _made_globals(parent: InstructionTranslator, f_globals: dict[str, Any]) -> Source | None:
    """The globals source of a function made during the trace, run from `parent`: the
    module it was made in, which need not be the caller's (a nested function of one module
    handed to a function of another and called there)."""
    if f_globals is parent.f_globals:
        return parent.globals_source
    if f_globals is parent.root().f_globals:
        return None
    return _module_globals_source(f_globals, "a function made in the trace")


def _module_globals_source(f_globals: dict[str, Any], qualname: str) -> Source:
    """G of another module, reached through sys.modules (guarded by identity)."""

    module_name = f_globals.get("__name__")
    module = sys.modules.get(module_name)
    if module is None or module.__dict__ is not f_globals:
        # Some modules are registered under another name (e.g. _collections_abc calls
        # itself collections.abc): look the globals up by identity.
        module_name = next(
            (
                name
                for name, mod in list(sys.modules.items())
                if getattr(mod, "__dict__", None) is f_globals
            ),
            None,
        )
        if module_name is None:
            raise Unsupported(f"globals of {qualname} are not a module's")
    return AttrSource(
        ItemSource(AttrSource(GlobalSource("__ember_sys__"), "modules"), module_name), "__dict__"
    )


class inspect_flags:
    CO_GENERATOR = 0x20
    CO_COROUTINE = 0x80 | 0x100 | 0x200  # coroutine, iterable coroutine, async generator


def _builtins_of(f_globals: dict[str, Any]) -> dict[str, Any]:
    builtins = f_globals.get("__builtins__", sys.modules["builtins"])
    return builtins if isinstance(builtins, dict) else builtins.__dict__
