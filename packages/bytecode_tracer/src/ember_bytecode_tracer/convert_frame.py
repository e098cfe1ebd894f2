"""The frame hook's callback: trace a starting frame and return guarded rewritten code.

`FrameCompiler(backend)` is what `ember_frame_hook.set_eval_frame` receives. For each frame
it decides (skip rules, cache limit), traces it with the symbolic interpreter, compiles
the graph with the backend, builds the runner and the rewritten code, compiles the guards,
and returns a `CompiledFrame` (a GuardedCode carrying everything `explain` reports).
"""

from __future__ import annotations

import collections
import importlib.util
import itertools
import logging
import os
import site
import sys
import sysconfig
import types
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode, any_torch_dispatch_mode_on_stack

import ember_frame_hook as fh
from ember_bytecode_tracer import (
    codegen,
    iterator_recipes,  # noqa: F401  (fills reconstruct's table)
    recipe_rules,  # noqa: F401  (fills reconstruct's table)
    stance,
)
from ember_bytecode_tracer.autocast_state import ENTER as AUTOCAST_ENTER
from ember_bytecode_tracer.autocast_state import AutocastState
from ember_bytecode_tracer.bytecode import Instruction, decode, format_instructions
from ember_bytecode_tracer.cache_groups import group_entries, group_key, is_dead, pinned_locals
from ember_bytecode_tracer.compile_lock import COMPILE_LOCK, cached_fit, live_cache
from ember_bytecode_tracer.dynamic import STATIC_POLICY, DynamicPolicy
from ember_bytecode_tracer.exc import (
    BackendCompilerFailed,
    ExampleRuntimeError,
    RecompileRefused,
    SkipFrame,
    TracedException,
    Unsupported,
)
from ember_bytecode_tracer.guard_failures import GuardFailFn, GuardFailure, check_guard_fail_fn
from ember_bytecode_tracer.guards import (
    FREE_CELL,
    Guard,
    GuardKind,
    LocalSource,
    TorchStateSource,
    compile_guards,
    compile_source_loader,
    is_frame_cell,
)
from ember_bytecode_tracer.guards.filter import GuardFilter, filter_guards
from ember_bytecode_tracer.guards.sources import torch_state_query
from ember_bytecode_tracer.output_graph import OutputGraph
from ember_bytecode_tracer.rebuild_codegen import compile_rebuild, emits_write
from ember_bytecode_tracer.reconstruct import RecipeBuilder, source_loader
from ember_bytecode_tracer.saved_hooks import (
    DISABLE_SWITCHES,
    disabled_message,
    restore_disabled,
    user_saved_tensor_hooks_suspended,
)
from ember_bytecode_tracer.shared_code import share_key, shareable_entry
from ember_bytecode_tracer.state_switches import SWITCHES
from ember_bytecode_tracer.state_switches import restore as restore_switched_state
from ember_bytecode_tracer.state_switches import snapshot as switched_state_now
from ember_bytecode_tracer.translator import handlers  # noqa: F401  (registers handlers)
from ember_bytecode_tracer.translator.core import InstructionTranslator, _builtins_of
from ember_bytecode_tracer.user_errors import fullgraph_message, kind_of
from ember_bytecode_tracer.variables.autocast_context import close_trace_time_autocasts
from ember_bytecode_tracer.variables.functions import CellReference
from ember_bytecode_tracer.variables.graph_leaves import LeafEscapes, check_leaves_stay
from ember_bytecode_tracer.variables.hooks_context import close_at_break
from ember_bytecode_tracer.variables.iterators import ListIteratorVariable
from ember_bytecode_tracer.variables.lazy import LazyLocal
from ember_bytecode_tracer.variables.logging_calls import DeferredCall
from ember_bytecode_tracer.variables.object_identity import distinct_object_guards
from ember_bytecode_tracer.variables.objects import NullVariable
from ember_bytecode_tracer.variables.tensor_state import tensor_attribute_writes
from ember_bytecode_tracer.variables.validation_checks import check_appliers
from ember_events import emit

log = logging.getLogger("ember.tracer")
_runner_ids = iter(range(10**9))


@dataclass
class GraphBreak:
    reason: str
    location: str  # user file:line
    user_stack: list[str] = field(default_factory=list)  # the inlining chain, outermost first


@dataclass
class FrameRecord:
    """What happened to one traced frame: for explain(), logs and tests."""

    code: types.CodeType
    graphs: list[torch.fx.GraphModule] = field(default_factory=list)
    breaks: list[GraphBreak] = field(default_factory=list)
    guards: Any = None
    new_code: types.CodeType | None = None
    runner: Callable | None = None  # the closure the new code calls
    input_names: list[str] = field(default_factory=list)  # its arguments, frame locals by name
    recompile_reason: str | None = None  # why the cached entries did not fit this call
    pinned_locals: tuple = ()  # (source, object) of locals guarded by identity (cache_groups)


class CompiledFrame(fh.GuardedCode):
    """A cache entry, with the record of how it was made."""

    record: FrameRecord


# Ember's own stages: the backends' runtimes (aot wrappers, generated kernels' launchers) are
# never user code. Found by name without importing them (lower stages don't import higher).
_EMBER_PACKAGES = ("ember", "ember_aot_autograd", "ember_primops", "ember_inductor_ir",
                   "ember_codegen")  # fmt: skip
# Libraries whose own Python code runs as it is, as under torch.compile (Dynamo's skip list):
# NumPy's functions that a trace knows are rules (variables/numpy_rules.py); the others run
# eagerly after a break, and their frames (np.unique's helpers, np.percentile's) are not
# compiled one by one.
_LIBRARIES_RUN_AS_IS = ("numpy",)


def _package_dir(name: str) -> str | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(next(iter(spec.submodule_search_locations)), "")


def _as_dir(path: str) -> str:
    """A folder as a prefix that matches only paths inside it: `.../torch/`, never
    `.../torchvision/`."""
    return os.path.join(os.path.normpath(path), "")


def _skipped_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths["stdlib"], paths["platstdlib"], os.path.dirname(fh.__file__),
             os.path.dirname(__file__), os.path.dirname(torch.__file__)}  # fmt: skip
    packages = (*_EMBER_PACKAGES, *_LIBRARIES_RUN_AS_IS)
    roots.update(d for d in map(_package_dir, packages) if d is not None)
    return tuple(sorted({_as_dir(r) for r in roots}))


def _installed_roots() -> tuple[str, ...]:
    """site-packages folders: installed libraries (transformers, torchvision...) are user
    code even where site-packages lies inside the standard library's folder (a Python
    installed without a venv: lib/python3.11/site-packages)."""
    paths = sysconfig.get_paths()
    roots = {paths["purelib"], paths["platlib"], *site.getsitepackages()}
    if site.ENABLE_USER_SITE and site.getusersitepackages():
        roots.add(site.getusersitepackages())
    return tuple(sorted({_as_dir(r) for r in roots}))


_SKIP_ROOTS = _skipped_roots()
_INSTALLED_ROOTS = _installed_roots()
_GENERATED = ("<frozen", "<eval_with_key", "<ember")
_TORCH_ALLOWED = (os.path.join(os.path.dirname(torch.__file__), "nn", "modules", ""),)


def _owned_by(compiler: FrameCompiler, guards: Any) -> Callable[[dict], bool]:
    """The entry's guard, plus: the hook's active callback is the compiler that made it.

    Cache entries live on the code object, shared by every ember.compile of a function;
    without this, compiling the same function for another backend would reuse the first
    backend's code. Run-only mode (setting False) runs whatever is cached. The guard is
    native (a GuardProgram run in C, guards/native.py) unless EMBER_NATIVE_GUARDS=0.
    """
    program = guards.native_for(compiler) if hasattr(guards, "native_for") else None
    if program is not None:
        return program
    check = guards.check
    current = fh.get_eval_frame

    def guard(f_locals: dict) -> bool:
        setting = current()
        return (setting is compiler or setting is False) and check(f_locals)

    return guard


#: code objects of our own that are traced all the same: the Python frame ember.compile
#: calls a C callable from (an OpOverload compiled has no frame of its own)
_TRACED_ENTRIES: set[types.CodeType] = set()


def trace_entry_code(code: types.CodeType) -> None:
    """Trace frames of `code` although it is Ember's own (an entry frame around a call)."""
    _TRACED_ENTRIES.add(code)


def is_skipped(code: types.CodeType) -> bool:
    """Our own code, the standard library and torch internals run as they are; of torch's
    nn modules only `forward` methods are traced (constructors and helpers are not)."""
    filename = code.co_filename
    if codegen.is_resume(code) or code in _TRACED_ENTRIES:
        return False
    if filename.startswith(_TORCH_ALLOWED):
        return code.co_name != "forward"
    # "<stdin>", "<string>" and notebook cells are user code; frozen modules, FX's
    # generated forward() and our own generated functions are not.
    if filename.startswith(_GENERATED):
        return True
    skip_root = max((r for r in _SKIP_ROOTS if filename.startswith(r)), key=len, default=None)
    if skip_root is None:
        return False
    # the deepest folder decides: torch inside site-packages is skipped, transformers in a
    # site-packages inside the stdlib folder is not
    installed = max((r for r in _INSTALLED_ROOTS if filename.startswith(r)), key=len, default="")
    return len(skip_root) > len(installed)


_PLAIN_CONTAINERS = (list, tuple, set, frozenset, collections.deque)


def _contents(value: Any) -> Any:
    """The values a container or a user object's attributes hold, or None for anything else
    (functions, classes and modules are looked at by name through `_is_torch_global`)."""
    if isinstance(value, _PLAIN_CONTAINERS):
        return value
    if isinstance(value, dict):
        return value.values()
    if isinstance(value, type | types.ModuleType | types.FunctionType | types.MethodType):
        return None
    try:  # never the object's own __getattr__ (user code, maybe with effects)
        attrs = object.__getattribute__(value, "__dict__")
    except Exception:
        return None
    if type(attrs) is dict and type(value).__module__ != "builtins":
        return attrs.values()  # a user object: its attributes (a dataclass, a config, ...)
    return None


def _holds_tensor_state(value: Any, depth: int = 0) -> bool:
    """Tensors, modules or arrays in a value, in containers and user objects' attributes
    down to three levels (`obj.items[0]`): a frame that sees none of them is not traced."""
    if isinstance(value, torch.Tensor | torch.nn.Module | np.ndarray):  # arrays: traced as tensors
        return True
    if isinstance(value, torch.optim.Optimizer):  # its tensors sit deeper than three levels
        return True
    if isinstance(value, types.MethodType):  # `opt.step` handed in: what it is bound to
        return _holds_tensor_state(value.__self__, depth + 1)
    if depth < 2 and type(value) is types.FunctionType and value.__closure__:
        # a closure over tensors handed in (a stateful counter): traced where it is called
        return any(_holds_tensor_state(_cell_value(c), depth + 1) for c in value.__closure__)
    contents = _contents(value) if depth < 3 else None
    if contents is None:
        return False
    try:
        return any(_holds_tensor_state(v, depth + 1) for v in itertools.islice(contents, 64))
    except RuntimeError:  # changed size while looked at (another thread)
        return False


def _cell_value(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def has_tensor_work(frame: Any) -> bool:
    """Whether a frame can produce a graph: it sees tensors or modules, or names torch."""
    if codegen.is_resume(frame.f_code):
        return True
    if any(_holds_tensor_state(v) for v in frame.f_locals.values()):
        return True
    # globals it names: torch itself, or tensor state (a global model, optimizer, tensor:
    # `def step(): opt.step()` takes no argument and still has all its work there)
    named = [frame.f_globals.get(n) for n in frame.f_code.co_names]
    return any(_is_torch_global(v) or _holds_tensor_state(v) for v in named)


def _is_torch_global(value: Any) -> bool:
    """torch itself, one of its modules, or a torch function bound to a global name
    (`from torch import arange`, an op handed around as a value): factory-only frames too."""
    if isinstance(value, types.ModuleType):
        return value.__name__.startswith("torch") or value is np  # NumPy factories too
    if callable(value) and not isinstance(value, type):
        module = getattr(value, "__module__", None) or ""
        return module == "torch" or module.startswith(("torch.", "torch._ops"))
    return False


class FrameCompiler:
    """callback(frame, cache) for ember_frame_hook."""

    def __init__(
        self,
        backend: Callable,
        *,
        fullgraph: bool = False,
        on_record: Callable[[FrameRecord], None] | None = None,
        suppress_errors: bool = False,
        dynamic: bool | None = None,
        capture_dynamic_output_shape_ops: bool = False,
        capture_scalar_outputs: bool = False,
        guard_filter: GuardFilter | None = None,
        static_parameter_shapes: bool = False,
        guard_fail_fn: GuardFailFn | None = None,
        dynamic_sources: str = "",
    ) -> None:
        self.backend = backend
        self.guard_fail_fn = check_guard_fail_fn(guard_fail_fn)  # told of each recompile
        self.guard_filter = guard_filter  # options={"guard_filter_fn": ...} (guards/filter.py)
        # dynamic=None|True|False and, per code object, the sizes/ints seen (dynamic.py)
        self.dynamic = DynamicPolicy(
            dynamic,
            capture_dynamic_output_shape_ops=capture_dynamic_output_shape_ops,
            capture_scalar_outputs=capture_scalar_outputs,
            static_parameter_shapes=static_parameter_shapes,
            dynamic_sources=dynamic_sources,
        )
        self.fullgraph = fullgraph
        self.on_record = on_record
        self.suppress_errors = suppress_errors
        self.records: list[FrameRecord] = []
        self.skipped: list[tuple[types.CodeType, str]] = []  # frames left to run as they are
        self._crowded_out: set[tuple] = set()  # (code, group) warned about a full cache
        # codes given up at the cache limit: they run as they are with all they call
        self._given_up: weakref.WeakSet[types.CodeType] = weakref.WeakSet()
        # compilers with an equal key share compiled code (shared_code.py)
        self.share_key = share_key(
            type(self), backend, fullgraph=fullgraph, dynamic=dynamic,
            suppress_errors=suppress_errors,
            capture_dynamic_output_shape_ops=capture_dynamic_output_shape_ops,
            capture_scalar_outputs=capture_scalar_outputs,
            guard_filter=guard_filter,
            static_parameter_shapes=static_parameter_shapes,
            dynamic_sources=dynamic_sources,
        )  # fmt: skip
        self.reused: list[FrameRecord] = []  # records of other compilers' code taken over

    def __call__(self, frame: fh.Frame, cache: fh.CacheView) -> fh.GuardedCode | None:
        code = frame.f_code
        if is_skipped(code):
            fh.skip_code(code)
            return None
        if _under_a_transform() or (self._given_up and self._under_given_up()):
            return None
        if _is_mode_handler(frame):
            fh.skip_code(code)
            return None
        # One compile at a time; a thread that waited first looks at what the others cached
        # meanwhile (compile_lock.py), and caches its own entry before letting the next look.
        with COMPILE_LOCK:
            if fh.is_skipped(code):  # given up (or found untraceable) while this one waited
                return None
            now = live_cache(code, cache.limit)
            entry = cached_fit(cache, now, frame.f_locals) or self.compile_miss(frame, now)
            if entry is not None:
                fh.cache_insert(code, entry)
            return entry

    def compile_miss(self, frame: fh.Frame, cache: Any) -> fh.GuardedCode | None:
        """Compiles a frame none of whose cached entries fit (`cache`: those entries, as a
        CacheView); None runs it as it is."""
        code = frame.f_code
        if cache.entries and stance.current() != "default":
            return self._miss_under_stance(frame, cache)
        if cache.full and not self._room_for(frame, cache):
            return None
        shared = shareable_entry(cache.entries, self, self.share_key, frame.f_locals)
        if shared is not None:
            return self._take_over(shared)
        if not has_tensor_work(frame):
            fh.skip_code(code)
            return None
        reason = recompile_reason(cache.entries, frame.f_locals) if cache.entries else None
        if reason is not None and self.guard_fail_fn is not None:
            self.guard_fail_fn(GuardFailure(reason, code))
        emit("frame_start", code=code)
        try:
            record, new_code, guard = self._trace(frame)
        except SkipFrame as exc:
            log.debug("ember: not compiling %s: %s", code.co_name, exc)
            emit("frame_skipped", code=code, reason=str(exc))
            self.skipped.append((code, str(exc)))
            fh.skip_code(code)
            return None
        except BackendCompilerFailed:
            if self.suppress_errors:
                log.warning(
                    "ember: backend failed for %s; running it eagerly", code.co_name, exc_info=True
                )
                emit("frame_skipped", code=code, reason="backend failed (suppress_errors)")
                fh.skip_code(code)
                return None
            raise
        entry = self._entry(new_code, guard, record)
        record.recompile_reason = reason
        self.records.append(record)
        if self.on_record is not None:
            self.on_record(record)
        return entry

    def _entry(self, code: types.CodeType, guard: Any, record: FrameRecord) -> CompiledFrame:
        entry = CompiledFrame(code, _owned_by(self, guard))
        entry.record = record
        entry.compiler = self
        entry.share_key = self.share_key
        return entry

    def _take_over(self, shared: CompiledFrame) -> CompiledFrame:
        """Another compiler's code for this frame, under a guard owned by this one."""
        record = shared.record
        log.debug("ember: %s reuses code compiled for an equal compiler", record.code.co_name)
        emit("frame_reused", code=record.code)
        self.reused.append(record)
        return self._entry(shared.code, record.guards, record)

    def _trace(self, frame: fh.Frame):
        try:
            return trace_frame(
                frame, self.backend, fullgraph=self.fullgraph, dynamic=self.dynamic,
                guard_filter=self.guard_filter,
            )  # fmt: skip
        except BackendCompilerFailed as exc:
            if not getattr(exc, "symbolic", False):
                raise
            # A backend that cannot take symbolic sizes yet: this code's compiles are static
            # from now on (a new size recompiles, as with dynamic=False).
            log.warning(
                "ember: backend failed on a graph with symbolic sizes for %s (%s); compiling "
                "it with static shapes from now on", frame.f_code.co_name, exc,
            )  # fmt: skip
            self.dynamic.state(frame.f_code).static_only = True
            return trace_frame(
                frame, self.backend, fullgraph=self.fullgraph, dynamic=self.dynamic,
                guard_filter=self.guard_filter,
            )  # fmt: skip

    def _miss_under_stance(self, frame: fh.Frame, cache: fh.CacheView) -> None:
        """A recompile under a stance other than "default" (stance.py): run as Python, or
        raise under "fail_on_recompile"."""
        if stance.current() != "fail_on_recompile":
            return None
        code = frame.f_code
        reason = recompile_reason(cache.entries, frame.f_locals) or "unknown"
        if self.guard_fail_fn is not None:
            self.guard_fail_fn(GuardFailure(reason, code))
        raise RecompileRefused(
            f"{code.co_name} ({code.co_filename}:{code.co_firstlineno}) needs a recompile while "
            f"the compile stance is 'fail_on_recompile'; the guard that failed: {reason}. "
            "Set the stance to 'default' (ember.set_stance) to let it compile again"
        )

    def _room_for(self, frame: fh.Frame, cache: fh.CacheView) -> bool:
        """On a full cache: the limit counts only the entries of this frame's group (other
        functions sharing the code object are not recompiles, cache_groups.py). An entry
        whose weakly pinned object died never runs again: it leaves room (the insert evicts
        the least recently used entries, and a dead one is never used)."""
        if any(is_dead(entry) for entry in cache.entries):
            return True
        same = group_entries(cache.entries, frame.f_locals)
        if len(same) == len(cache.entries):
            self._give_up(frame, cache)  # all of them tried for this very function
            return False
        # Other functions' entries fill the cache: they keep them, this call runs as is
        # (its callees are still compiled); its own retries are counted the same way.
        key = (frame.f_code, group_key(frame.f_locals, cache.entries))
        if key not in self._crowded_out:
            self._crowded_out.add(key)
            log.warning(
                "ember: the cache of %s (%s:%d) is full with %d entries for other closures of "
                "the same code; this one runs eagerly",
                frame.f_code.co_name, frame.f_code.co_filename, frame.f_code.co_firstlineno,
                len(cache.entries) - len(same),
            )  # fmt: skip
        return False

    def _under_given_up(self) -> bool:
        """Called (at any depth) from a frame given up at the cache limit: as torch.compile,
        the whole call runs as it is. What kept changing for the caller (an int argument)
        usually reaches its callees too, and each would recompile up to its own limit."""
        caller = sys._getframe(2)
        while caller is not None:
            if caller.f_code in self._given_up and fh.is_skipped(caller.f_code):
                return True
            caller = caller.f_back
        return False

    def _give_up(self, frame: fh.Frame, cache: fh.CacheView) -> None:
        reason = None
        if cache.entries and hasattr(cache.entries[0], "record"):
            reason = cache.entries[0].record.guards.failure_reason(frame.f_locals)
        code = frame.f_code
        log.warning(
            "ember: %s (%s:%d) was recompiled %d times (cache limit); running it eagerly from now "
            "on. The guard that kept failing: %s",
            code.co_name, code.co_filename, code.co_firstlineno, cache.limit, reason or "unknown",
        )  # fmt: skip
        emit("frame_skipped", code=code, reason=f"cache limit; failing guard: {reason}")
        fh.skip_code(code)
        self._given_up.add(code)


def trace_frame(
    frame: Any,
    backend: Callable,
    *,
    fullgraph: bool = False,
    dynamic: DynamicPolicy | None = None,
    guard_filter: GuardFilter | None = None,
):
    """Traces `frame`; returns (record, new code, guard). Raises SkipFrame to run it as is.
    `dynamic` decides which sizes and ints are symbolic (default: none); `guard_filter`
    drops the guards a user's guard_filter_fn rejects."""
    grad_mode = torch.is_grad_enabled()
    hooks_message = disabled_message()  # disable_saved_tensors_hooks runs at trace time too
    try:
        with user_saved_tensor_hooks_suspended():  # autograd on fakes: not the user's pack
            return _trace_frame(frame, backend, fullgraph, dynamic or STATIC_POLICY, guard_filter)
    finally:
        torch._C._set_grad_enabled(grad_mode)  # a trace may switch it (with no_grad(): ...)
        restore_disabled(hooks_message)  # and stop inside a disable_saved_tensors_hooks
        close_trace_time_autocasts()  # and leave a `with torch.autocast()` it stopped in


def _trace_frame(
    frame: Any,
    backend: Callable,
    fullgraph: bool,
    dynamic: DynamicPolicy,
    guard_filter: GuardFilter | None = None,
):
    code = frame.f_code
    break_at: int | None = None
    reason: GraphBreak | None = None
    grad_mode = torch.is_grad_enabled()
    hooks_message = disabled_message()
    for _attempt in range(2):
        torch._C._set_grad_enabled(grad_mode)
        restore_disabled(hooks_message)
        close_trace_time_autocasts()
        tx = _make_translator(frame, dynamic)
        tx.output.guard_filter = guard_filter
        try:
            if break_at is None:
                value = tx.run()
                return _finish_return(tx, frame, value, backend)
            _run_until(tx, break_at)
            return _finish_break(tx, frame, backend, reason)
        except Unsupported as exc:
            location = exc.location or tx.location()
            if fullgraph:
                raise _fullgraph_error(exc, location) from None
            if isinstance(exc, LeafEscapes) and break_at is None:  # graph_leaves.py
                break_at = exc.break_index
                reason = _break_decided(GraphBreak(exc.reason, location, []))
                continue
            if break_at is not None or tx.current is None:
                raise SkipFrame(str(exc)) from exc
            # Trace again from the start and stop just before the instruction that failed,
            # so that nothing it did half-way leaks into the graph or the side effects.
            break_at = tx.index_of[id(tx.current)]
            reason = _break_decided(
                GraphBreak(exc.reason, location, getattr(exc, "user_stack", []))
            )
        finally:
            restore_switched_state(tx.output.entry_switched_state)  # a trace may switch them
            _release(tx)
    raise SkipFrame(f"could not trace {code.co_name}")


def _break_decided(brk: GraphBreak) -> GraphBreak:
    """The trace breaks the graph at `brk`: one `graph_break` event (the umbrella counts it
    by reason in ember.counters["graph_break"]; a trace sink records it with the frame being
    traced). Emitted when the break is decided, as torch.compile counts it: a frame that
    then cannot be rebuilt at the break, and runs as it is, still shows why."""
    emit("graph_break", reason=brk.reason, location=brk.location,
         user_stack=list(brk.user_stack))  # fmt: skip
    return brk


def _release(tx: InstructionTranslator) -> None:
    """A finished trace (compiled, or given up) lets go of the frame's values."""
    tx.output.release()
    tx.symbolic_locals.clear()
    tx.stack.clear()


def _fullgraph_error(exc: Unsupported, location: str) -> Unsupported:
    """The error the user sees: their line, why, and a hint (user_errors.py)."""
    kind = ExampleRuntimeError if _raises_runtime_error(exc) else Unsupported
    error = kind(f"graph break under fullgraph=True: {exc.reason}", location=location)
    error.kind, error.user_stack = kind_of(exc), getattr(exc, "user_stack", [])
    error.message = fullgraph_message(exc, location)
    return error


def _raises_runtime_error(exc: Unsupported) -> bool:
    """Whether eager raises a RuntimeError where the trace stopped: an op refused its example
    values, or the code raised one uncaught (`torch._check(False, ...)`). Under fullgraph the
    caller catches it as that RuntimeError, as torch.compile's error (one) is caught."""
    if isinstance(exc, ExampleRuntimeError):
        return True
    return isinstance(exc, TracedException) and issubclass(exc.exc_type, RuntimeError)


def _make_translator(frame: Any, dynamic: DynamicPolicy = STATIC_POLICY) -> InstructionTranslator:
    code = frame.f_code
    # Inlined functions of other modules reach their globals through sys.modules.
    frame.f_globals.setdefault("__ember_sys__", sys)
    output = OutputGraph(
        f_globals=frame.f_globals, code_name=code.co_name, dynamic=dynamic, code=code
    )
    resume = codegen.RESUMES.get(code)
    shown = {codegen.STACK_ARG: resume.stack_label()} if resume is not None else {}
    symbolic_locals = {
        name: LazyLocal(value, LocalSource(name, shown_as=shown.get(name)))
        for name, value in frame.f_locals.items()
    }
    tx = InstructionTranslator(
        code=code,
        instructions=decode(code),
        symbolic_locals=symbolic_locals,
        f_globals=frame.f_globals,
        f_builtins=_builtins_of(frame.f_globals),
        output=output,
    )
    tx.frame_cells = dict(zip(code.co_freevars, frame.closure or (), strict=False))
    return tx


def _run_until(tx: InstructionTranslator, index: int) -> None:
    while tx.ip != index:
        tx.step()
    tx.current = tx.instructions[index]


def _input_names(
    frame: Any, output: OutputGraph, builder: RecipeBuilder | None = None
) -> list[str]:
    """The runner's arguments: the frame's locals, then the cells of its free variables
    the trace wrote (their writes are replayed through them) or that a function made in the
    trace closes over (its rebuilt copy shares them)."""
    written = [s.name for s, _ in output.side_effects.attributes if is_frame_cell(s)]
    shared = [s.name for _, s in output.objects_by_id.values() if is_frame_cell(s)]
    if builder is not None:  # the frame's own cells, kept at a break
        shared += [FREE_CELL + name for name in builder.cells_read]
    return [*frame.f_locals.keys(), *dict.fromkeys(written + shared)]


def _runner(
    output: OutputGraph,
    compiled: Callable | None,
    input_names: list[str],
    recipes: list,
    side_effects: list,
    *,
    single: bool,
    f_locals: dict[str, Any] | None = None,
    grad_mode_after: bool | None = None,
    hooks_after: tuple[str | None] | None = None,
    builds_objects: bool = True,
) -> Callable:
    f_globals = output.f_globals
    load_inputs = (
        compile_source_loader(
            [i.source for i in output.inputs], output.guards, f_globals, f_locals=f_locals
        )
        if compiled is not None
        else None
    )
    # the rebuild as one generated function where the recipes allow (rebuild_codegen.py)
    rebuild = compile_rebuild(recipes, side_effects, single=single, builds_objects=builds_objects)
    rng = output.rng.runtime()  # RNG calls of the trace, replayed around the graph
    checks = output.check_appliers  # argument checks deferred to run time, before any result
    draws = output.draws  # calls whose results are inputs (NumPy's random draws), in order
    uses_autocast = any(n.target is AUTOCAST_ENTER for n in output.graph.nodes)
    released = _released_early(output)
    disables_hooks = any(n.target in DISABLE_SWITCHES for n in output.graph.nodes)
    switches_state = any(n.target in SWITCHES for n in output.graph.nodes)

    def runner(*args):
        L = dict(zip(input_names, args, strict=True))
        for name, draw in draws:
            L[name] = draw()
        incoming = rng.enter() if rng is not None else None
        if compiled is not None:
            grad_mode = torch.is_grad_enabled()
            autocast = AutocastState.now() if uses_autocast else None
            hooks_message = disabled_message() if disables_hooks else None
            switched = switched_state_now() if switches_state else None
            try:
                inputs = load_inputs(L)
                for load, name in released:  # SideEffects.released_early
                    setattr(load(L, f_globals), name, None)
                outs = compiled(*inputs)
                del inputs
            except BaseException:
                # A with-block's __exit__ (no_grad...) did not run: restore what it would.
                torch._C._set_grad_enabled(grad_mode)
                if switched is not None:
                    restore_switched_state(switched)
                if autocast is not None:
                    autocast.restore()
                if disables_hooks:
                    restore_disabled(hooks_message)
                if rng is not None:  # e.g. freeze_rng_state's `finally` restoring the state
                    rng.leave(incoming)
                raise
        else:
            outs = ()
        _state_after(grad_mode_after, hooks_after)
        if rng is not None:
            rng.leave(incoming)
        for check in checks:  # before any result or side effect reaches the caller
            check(outs)
        if rebuild is not None:
            return rebuild(outs, L, f_globals)
        # Everything is read before anything is written (reconstruct.py: sources name the
        # values the frame saw at entry), and each write is applied once.
        values = [recipe(outs, L, f_globals) for recipe in recipes]
        applies = [write(outs, L, f_globals) for write in side_effects]
        for apply in applies:
            apply()
        return values[0] if single else tuple(values)

    runner.rebuild = rebuild  # for tests and logs
    return runner


def _released_early(output: OutputGraph) -> list[tuple[Callable, str]]:
    """(loader of the object, attribute) of the writes of None made before the graph runs as
    well as after it (SideEffects.released_early), where the trace's last write is still None."""
    se = output.side_effects
    early = []
    for source, name in se.released_early:
        tracker = se.attributes.get((source, name))
        if getattr(tracker, "value", 0) is None and (source, name) not in se.generic_attributes:
            early.append((source_loader(source), name))
    return early


def _side_effect_appliers(output: OutputGraph, builder: RecipeBuilder) -> list:
    """The writes of a call (reconstruct.Write): each reads its target and new value, and
    returns the step that writes it, run once everything has been read."""
    output.check_appliers = check_appliers(output, builder.output_index)
    se = output.side_effects
    for tracker in se.containers.values():
        builder.recipe(tracker)  # registers the container's same-object write
    effects = builder.writes
    for (source, name), tracker in se.attributes.items():
        recipe = builder.recipe(tracker)
        load, expr = source_loader(source), source.expr()
        generic = (source, name) in se.generic_attributes
        setter = object.__setattr__ if generic else setattr

        def set_attribute(outs, L, G, load=load, name=name, recipe=recipe, setter=setter):
            target, new = load(L, G), recipe(outs, L, G)
            return lambda: setter(target, name, new)

        def emit_attribute(code, expr=expr, name=name, recipe=recipe, generic=generic):
            target, new = code.temp(expr), code.temp(code.value(recipe))
            setter = "object.__setattr__" if generic else "setattr"
            return [f"{setter}({target}, {code.const(name)}, {new})"]

        effects.append(emits_write(set_attribute, emit_attribute))
    for name, tracker in se.global_writes.items():
        recipe = builder.recipe(tracker)

        def set_global(outs, L, G, name=name, recipe=recipe):
            new = recipe(outs, L, G)
            return lambda: G.__setitem__(name, new)

        def emit_global(code, name=name, recipe=recipe):
            new = code.temp(code.value(recipe))
            return [f"G[{code.const(name)}] = {new}"]

        effects.append(emits_write(set_global, emit_global))
    for call in se.calls:
        effects.append(_deferred_call(builder.recipe(call.owner), call))
    effects.extend(tensor_attribute_writes(se.tensor_attributes, builder))
    check_leaves_stay(output, builder.outputs)  # after every recipe added its outputs
    return effects


def _deferred_call(owner: Callable, call: DeferredCall) -> Callable:
    """The write that makes a deferred call (logging_calls.py) once everything was read."""
    name, args, kwargs = call.name, tuple(call.args), dict(call.kwargs)

    def make_call(outs, L, G):
        target = owner(outs, L, G)
        return lambda: getattr(target, name)(*args, **kwargs)

    def emit_call(code):
        target = code.temp(code.value(owner))
        spread = f"*{code.const(args)}, **{code.const(kwargs)}"
        return [f"getattr({target}, {code.const(name)})({spread})"]

    return emits_write(make_call, emit_call)


def _compile_graph(
    tx: InstructionTranslator, builder: RecipeBuilder, backend: Callable, record: FrameRecord
):
    output = tx.output
    if not builder.outputs and all(
        n.target is torch._C._set_grad_enabled
        for n in output.graph.nodes
        if n.op.startswith("call")
    ):
        # Nothing but grad-mode switches (a break inside `with no_grad()` before any op):
        # no graph; the runner sets the mode the trace ended in (grad_mode_after).
        return None
    sub = output.compile_subgraph(list(builder.outputs), backend, location=tx.location())
    record.graphs.append(sub.graph_module)
    return sub.compiled


def _grad_mode_after(output: OutputGraph) -> bool | None:
    """The grad mode the frame is in where the trace stopped, when a with-block switched it
    (a break inside `no_grad()`, a resume function leaving one): the runner sets it after
    the graph, whatever the backend did with the graph's own grad-mode calls."""
    now = torch.is_grad_enabled()
    return now if now != output.entry_grad_mode else None


def _state_after(grad_mode: bool | None, hooks: tuple[str | None] | None) -> None:
    """A break inside a grad-mode or disable_saved_tensors_hooks block: its state holds."""
    if grad_mode is not None:
        torch._C._set_grad_enabled(grad_mode)
    if hooks is not None:
        restore_disabled(hooks[0])


def _hooks_after(output: OutputGraph) -> tuple[str | None] | None:
    """(the saved-tensor hooks state where the trace stopped,) when it differs from the
    frame's entry (a break inside disable_saved_tensors_hooks, a resume function leaving
    it): the runner sets it, whatever the backend did with the graph's switches."""
    now = disabled_message()
    return (now,) if now != output.entry_hooks_message else None


def _install_runner(frame: Any, runner: Callable) -> str:
    name = f"__ember_runner_{next(_runner_ids)}"
    frame.f_globals[name] = runner
    return name


def _finish_return(tx: InstructionTranslator, frame: Any, value, backend):
    output = tx.output
    if output.count_calls() == 0 and not output.side_effects:
        raise SkipFrame("no tensor operations")
    record = FrameRecord(frame.f_code)
    builder = RecipeBuilder({id(t) for t in output.side_effects.containers.values()})
    recipes = [builder.recipe(value)]
    effects = _side_effect_appliers(output, builder)
    compiled = _compile_graph(tx, builder, backend, record)
    names = _input_names(frame, output)
    runner = _runner(
        output,
        compiled,
        names,
        recipes,
        effects,
        single=True,
        f_locals=frame.f_locals,
        grad_mode_after=_grad_mode_after(output),
        hooks_after=_hooks_after(output),
        builds_objects=builder.builds_objects,
    )
    runner_name = _install_runner(frame, runner)
    new_code = codegen.whole_frame_code(frame.f_code, runner_name, names)
    record.runner, record.input_names = runner, names
    return _finalize(record, new_code, output, frame)


def _under_a_transform() -> bool:
    """torch.jit.trace is recording (its tensors' sizes are tensors, and it records the ops
    that run), or a torch.func transform (vmap, jvp, grad) is active (its tensors are
    wrappers without storage), or a user's TorchDispatchMode is on the stack (a trace would
    run its __torch_dispatch__ on the trace's fake tensors; torch.compile skips such frames
    too, unless the mode says `ignore_compile_internals`): frames met there run as they
    are, nothing cached."""
    return (
        torch._C._get_tracing_state() is not None
        or torch._C._functorch.peek_interpreter_stack() is not None
        or any_torch_dispatch_mode_on_stack()
    )


def _is_mode_handler(frame: fh.Frame) -> bool:
    """The `__torch_dispatch__` of a user's TorchDispatchMode, called by the dispatcher for an
    op (its mode is popped meanwhile): torch wraps it so that torch.compile never compiles
    it (`_should_skip_dynamo`); it runs as it is here too."""
    if frame.f_code.co_name != "__torch_dispatch__":
        return False
    mode = frame.f_locals.get("self")
    return isinstance(mode, TorchDispatchMode) and bool(mode._should_skip_dynamo())


def recompile_reason(entries: tuple, f_locals: dict[str, Any]) -> str:
    """Why none of a code object's cached entries ran for this frame: each entry's first
    failing guard, newest first. An entry whose guards all pass when re-checked here was
    missed by the cached lookup itself (a fault in a guard program or the frame hook):
    say so, rather than print no reason or another entry's."""
    reasons = []
    for entry in entries:
        record = getattr(entry, "record", None)
        if record is None:
            reasons.append("the cached code was compiled by another ember.compile call")
        else:
            reasons.append(
                record.guards.failure_reason(f_locals)
                or "a cached entry's guards pass when re-checked, yet the cached lookup missed "
                "it (a guard program fault: please report it with EMBER_LOGS=+guards)"
            )
    newest, older = reasons[0], reasons[1:]
    if not older:
        return newest
    return f"{newest} (older entries: {'; '.join(f'[{i}] {r}' for i, r in enumerate(older, 1))})"


def _finish_break(tx: InstructionTranslator, frame: Any, backend, reason: GraphBreak):
    output = tx.output
    code = frame.f_code
    inst: Instruction = tx.current
    stack_slots = []
    stack_values = []
    for value in tx.stack:
        if isinstance(value, NullVariable):
            stack_slots.append(codegen.StackSlot(True))
        else:
            _check_rebuildable(value)
            stack_slots.append(codegen.StackSlot(False))
            stack_values.append(value)
    # The saved-stack argument of a resume function is dead once its prologue ran.
    live = [n for n in tx.symbolic_locals if n not in code.co_freevars and n != codegen.STACK_ARG]
    for name in live:
        if not isinstance(tx.symbolic_locals[name], LazyLocal):
            _check_rebuildable(tx.symbolic_locals[name])
    record = FrameRecord(code)
    record.breaks.append(reason)
    builder = RecipeBuilder({id(t) for t in output.side_effects.containers.values()})
    builder.frame_cells = (tx, code.co_cellvars)  # kept by the rewritten frame (codegen.py)
    recipes = [builder.recipe(v) for v in stack_values]
    close_at_break(output, stack_values)  # disable_saved_tensors_hooks blocks left open
    for name in live:
        value = tx.symbolic_locals[name]
        if isinstance(value, LazyLocal):
            load = source_loader(value.source)
            recipes.append(lambda outs, L, G, load=load: load(L, G))
        else:
            recipes.append(builder.recipe(value))
    effects = _side_effect_appliers(output, builder)
    compiled = _compile_graph(tx, builder, backend, record)
    names = _input_names(frame, output, builder)
    runner = _runner(
        output,
        compiled,
        names,
        recipes,
        effects,
        single=False,
        f_locals=frame.f_locals,
        grad_mode_after=_grad_mode_after(output),
        hooks_after=_hooks_after(output),
        builds_objects=builder.builds_objects,
    )
    runner_name = _install_runner(frame, runner)
    resumes: dict[str, types.CodeType] = {}
    new_code = codegen.break_code(
        code, runner_name, names, inst, tx.kw_names, stack_slots, live, resumes, frame.f_globals
    )
    return _finalize(record, new_code, output, frame)


# Process state a backend compiles for (the kernels it picks, TF32 in generated matmuls)
# that traced code cannot change (its setters are graph breaks): the value at the trace.
_BACKEND_STATE = ("deterministic_algorithms", "cublas_allow_tf32")


def _backend_state_guards() -> list[Guard]:
    guards = []
    for name in _BACKEND_STATE:
        query = torch_state_query(name)
        if query is not None:  # a torch without the query has no such state
            guards.append(Guard(TorchStateSource(name), GuardKind.EQUALS_MATCH, query()))
    return guards


def _check_rebuildable(value) -> None:
    if isinstance(value, ListIteratorVariable | CellReference):
        raise SkipFrame(f"graph break with a {type(value).__name__} live")


def _finalize(record: FrameRecord, new_code: types.CodeType, output: OutputGraph, frame: Any):
    guards = list(output.guards)
    # The graph was traced with grad mode as it is now, and with distinct tensor inputs
    # distinct: a later call that aliases two of them (and may mutate one) must retrace.
    guards.append(
        Guard(TorchStateSource("grad_enabled"), GuardKind.EQUALS_MATCH, output.entry_grad_mode)
    )
    guards += output.entry_autocast.guards()
    guards += _backend_state_guards()
    guards += distinct_object_guards(output)
    tensor_sources = [
        i.source
        for i in output.inputs
        if isinstance(i.value, torch.Tensor) and not output.is_drawn(i.source)
    ]
    if len(tensor_sources) > 1:
        guards.append(
            Guard(tensor_sources[0], GuardKind.NO_TENSOR_ALIASING, tuple(tensor_sources[1:]))
        )
    # Mutations of a list or dict were traced as of one object: two containers that were
    # distinct must stay distinct, or a mutation of one would be missed through the other.
    container_sources = [t.source for _, t in output.containers_by_id.values()]
    if output.side_effects.containers and len(container_sources) > 1:
        guards.append(
            Guard(container_sources[0], GuardKind.NO_TENSOR_ALIASING, tuple(container_sources[1:]))
        )
    if output.guard_filter is not None:  # the user's choice of guards to skip (unsafe)
        guards = filter_guards(guards, output.guard_filter, frame.f_globals, frame.f_locals)
    guard = compile_guards(guards, frame.f_globals, f_locals=frame.f_locals)
    # The shape guards of a symbolic trace join the same check (dynamic.py).
    guard = output.dynamic.wrap_guard(guard, frame.f_globals)
    output.dynamic.commit()
    record.guards = guard
    record.pinned_locals = pinned_locals(guards)
    record.new_code = new_code
    if log.isEnabledFor(logging.DEBUG):
        log.debug(
            "rewritten bytecode of %s:\n%s",
            frame.f_code.co_name,
            format_instructions(decode(new_code)),
        )
    return record, new_code, guard


__all__ = ["CompiledFrame", "FrameCompiler", "FrameRecord", "GraphBreak", "trace_frame"]
