"""Wrapping real Python values reached from the frame into trackers, with their guards.

Every value the trace reads through a source passes through `wrap_value` (trackers reach it
as `tx.wrap(value, source)`), which records the guard that makes the trace valid for it: a
tensor's metadata, a constant's value, an object's identity or type, a container's length
or keys.

What tracker a value gets is a table of rules, each registered by the module that defines
the tracker (`@wrap_rule(name, types=...)` or `when=...`). A rule is keyed by a type
(`isinstance`, or the exact type with `exact=True`) and/or a predicate, and rules are tried
in the order of `WRAP_ORDER` below; the first that matches and returns a tracker wins (a
rule may return None after a closer look: not its value). The order is part of the
behaviour (an `int` may be a symbolic size before it is a constant, a namedtuple is not a
plain tuple, a torch function reached through a torch module is not guarded by identity):

    tensor, torch_size, symbolic_int, constant, code, enum, identity_constant, typing, nn_module,
    namedtuple, list_or_tuple, dict, defaultdict, ordered_dict, deque, set, mapping_proxy,
    input_iterator, container_subclass, numpy, numpy_random_draw, python_random_draw,
    autograd_function_apply, context_exit, grad_mode_context, control_flow_operator,
    vmap_function,
    compiler_directive, python_module,
    tensor_method_descriptor, rng_function, torch_function, autograd_call, collective,
    optimizer, namedtuple_make, trace_time_rule_function, user_function,
    method, partial, traced_through, builtin_with_rule, builtin_function, c_descriptor_get,
    class, environ, context_var, object

`variables/catalog.py` imports every module that registers one; this module imports none.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import AttrSource, Guard, GuardKind

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator, VariableTracker

WRAP_ORDER = (
    "tensor",  # torch.Tensor and nn.Parameter: a graph input (tensor.py)
    "torch_size",  # before tuples: a Size is a constant tuple of ints (lists.py)
    "symbolic_int",  # an int the dynamic policy made a SymInt input (sym_values.py)
    "constant",  # numbers, strings, dtypes... (constant.py)
    "code",  # code objects: identity (constant.py)
    "enum",  # enum members: identity (constant.py)
    "identity_constant",  # torch.__version__, re.Pattern: constants, identity (constant.py)
    "typing",  # List[int], Optional[T], TypeVars: constants, identity (typing_values.py)
    "nn_module",  # guarded by class (nn_module.py)
    "namedtuple",  # with a source: rebuilt by calling the class (constructed.py)
    "list_or_tuple",  # exact list/tuple (lists.py)
    "dict",  # exact dict (dicts.py)
    "defaultdict",  # exact defaultdict: a dict with its factory (collections_types.py)
    "ordered_dict",  # exact OrderedDict: its items (collections_types.py)
    "deque",  # exact deque without maxlen: a list with left-end methods (collections_types.py)
    "set",  # exact set of constants, passed in: guarded in order, written back (sets.py)
    "mapping_proxy",  # a class's __dict__ read through a source (mapping_proxy.py)
    "input_iterator",  # range/str iterators, itertools.count passed in (input_iterators.py)
    "container_subclass",  # instances of list/dict subclasses (container_subclasses.py)
    "numpy",  # ndarrays, NumPy functions with a rule (numpy_rules.py)
    "numpy_random_draw",  # np.random.uniform(..., size=...): a graph input (numpy_random.py)
    "python_random_draw",  # random.random(), random.uniform(a, b): drawn per call (python_random.py)
    "autograd_function_apply",  # MyFunction.apply (autograd_function.py)
    "context_exit",  # a with-block's __exit__ rebuilt at a graph break (contexts.py)
    "saved_hooks_exit",  # disable_saved_tensors_hooks' __exit__ at a break (hooks_context.py)
    "grad_mode_context",  # a no_grad/enable_grad/set_grad_enabled object (contexts.py)
    "control_flow_operator",  # torch.cond's and map's operators: captured (control_flow.py)
    "vmap_function",  # torch.vmap (torch.func.vmap): captured over a traced body (vmap_capture.py)
    # graph_break(), registered breaks (by identity, even a torch function), functions
    # compiler.disable'd: a break (compiler_directives.py)
    "compiler_directive",
    "python_module",  # modules: identity (objects.py)
    "tensor_method_descriptor",  # torch.Tensor.add as a value (tensor.py)
    "rng_function",  # torch.manual_seed and friends (rng_state.py)
    "torch_function",  # torch.* callables that become graph calls (torch_functions.py)
    "autograd_call",  # torch.autograd.grad/backward: a break (autograd_calls.py)
    "collective",  # torch.distributed calls (collectives.py)
    "optimizer",  # optimizers and clip_grad_norm_ (optimizer.py)
    "namedtuple_make",  # SomeNamedTuple._make: built as the class is (constructed.py)
    "trace_time_rule_function",  # Python functions answered by a rule (builtins.py)
    "user_function",  # other Python functions: inlined (functions.py)
    "method",  # bound methods (functions.py)
    "partial",  # functools.partial (functions.py)
    "traced_through",  # lru_cache'd and jit.script'ed functions: their Python function
    "builtin_with_rule",  # C functions with a rule (builtins.py)
    "builtin_function",  # builtins, math, operator functions (builtins.py)
    "c_descriptor_get",  # `Tensor.shape.__get__`: the read it stands for (descriptors.py)
    "class",  # classes: identity (objects.py)
    "environ",  # os.environ: guarded per key (environ.py)
    "context_var",  # contextvars.ContextVar: identity; reads guarded (context_vars.py)
    "object",  # anything else with a source: type-guarded (objects.py)
)

Wrap = Callable[["Translator", Any, "Source | None"], "VariableTracker | None"]
When = Callable[["Translator", Any, "Source | None"], bool]


@dataclass(frozen=True)
class WrapRule:
    name: str
    wrap: Wrap
    types: tuple[type, ...] | None = None  # isinstance key (None: any value)
    exact: bool = False  # the key is the exact type, subclasses do not match
    when: When | None = None  # a further condition

    def matches(self, tx: Translator, value: Any, source: Source | None) -> bool:
        if self.types is not None:
            if self.exact and type(value) not in self.types:
                return False
            if not self.exact and not isinstance(value, self.types):
                return False
        if self.when is None:
            return True
        try:
            return self.when(tx, value, source)
        except Unsupported:
            raise
        except Exception:
            if not _python_attribute_hook(type(value)):
                raise
            # a probe of the value (`value.__code__`) ran a user's __getattr__, which raised:
            # the value is not of the kind this rule wraps (a function, a torch callable)
            return False


def _python_attribute_hook(cls: type) -> bool:
    return any(
        inspect.isfunction(inspect.getattr_static(cls, name, None))
        for name in ("__getattr__", "__getattribute__")
    )


_RULES: dict[str, WrapRule] = {}
_ORDERED: list[WrapRule] = []


def wrap_rule(
    name: str,
    *,
    types: type | tuple[type, ...] | None = None,
    exact: bool = False,
    when: When | None = None,
) -> Callable[[Wrap], Wrap]:
    """Registers the decorated `(tx, value, source) -> tracker | None` under `name`, one
    of WRAP_ORDER, for values of `types` for which `when` holds."""
    if name not in WRAP_ORDER:
        raise ValueError(f"wrap rule {name!r} is not in WRAP_ORDER")
    key = (types,) if isinstance(types, type) else types

    def register(fn: Wrap) -> Wrap:
        if name in _RULES:
            raise ValueError(f"two wrap rules named {name!r}: {_RULES[name].wrap} and {fn}")
        _RULES[name] = WrapRule(name, fn, key, exact, when)
        _ORDERED[:] = [_RULES[n] for n in WRAP_ORDER if n in _RULES]
        return fn

    return register


def wrap_rules() -> list[WrapRule]:
    """The registered rules, in the order they are tried."""
    return list(_ORDERED)


def resolve_rule(tx: Translator, value: Any, source: Source | None) -> tuple[str, VariableTracker]:
    """(the name of the rule that wrapped `value`, its tracker)."""
    for rule in _ORDERED:
        if rule.matches(tx, value, source):
            tracker = rule.wrap(tx, value, source)
            if tracker is not None:
                return rule.name, tracker
    raise Unsupported(f"a {type(value).__name__} the tracer has no rule for")


def wrap_value(tx: Translator, value: Any, source: Source | None) -> VariableTracker:
    """The tracker for `value`, found at `source` (None: made during the trace, no guard)."""
    cached = tx.output.wrapped.get(source) if source is not None else None
    if cached is not None:
        return cached
    tracker = resolve_rule(tx, value, source)[1]
    if source is not None:
        tx.output.wrapped[source] = tracker
        tx.output.real_values[id(tracker)] = (tracker, value)
    return tracker


def real_value(tx: Translator, tracker: VariableTracker) -> tuple[bool, Any]:
    """(True, the object) a tracker wrapped when it was read through its source; (False,
    None) for a value made in the trace."""
    entry = tx.output.real_values.get(id(tracker))
    if entry is None or entry[0] is not tracker:
        return False, None
    return True, entry[1]


def in_rule_table(value: Any, table: Any) -> bool:
    """`value in table` for the tables of functions and classes the rules are keyed by,
    never running a user's `__hash__` (an instance of a class that defines one in Python is
    in none of them, and hashing it may read what its __init__ has not set yet)."""
    if inspect.isfunction(inspect.getattr_static(type(value), "__hash__", None)):
        return False
    try:
        return value in table
    except TypeError:  # unhashable
        return False


def guard(tx: Translator, source: Source, kind: GuardKind, expected: Any = None) -> None:
    tx.output.add_guard(Guard(source, kind, expected, user_location=tx.location()))


def aliased_container(
    tx: Translator,
    value: Any,
    source: Source | None,
    build: Callable[[Translator, Any, Source | None], VariableTracker],
) -> VariableTracker:
    """A list, tuple or dict: built by `build`, except that a list or dict reached again
    another way (an argument and a closure cell) is the same tracker, so it sees its own
    mutations, guarded to stay the same object."""
    if type(value) is tuple or source is None:
        return build(tx, value, source)
    seen = tx.output.containers_by_id.get(id(value))
    if seen is not None and seen[0] is value:
        guard(tx, source, GuardKind.TENSOR_ALIASING, seen[1].source)
        return seen[1]
    tracker = build(tx, value, source)
    tx.output.containers_by_id[id(value)] = (value, tracker)
    return tracker


def is_torch_namespace_source(tx: Translator, source: Source) -> bool:
    # torch.relu reached as an attribute of a torch module (`torch`, `torch.nn.functional`):
    # the module itself is ID-guarded and its functions are taken to be constant, as
    # PyTorch's namespace does not change at run time. Decided by what the base object is,
    # never by a name: `my_torch_op = torch.sin` is a global like any other, ID-guarded.
    if not isinstance(source, AttrSource):
        return False
    base = tx.output.wrapped.get(source.base)
    return base is not None and base.is_torch_namespace()


def guard_identity(tx: Translator, value: Any, source: Source | None) -> None:
    """ID_MATCH on a function or class found at `source`, unless a torch module holds it."""
    if source is not None and not is_torch_namespace_source(tx, source):
        guard(tx, source, GuardKind.ID_MATCH, value)
