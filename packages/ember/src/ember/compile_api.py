"""`ember.compile`, `ember.disable` and run-only mode."""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import torch

import ember_frame_hook as fh
from ember.backends import handles_symbolic_sizes, lookup_backend, per_size_unless_declared
from ember.config import config, frame_cache_limit
from ember.distributed.ddp_split import split_for_ddp
from ember.env_settings import check_environment
from ember.exc import EmberError
from ember.logs import configure_from_env, full_tracebacks, log_record
from ember.progress import ProgressFrameCompiler
from ember.stance import hook_for, one_trace
from ember.stats import clear as clear_counters
from ember.torch_support import check_torch
from ember.trace import configure as configure_trace
from ember.trace import on_frame, traced_backend
from ember_bytecode_tracer.convert_frame import FrameCompiler, is_skipped, trace_entry_code
from ember_bytecode_tracer.directives import register_compiled
from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guard_failures import GuardFailure

_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def compile(
    model: Callable | None = None,
    *,
    backend: str | Callable = "inductor",
    fullgraph: bool = False,
    dynamic: bool | None = None,
    mode: str | None = None,
    options: dict[str, Any] | None = None,
    disable: bool = False,
    guard_fail_fn: Callable[[GuardFailure], object] | None = None,
) -> Any:
    """Compile a function or nn.Module; usable as `@ember.compile` or `@ember.compile(...)`.
    `guard_fail_fn`, if given, is called with a GuardFailure (`.reason`, `.code`) each time a
    compiled frame's cached code no longer fits a call and it compiles again."""
    if model is None:
        return functools.partial(
            compile, backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode,
            options=options, disable=disable, guard_fail_fn=guard_fail_fn,
        )  # fmt: skip
    _check_arguments(model, fullgraph, dynamic, mode, options)
    if guard_fail_fn is not None and not callable(guard_fail_fn):
        raise EmberError(
            "guard_fail_fn must be a function taking one ember.GuardFailure (or None), got "
            f"{type(guard_fail_fn).__name__}"
        )
    if disable:
        return model
    while not isinstance(model, torch.nn.Module) and hasattr(model, "_ember_compiler"):
        model = model._ember_original  # compiling a compiled function compiles its function
    check_torch(suppress_errors=config.suppress_errors)
    check_environment()  # a malformed EMBER_* setting names itself (env_settings.py)
    guard_filter, backend_options = _split_guard_filter(options)
    backend_fn = lookup_backend(backend, mode, backend_options)
    if config.optimize_ddp:
        backend_fn = split_for_ddp(backend_fn)
    # a backend that compiles for its example inputs only: one compile per size (per_size.py)
    backend_fn = per_size_unless_declared(backend_fn, handles_symbolic_sizes(backend))
    configure_from_env()
    if configure_trace() is not None:  # EMBER_TRACE_DIR: record what this compile does
        backend_fn, on_record = traced_backend(backend_fn), _log_and_trace
    else:
        on_record = log_record
    fh.set_cache_limit(frame_cache_limit(config.cache_size_limit))
    compiler = ProgressFrameCompiler(  # the status line of slow compiles (progress.py)
        backend_fn,
        fullgraph=fullgraph,
        suppress_errors=config.suppress_errors,
        on_record=on_record,
        dynamic=dynamic,
        capture_dynamic_output_shape_ops=config.capture_dynamic_output_shape_ops,
        capture_scalar_outputs=config.capture_scalar_outputs,
        guard_filter=guard_filter,
        static_parameter_shapes=config.static_parameter_shapes,
        guard_fail_fn=guard_fail_fn,
        dynamic_sources=config.dynamic_sources,
    )
    if isinstance(model, torch.nn.Module):
        recipe = {"backend": backend, "fullgraph": fullgraph, "dynamic": dynamic, "mode": mode,
                  "options": options, "guard_fail_fn": guard_fail_fn}  # fmt: skip
        return OptimizedModule(model, compiler, recipe)
    return _wrap_function(model if _has_python_frame(model) else _entry_frame(model), compiler)


def _has_python_frame(fn: Any) -> bool:
    """Whether calling `fn` starts a Python frame the frame hook traces: a user's function,
    method, class or object whose `__call__` is theirs. An OpOverload (its `__call__` is
    torch's), a builtin or a torch function (skipped as torch's own) has none."""
    if isinstance(fn, type | functools.partial):
        return True
    target = fn.__func__ if inspect.ismethod(fn) else fn
    if not inspect.isfunction(target):
        target = inspect.getattr_static(type(fn), "__call__", None)
    return inspect.isfunction(target) and not is_skipped(target.__code__)


def _entry_frame(fn: Callable) -> Callable:
    """A C callable (`torch.ops.aten.add.Tensor`, `torch.sin`) compiled: called from a Python
    frame of its own, which Ember traces (the call becomes the graph), as torch.compile
    compiles such a callable."""

    def call_compiled(*args, **kwargs):
        return fn(*args, **kwargs)

    call_compiled.__wrapped__ = fn
    return call_compiled


trace_entry_code(_entry_frame(len).__code__)  # one code object for every entry frame


def _at_user_frame(exc: BaseException) -> BaseException:
    """The error with its traceback cut where the user called the compiled code: the chain
    through the frame hook and the tracer is noise to a user (its message names their line).
    EMBER_LOGS=+all or config.verbose keep the whole chain."""
    return exc if full_tracebacks() else exc.with_traceback(None)


def _log_and_trace(record) -> None:
    log_record(record)
    on_frame(record)


def _split_guard_filter(options: dict[str, Any] | None) -> tuple[Callable | None, dict | None]:
    """`guard_filter_fn` is the tracer's (which guards to install, as torch.compile's option of
    that name); the other options are the backend's."""
    if not options or "guard_filter_fn" not in options:
        return None, options
    rest = {k: v for k, v in options.items() if k != "guard_filter_fn"}
    keep = options["guard_filter_fn"]
    if not callable(keep):
        raise EmberError(
            f"options['guard_filter_fn'] must be a function taking the list of guard entries "
            f"and returning one bool per entry, got {type(keep).__name__}"
        )
    return keep, rest or None


def _check_arguments(model, fullgraph, dynamic, mode, options) -> None:
    if not callable(model):
        raise EmberError(
            f"ember.compile expects a function or nn.Module, got {type(model).__name__}"
        )
    if inspect.iscoroutinefunction(model) or inspect.isasyncgenfunction(model):
        raise EmberError(f"ember.compile cannot compile async function {model.__qualname__}")
    if not isinstance(fullgraph, bool):
        raise EmberError(f"fullgraph must be True or False, got {fullgraph!r}")
    if dynamic not in (None, False, True):
        raise EmberError(f"dynamic must be None, True or False, got {dynamic!r}")
    if mode not in _MODES:
        raise EmberError(f"mode must be one of {_MODES}, got {mode!r}")
    if options is not None and not isinstance(options, dict):
        raise EmberError(f"options must be a dict, got {type(options).__name__}")


def _wrap_function(fn: Callable, compiler: FrameCompiler) -> Callable:
    if inspect.isgeneratorfunction(fn):
        return _wrap_generator_function(fn, compiler)

    @functools.wraps(fn)
    def compiled(*args, **kwargs):
        if fh.get_eval_frame() is False:  # run-only mode (ember.run()): nothing new compiles
            return fn(*args, **kwargs)
        previous = fh.set_eval_frame(hook_for(compiler))
        try:
            return fn(*args, **kwargs)
        except Unsupported as exc:  # fullgraph=True: the message shows the user's line
            raise _at_user_frame(exc) from None
        finally:
            fh.set_eval_frame(previous)

    compiled._ember_compiler = compiler  # for explain() and tests
    compiled._ember_original = fn  # the tracer traces this one when called from compiled code
    register_compiled(compiled, fn)  # called in another compile's trace: fn, traced there
    return compiled


def _wrap_generator_function(fn: Callable, compiler: FrameCompiler) -> Callable:
    """A generator function's body runs as Python (the frame hook leaves generator frames
    alone); each step of it runs with the hook set, so the functions it calls compile."""

    @functools.wraps(fn)
    def compiled(*args, **kwargs):
        return (yield from _steps_with_hook(fn(*args, **kwargs), compiler))

    compiled._ember_compiler = compiler
    compiled._ember_original = fn
    return compiled


def _steps_with_hook(gen: Any, compiler: FrameCompiler) -> Any:
    """`yield from gen` (send, throw and close included), the hook set only inside gen."""
    sent, thrown = None, None
    while True:
        previous = fh.set_eval_frame(hook_for(compiler))
        try:
            item = gen.send(sent) if thrown is None else gen.throw(thrown)
        except StopIteration as stop:
            return stop.value
        finally:
            fh.set_eval_frame(previous)
        sent, thrown = None, None
        try:
            sent = yield item
        except GeneratorExit:
            gen.close()
            raise
        except BaseException as exc:
            thrown = exc


class OptimizedModule(torch.nn.Module):
    """The compiled module: it mirrors the original (`_orig_mod`), as torch.compile's does.

    Attribute reads, writes and deletes, `training`, `len`/`bool`, iteration, indexing and
    membership go to the original; only `forward` (the original's `__call__`, hooks included,
    run with Ember's frame hook set) and the compile state are the wrapper's own. Parameters and
    buffers are the original's, under the `_orig_mod.` prefix as torch.compile has them.
    """

    _own_attributes = frozenset({"_orig_mod", "_ember_compiler", "_mirror_ready", "_ember_recipe"})

    def __init__(
        self, module: torch.nn.Module, compiler: FrameCompiler, recipe: dict | None = None
    ) -> None:
        object.__setattr__(self, "_mirror_ready", False)  # Module.__init__ sets `training`
        super().__init__()
        self._orig_mod = module  # registered as a submodule: parameters, state_dict, .to()
        self._ember_compiler = compiler
        self._ember_recipe = recipe  # how it was compiled: pickling keeps that, not the code
        self._mirror_ready = True

    def __reduce__(self) -> tuple:
        """Pickled (torch.save) and copied as the original module and the arguments of
        ember.compile: loading compiles the loaded module again (compiled code and caches
        are never saved). The backend must be picklable, a name or a module-level function."""
        if self._ember_recipe is None:
            raise TypeError("this compiled module was not made by ember.compile: not picklable")
        return (_compile_again, (self._orig_mod, self._ember_recipe))

    def compile_also(self, fn: Callable) -> Callable:
        """`fn` compiled as this module is: the same compiler (backend, settings, caches and
        recompile limit). For a module's other entry points, e.g. a `training_step` that
        calls `self(...)`: training frameworks put `compile_also(model.forward)` and
        `compile_also(model.training_step)` on the uncompiled model (torch.compile's module
        offers the same as `dynamo_ctx`)."""
        if isinstance(fn, torch.nn.Module):
            return OptimizedModule(fn, self._ember_compiler, self._ember_recipe)
        return _wrap_function(
            fn if _has_python_frame(fn) else _entry_frame(fn), self._ember_compiler
        )

    def forward(self, *args, **kwargs):
        module = self._orig_mod
        if hasattr(module, "_initialize_hook"):
            # A lazy module infers its parameters from the first arguments, as Python (as
            # torch.compile's does): its hooks are gone before anything is traced.
            module._infer_parameters(module, args, kwargs)
        previous = fh.set_eval_frame(hook_for(self._ember_compiler))
        try:
            # nn.Module.__call__ runs as Python: the module's own hooks are frames of their
            # own around forward's, as under torch.compile (its children's are traced)
            return module(*args, **kwargs)
        except Unsupported as exc:  # fullgraph=True: the message shows the user's line
            raise _at_user_frame(exc) from None
        finally:
            fh.set_eval_frame(previous)

    @property
    def training(self) -> bool:  # type: ignore[override]
        return self._orig_mod.training

    @training.setter
    def training(self, value: bool) -> None:
        if self._mirror_ready:  # the default that Module.__init__ writes is not the module's
            self._orig_mod.training = value

    def __getattr__(self, name: str) -> Any:
        module = self.__dict__.get("_modules", {}).get("_orig_mod")
        if module is None:  # half built (unpickling, copying): nothing to mirror yet
            raise AttributeError(name)
        return module if name == "_orig_mod" else getattr(module, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._own_attributes or hasattr(type(self), name):
            super().__setattr__(name, value)
        else:
            setattr(self._orig_mod, name, value)

    def __delattr__(self, name: str) -> None:
        if name in self._own_attributes or hasattr(type(self), name):
            super().__delattr__(name)
        else:
            delattr(self._orig_mod, name)

    def __len__(self) -> int:
        return len(self._orig_mod)  # a TypeError where the module has no length

    def __bool__(self) -> bool:
        return bool(self._orig_mod)  # an empty ModuleList is falsy

    def __iter__(self) -> Iterator[Any]:
        return iter(self._orig_mod)

    def __getitem__(self, key: Any) -> Any:
        return self._orig_mod[key]

    def __contains__(self, item: Any) -> bool:
        return item in self._orig_mod

    def __dir__(self) -> list[str]:
        own = self._orig_mod.__dir__()
        return own + [name for name in super().__dir__() if name not in own]


def _compile_again(module: torch.nn.Module, recipe: dict) -> OptimizedModule:
    return compile(module, **recipe)


def disable(fn: Callable | None = None) -> Any:
    """Runs `fn` (or, as a context manager, a block) with Ember off."""
    if fn is None:
        return _hook_set_to(None)

    @functools.wraps(fn)
    def plain(*args, **kwargs):
        with _hook_set_to(None):
            return fn(*args, **kwargs)

    return plain


def run() -> contextlib.AbstractContextManager:
    """Run-only mode: code compiled earlier runs, nothing new is compiled (compiled functions
    called inside it included)."""
    return _hook_set_to(False)


@contextlib.contextmanager
def _hook_set_to(setting) -> Iterator[None]:
    previous = fh.set_eval_frame(setting)
    try:
        yield
    finally:
        fh.set_eval_frame(previous)


def trace_once(fn: Callable, compiler: FrameCompiler, args: tuple, kwargs: dict) -> None:
    """Runs `fn` once with `compiler` as the hook, from and back to empty caches, so that
    nothing it compiles outlives the call (explain and export inspect the records)."""
    fh.reset()
    previous = fh.set_eval_frame(compiler)
    try:
        with one_trace(compiler):  # compiled wrappers that fn calls set this compiler
            fn(*args, **kwargs)
    finally:
        fh.set_eval_frame(previous)
        fh.reset()


def reset() -> None:
    """Forget everything compiled: every cache entry, skip mark and counter."""
    fh.reset()
    clear_counters()
