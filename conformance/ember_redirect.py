"""pytest plugin (`-p ember_redirect`): PyTorch's own test files, compiled by Ember.

Before collection it replaces the entry points PyTorch's Dynamo tests compile through with
Ember's: `torch.compile`, `torch._dynamo.optimize`, `torch._dynamo.optimize_assert` and
`torch._dynamo.reset` (also the name `torch._dynamo.test_case` imported, which every
`TestCase.setUp`/`tearDown` calls); `torch._dynamo.OptimizedModule`, the type torch.compile
returns for a module, names Ember's compiled-module type; `torch.compiler.set_stance` sets
Ember's stance (`ember.set_stance`). Tooling only: the conformance harness loads it; product
code never does.

Graph breaks: each break Ember's tracer decides on (its `graph_break` event) is counted in
`torch._dynamo.utils.counters["graph_break"]` too, keyed by Ember's reason, as it happens
(so a test's `counters.clear()` clears what it reads next).

Backends: the strings Ember knows under the same name go by that name; any other string is
resolved through PyTorch's backend registry to its callable (Dynamo's convention,
`backend(gm, example_inputs)`, which Ember's tracer follows); callables pass through. PyTorch's
test backends that only run the graph as it is (`CompileCounter`, `EagerAndRecordGraphs`,
`CompileCounterWithBackend("eager")`, the `eager` functions) handle symbolic sizes and are
declared so (`ember.backends.symbolic_sizes`): Ember calls them once per graph, as Dynamo does;
so is `CompileCounterWithBackend("inductor")`, whose compile_fx is Ember's inductor (below).
The ones that run PyTorch's AOT on the example inputs they are handed
(`AotEagerAndRecordGraphs`, `CompileCounterWithBackend("aot_eager")`, ...) are not: Ember
compiles a symbolic graph with them once per concrete size, so counts of their calls can
differ from Dynamo's where sizes are dynamic.

Inductor's tests (test/inductor/test_torchinductor.py) compile through a backend of their own
that calls `torch._inductor.compile_fx.compile_fx(gm, example_inputs)` (CommonTemplate's
`check_model`: `torch.compile(run, backend=compile_fx_wrapper)`); the test module binds that
name at import (`from torch._inductor.compile_fx import compile_fx`), so it is replaced here,
before collection, by Ember's inductor backend: Ember traces, and the graph it hands to the
test's backend is compiled by Ember's inductor, not PyTorch's. The harness may import
torch._inductor (it is a test harness; product code never does).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import re
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch._dynamo
import torch._dynamo.test_case
import torch._dynamo.utils

import ember
import ember_frame_hook as fh
import ember_symbolic as es
from ember_bytecode_tracer.directives import (
    allow_in_graph as ember_allow_in_graph,
)
from ember_bytecode_tracer.directives import register_compiled, register_graph_break
from ember_bytecode_tracer.exc import Unsupported as EmberUnsupported
from ember_bytecode_tracer.variables.foreign_patches import register_foreign_wrapper
from ember_events import subscribe

# Dynamo backend name -> Ember backend name
BACKEND_NAMES = {"eager": "eager", "aot_eager": "aot_eager", "inductor": "inductor"}

ORIGINAL: dict[str, Callable] = {}
CALLS = {"compile": 0, "compile_fx": 0}  # how often tests reached Ember (summary line)


def ember_backend(backend: str | Callable | None) -> str | Callable:
    """The backend Ember is given for a Dynamo `backend=` argument."""
    if backend is None:
        return "inductor"
    if callable(backend):
        return _declared(backend)
    if backend in BACKEND_NAMES:
        return BACKEND_NAMES[backend]
    from torch._dynamo.backends.registry import lookup_backend

    return _declared(lookup_backend(backend))


#: names of PyTorch's eager backends (gm.forward, perhaps in a try block)
_EAGER_NAMES = ("eager", "eager_noexcept")


def _runs_graph_as_is(backend: Callable) -> bool:
    """PyTorch's test backends that return the graph's own forward (read in
    torch/_dynamo/testing.py and backends/debugging.py): they handle symbolic sizes."""
    import torch._dynamo.backends.debugging as debugging
    import torch._dynamo.testing as testing

    if isinstance(backend, (testing.CompileCounter, testing.EagerAndRecordGraphs)):
        return True
    if isinstance(backend, testing.CompileCounterWithBackend):
        # "inductor" reaches torch._inductor.compile_fx.compile_fx, which is Ember's
        # inductor here (install_inductor), declared for symbolic sizes
        return backend.backend in (*_EAGER_NAMES, "inductor")
    plain = [testing.dummy_fx_compile, *(getattr(debugging, n) for n in _EAGER_NAMES)]
    return any(backend is b for b in plain)


def _declared(backend: Callable) -> Callable:
    return ember.backends.symbolic_sizes(backend) if _runs_graph_as_is(backend) else backend


def dynamic_setting(dynamic: bool | None) -> bool | None:
    """Ember's `dynamic=` for a Dynamo one, read with Dynamo's shape settings as they are
    when the test compiles: `assume_static_by_default=False` makes every size symbolic from
    the first call (Ember's dynamic=True); `automatic_dynamic_shapes=False` never turns a
    size that changed symbolic (Ember's dynamic=False: one compile per size). An explicit
    True/False wins, as in Dynamo."""
    if dynamic is not None:
        return dynamic
    settings = torch._dynamo.config
    if not settings.assume_static_by_default:
        return True
    if not settings.automatic_dynamic_shapes:
        return False
    return None


def _sync_settings() -> None:
    """Dynamo's settings that Ember has under another name, as they are now: the recompile
    limit is Ember's cache_size_limit (compiled variants per code object before the frame
    runs eagerly; read by ember.compile), capture_dynamic_output_shape_ops is Ember's own
    (nonzero and friends with an unbacked size instead of a break), as is
    capture_scalar_outputs (item()/tolist() as unbacked scalars in the graph),
    force_parameter_static_shapes is Ember's static_parameter_shapes, suppress_errors
    (a failing backend runs the frame eagerly) is Ember's own, and torch.compiler.config's
    dynamic_sources (inputs symbolic from the first compile, by name) is Ember's too.
    Ember has no unbacked inputs: an input in torch.compiler.config.unbacked_sources is
    one of Ember's dynamic_sources (symbolic from the first compile; an int at 0 and 1
    too; what the trace needs of its value is guarded, where torch would refuse it)."""
    settings = torch._dynamo.config
    ember.config.cache_size_limit = settings.recompile_limit
    ember.config.capture_dynamic_output_shape_ops = settings.capture_dynamic_output_shape_ops
    ember.config.capture_scalar_outputs = settings.capture_scalar_outputs
    ember.config.static_parameter_shapes = settings.force_parameter_static_shapes
    ember.config.suppress_errors = settings.suppress_errors
    # (plain reads when both are empty: this runs inside traced code too, a torch.compile
    # called from a function Ember traces)
    dynamic, unbacked = (
        torch.compiler.config.dynamic_sources,
        torch.compiler.config.unbacked_sources,
    )
    names = f"{dynamic},{unbacked}" if dynamic or unbacked else ""
    ember.config.dynamic_sources = ember_source_names(names) if names else ""


# Dynamo names a submodule, parameter or buffer through the module's own dicts
# (`L['self']._modules['lin']._parameters['weight']`); Ember's sources show the attribute
# path a user writes (`L['self'].lin.weight`).
_MODULE_DICT_STEP = re.compile(r"\._(?:modules|parameters|buffers)\[['\"]([A-Za-z_]\w*)['\"]\]")


def ember_source_names(names: str) -> str:
    """A Dynamo `dynamic_sources` list in Ember's source names."""
    return _MODULE_DICT_STEP.sub(r".\1", names)


def compile(model: Callable | None = None, **kwargs: Any) -> Any:
    """torch.compile, compiled by Ember; arguments Ember has no counterpart for are dropped."""
    options = {
        "backend": ember_backend(kwargs.get("backend")),
        "fullgraph": kwargs.get("fullgraph", False),
        "dynamic": dynamic_setting(kwargs.get("dynamic")),
        "mode": kwargs.get("mode"),
        "options": kwargs.get("options"),
        "disable": kwargs.get("disable", False),
        "guard_fail_fn": _on_guard_failure(None),
    }
    if model is None:
        return functools.partial(_ember_compile, **options)
    return _ember_compile(model, **options)


def _ember_compile(model: Callable, **options: Any) -> Any:
    CALLS["compile"] += 1
    _sync_settings()
    return ember.compile(model, **options)


class _DynamoGuardFail(NamedTuple):
    """Dynamo's GuardFail record (`reason`, `orig_code`), from Ember's GuardFailure."""

    reason: str
    orig_code: Any


class _on_guard_failure:
    """Ember's guard_fail_fn for a redirected compile: Dynamo's error_on_recompile (read at
    the recompile, as Dynamo does) is Ember's refusal to recompile; a user's guard_fail_fn
    (optimize's argument) gets Dynamo's record."""

    def __init__(self, user_fn: Callable | None) -> None:
        self.user_fn = user_fn

    def __call__(self, failure: ember.GuardFailure) -> None:
        if torch._dynamo.config.error_on_recompile:
            code = failure.code
            raise ember.exc.RecompileRefused(
                f"{code.co_name} ({code.co_filename}:{code.co_firstlineno}) needs a recompile "
                f"while torch._dynamo.config.error_on_recompile is set: {failure.reason}"
            )
        if self.user_fn is None:
            return
        try:  # Dynamo logs what its guard_fail_fn raises and compiles on
            self.user_fn(_DynamoGuardFail(failure.reason, failure.code))
        except Exception:
            logging.getLogger(__name__).exception("guard_fail_fn raised (ignored, as by Dynamo)")


class _Optimize:
    """What torch._dynamo.optimize(...) returns: a decorator that compiles with Ember."""

    def __init__(
        self,
        backend: Any,
        fullgraph: bool,
        dynamic: bool | None,
        disable: bool,
        guard_fail_fn: Callable | None = None,
    ):
        self.options = {
            "backend": ember_backend(backend),
            "fullgraph": fullgraph,
            "dynamic": dynamic_setting(dynamic),
            "disable": disable,
            "guard_fail_fn": _on_guard_failure(guard_fail_fn),
        }

    def __call__(self, fn: Callable) -> Any:
        return _ember_compile(fn, **self.options)


def optimize(backend: Any = "inductor", *, nopython: bool = False, **kwargs: Any) -> _Optimize:
    fullgraph = bool(nopython or kwargs.get("error_on_graph_break"))
    return _Optimize(
        backend, fullgraph, kwargs.get("dynamic"), kwargs.get("disable", False),
        kwargs.get("guard_fail_fn"),
    )  # fmt: skip


def optimize_assert(backend: Any = "inductor", **kwargs: Any) -> _Optimize:
    return _Optimize(backend, True, kwargs.get("dynamic"), False)


class _RunOnly:
    """What torch._dynamo.run(...) returns: calls of the function it wraps run in Ember's
    run-only mode (code compiled earlier runs, nothing new compiles)."""

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def run_only(*args: Any, **kwargs: Any) -> Any:
            with ember.run():
                return fn(*args, **kwargs)

        register_compiled(run_only, fn)  # called in a trace: fn is traced, as Dynamo does
        return run_only


def run(fn: Callable | None = None) -> Any:
    return _RunOnly() if fn is None else _RunOnly()(fn)


def allow_in_graph(fn: Any) -> Any:
    """torch._dynamo.allow_in_graph (torch.compiler.allow_in_graph calls it): marked for
    Ember too, where it has a counterpart (an autograd.Function class)."""
    result = ORIGINAL["allow_in_graph"](fn)
    if isinstance(fn, type):
        ember_allow_in_graph(fn)
    return result


def reset() -> None:
    ember.reset()
    ORIGINAL["reset"]()


def set_stance(stance: str = "default", **kwargs: Any) -> Any:
    """torch.compiler.set_stance, as Ember's (the stance only: `skip_guard_eval_unsafe` and
    `force_backend` have no counterpart and are dropped)."""
    return ember.set_stance(stance)


def mark_dynamic(t: Any, index: Any, **kwargs: Any) -> None:
    """torch._dynamo.mark_dynamic, marked for Ember too (`ember.mark_dynamic`, its min and
    max kept): a trace that specializes the dim raises, as under torch.compile. PyTorch's
    own mark stays (tests read it); a mark Ember does not take (a size-1 dim, a non-tensor)
    is left to PyTorch's alone."""
    ORIGINAL["mark_dynamic"](t, index, **kwargs)
    for dim in index if isinstance(index, list | tuple) else [index]:
        with contextlib.suppress(TypeError, ValueError):  # DynamicMarkError: a ValueError
            ember.mark_dynamic(t, dim, min=kwargs.get("min"), max=kwargs.get("max"))


def mark_unbacked(t: Any, index: Any, *args: Any, **kwargs: Any) -> None:
    """torch._dynamo.mark_unbacked. Ember has no unbacked inputs; a strict mark (the trace
    must not specialize the dim) is what Ember's mark_dynamic promises, so a strict mark is
    one for Ember too (a dim of size 0 or 1, which Ember's mark refuses, is left to
    PyTorch's mark alone). A non-strict mark stays PyTorch's only."""
    ORIGINAL["mark_unbacked"](t, index, *args, **kwargs)
    if not kwargs.get("strict", False):
        return
    for dim in index if isinstance(index, list | tuple) else [index]:
        with contextlib.suppress(TypeError, ValueError):  # DynamicMarkError: a ValueError
            ember.mark_dynamic(t, dim, min=kwargs.get("min"), max=kwargs.get("max"))


def _either(ember_cls: type) -> type:
    """A metaclass whose classes accept `ember_cls` in isinstance/issubclass as well as
    their PyTorch original (the class's first base)."""

    class Either(type):
        def __subclasscheck__(cls, sub: type) -> bool:
            return issubclass(sub, (cls.__mro__[1], ember_cls))

        def __instancecheck__(cls, obj: Any) -> bool:
            return cls.__subclasscheck__(type(obj))

    return Either


def _accept_ember_counterpart(namespace: Any, name: str, ember_cls: type) -> None:
    """`namespace.name`, the PyTorch exception a test catches by that name, also catches
    Ember's exception of the same meaning (PyTorch's own code raises the class it imported)."""
    original = getattr(namespace, name)
    ORIGINAL[name] = original
    either = _either(ember_cls)(name, (original,), {"__module__": original.__module__})
    setattr(namespace, name, either)


def install_exception_counterparts() -> None:
    """Tests import ConstraintViolationError from PyTorch's symbolic_shapes and expect it
    where a dim marked dynamic is specialized; they expect torch._dynamo.exc's
    BackendCompilerFailed where the backend they pass raises, Unsupported where the
    compile must refuse. Ember raises its own
    exceptions of the same meaning (ember_symbolic's ConstraintViolationError, the
    tracer's BackendCompilerFailed: a backend raised while compiling a graph, which
    propagates to the caller as under torch.compile): the names tests use accept both in
    isinstance/issubclass, which assertRaises uses (an `except` clause matches real
    subclasses only)."""
    import torch._dynamo.exc as dynamo_exc
    import torch.fx.experimental.symbolic_shapes as torch_shapes

    _accept_ember_counterpart(torch_shapes, "ConstraintViolationError", es.ConstraintViolationError)
    _accept_ember_counterpart(dynamo_exc, "BackendCompilerFailed", ember.exc.BackendCompilerFailed)
    # a refusal under fullgraph=True: Ember's Unsupported is its counterpart of Dynamo's (a
    # test that also matches Dynamo's wording still needs the same words)
    _accept_ember_counterpart(dynamo_exc, "Unsupported", EmberUnsupported)
    # a recompile refused (error_on_recompile, or the stance "fail_on_recompile")
    _accept_ember_counterpart(dynamo_exc, "RecompileError", ember.exc.RecompileRefused)


def compile_fx(gm: torch.fx.GraphModule, example_inputs: Any, **kwargs: Any) -> Callable:
    """torch._inductor.compile_fx.compile_fx, as Ember's inductor backend. PyTorch's keyword
    arguments (inner_compile, config_patches, decompositions, ...) configure PyTorch's own
    pipeline and have no counterpart: dropped."""
    CALLS["compile_fx"] += 1
    return ember.lookup_backend("inductor")(gm, list(example_inputs))


def _hop_eager_with_torch(fn: Callable, args: Any, kwargs: Any = None) -> Any:
    """torch's eager path of a higher-order operator (`torch.cond` run outside a trace, or
    after Ember's graph break at it) compiles the operator with torch.compile itself
    (`_hop_compile_and_call`): that is PyTorch's implementation, not the user's compile, so
    it keeps torch.compile (and the `optimize` torch.compile calls) while it runs."""
    redirected = torch.compile, torch._dynamo.optimize
    torch.compile, torch._dynamo.optimize = ORIGINAL["compile"], ORIGINAL["optimize"]
    try:
        return ORIGINAL["hop_compile_and_call"](fn, args, kwargs)
    finally:
        torch.compile, torch._dynamo.optimize = redirected


def install_hop_eager_path() -> None:
    import torch._higher_order_ops.utils as hop_utils

    ORIGINAL["hop_compile_and_call"] = hop_utils._hop_compile_and_call
    hop_utils._hop_compile_and_call = _hop_eager_with_torch


def install_inductor() -> None:
    """Inductor's tests call compile_fx by the name they import: replace it at its source."""
    import torch._inductor.compile_fx as inductor_compile_fx

    ORIGINAL["compile_fx"] = inductor_compile_fx.compile_fx
    inductor_compile_fx.compile_fx = compile_fx


def _mirror_graph_break(reason: str, **_: Any) -> None:
    """Ember's graph break, counted where PyTorch's tests read torch.compile's: in
    torch._dynamo.utils.counters["graph_break"], keyed by Ember's reason. Counted as it
    happens, so a test's counters.clear() clears what it reads next."""
    torch._dynamo.utils.counters["graph_break"][reason] += 1


def install() -> None:
    if ORIGINAL:
        return
    subscribe("graph_break", _mirror_graph_break)
    # torch.compile wraps nn.Module.__init__/__setstate__ once it has run: a module built in
    # an Ember trace calls the functions those wrappers hold
    register_foreign_wrapper("torch._dynamo.mutation_guard", "patched_init", "init")
    register_foreign_wrapper("torch._dynamo.mutation_guard", "patched_setstate", "setstate")
    ORIGINAL.update(
        compile=torch.compile,
        optimize=torch._dynamo.optimize,
        optimize_assert=torch._dynamo.optimize_assert,
        reset=torch._dynamo.reset,
        set_stance=torch.compiler.set_stance,
        run=torch._dynamo.run,
        mark_dynamic=torch._dynamo.mark_dynamic,
        mark_unbacked=torch._dynamo.decorators.mark_unbacked,
        allow_in_graph=torch._dynamo.allow_in_graph,
    )
    torch._dynamo.allow_in_graph = allow_in_graph
    torch._dynamo.mark_dynamic = mark_dynamic
    torch._dynamo.decorators.mark_unbacked = mark_unbacked
    install_exception_counterparts()
    torch.compile = compile
    # the type torch.compile returns for a module: the redirected call returns Ember's, and
    # tests recognise a compiled module by this public name (only it: torch._dynamo's own
    # code, e.g. export, still builds Dynamo's from eval_frame's)
    ORIGINAL["OptimizedModule"] = torch._dynamo.OptimizedModule
    torch._dynamo.OptimizedModule = ember.OptimizedModule
    # a compiled module's compile, applied to other functions: Dynamo's `dynamo_ctx`
    ember.OptimizedModule.dynamo_ctx = property(lambda module: module.compile_also)
    torch._dynamo.optimize = optimize
    torch._dynamo.optimize_assert = optimize_assert
    torch._dynamo.reset = reset
    torch.compiler.set_stance = torch._dynamo.set_stance = set_stance
    torch._dynamo.run = run
    torch._dynamo.test_case.reset = reset
    # Dynamo's graph_break is a break under Ember too (registered here: product code never
    # names PyTorch's compiler stack)
    register_graph_break(torch._dynamo.graph_break, "torch._dynamo.graph_break() was called")
    # Dynamo's tests' stand-in for code it cannot trace (`a + b` that Dynamo never inlines):
    # a break where the tests expect one
    register_graph_break(
        torch._dynamo.eval_frame.unsupported, "torch._dynamo.eval_frame.unsupported was called"
    )
    install_inductor()
    install_hop_eager_path()
    # the harness's own functions are torch.compile's stand-ins: their frames run as they
    # are (as torch.compile's own frames do under Dynamo), never compiled as user code
    for value in list(globals().values()):
        if inspect.isfunction(value) and value.__module__ == __name__:
            fh.skip_code(value.__code__)


def pytest_configure(config: Any) -> None:
    """Runs before collection, so decorators at module level see Ember's entry points."""
    install()


def pytest_report_header(config: Any) -> str:
    return (
        "ember_redirect: torch.compile, torch._dynamo.optimize and "
        f"torch._inductor.compile_fx.compile_fx -> ember {ember.__version__}"
    )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    terminalreporter.write_line(
        f"ember_redirect: {CALLS['compile']} calls compiled by Ember, "
        f"{CALLS['compile_fx']} compile_fx calls by Ember's inductor"
    )
