"""torch.optim optimizers and gradient clipping inside a trace.

`opt.step()` (SGD, Adam, AdamW) and `opt.zero_grad()` become graph ops and side effects
instead of a trace through torch.optim's own code: the tracer reads the parameter groups,
gradients and optimizer state through guarded sources, creates missing state the way the
optimizer's first step does, and inlines the math of `optim_rules`. What a step depends on
is guarded: the optimizer's exact class, no step hooks, every hyperparameter by value
(a new lr recompiles), each gradient's presence and metadata, and each parameter's state
entry, reached by its position in `opt.state` with an identity guard on the key.

Anything outside that (a closure, hooks, amsgrad, capturable/fused/differentiable, a tensor
lr, sparse gradients) is a graph break: the call runs in eager PyTorch.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ember_bytecode_tracer import optim_rules
from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import (
    AttrSource,
    DictKeysSource,
    DictValuesSource,
    GlobalSource,
    Guard,
    GuardKind,
    ItemSource,
)
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import (
    guard,
    in_rule_table,
    is_torch_namespace_source,
    wrap_rule,
)
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.dicts import ConstDictVariable
from ember_bytecode_tracer.variables.lists import ListVariable
from ember_bytecode_tracer.variables.objects import UserDefinedObjectVariable
from ember_bytecode_tracer.variables.tensor import TensorMethodVariable, TensorVariable, read_grad

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator


def _guard(tx: Translator, source: Source, kind: GuardKind, expected: Any) -> None:
    tx.output.add_guard(Guard(source, kind, expected, user_location=tx.location()))


def _constant(tracker: VariableTracker, what: str) -> Any:
    try:
        return tracker.as_python_constant()
    except Unsupported:
        raise Unsupported(f"optimizer hyperparameter {what} is not a constant") from None


def _scalar_dtype() -> torch.dtype:
    from torch.optim import optimizer

    get = getattr(optimizer, "_get_scalar_dtype", None)
    return get() if get is not None else torch.float32


# ---- what each optimizer class needs -----------------------------------------------------
@dataclass(frozen=True)
class StepRule:
    """One optimizer class: the group flags it cannot trace, how it creates state on a
    parameter's first step, and how it emits a group's update."""

    unsupported_flags: tuple[str, ...]
    init_state: Callable[[Any, torch.Tensor, dict], None]  # (opt.state, param, group)
    update: Callable[..., None]


def _init_adam(opt_state: Any, param: torch.Tensor, group: dict) -> None:
    state = opt_state[param]
    if len(state) == 0:  # as Adam._init_group: a float step counter, zeroed moments
        state["step"] = torch.tensor(0.0, dtype=_scalar_dtype())
        state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)


def _init_sgd(opt_state: Any, param: torch.Tensor, group: dict) -> None:
    # as SGD._init_group: an (empty) entry when momentum is on; the buffer itself is made
    # by the first step (a copy of the gradient)
    if group["momentum"] != 0:
        opt_state[param]


def _adam_update(tx, group: dict, params, grads, states: list[ConstDictVariable]) -> None:
    beta1, beta2 = group["betas"]
    args = [
        ListVariable(params),
        ListVariable(grads),
        ListVariable([_state_tensor(s, "exp_avg") for s in states]),
        ListVariable([_state_tensor(s, "exp_avg_sq") for s in states]),
        ListVariable([_state_tensor(s, "step") for s in states]),
    ]
    constants = {
        "lr": group["lr"], "beta1": beta1, "beta2": beta2, "eps": group["eps"],
        "weight_decay": group["weight_decay"], "maximize": group["maximize"],
        "decoupled_weight_decay": group.get("decoupled_weight_decay", False),
    }  # fmt: skip
    _inline(tx, optim_rules.adam_update, args, constants)


def _sgd_update(tx, group: dict, params, grads, states: list[ConstDictVariable | None]) -> None:
    momentum = group["momentum"]
    buffers = [
        s.items.get("momentum_buffer", ConstantVariable(None)) if s is not None else None
        for s in states
    ]
    args = [
        ListVariable(params),
        ListVariable(grads),
        ListVariable([b if b is not None else ConstantVariable(None) for b in buffers]),
    ]
    constants = {
        "lr": group["lr"], "momentum": momentum, "dampening": group["dampening"],
        "weight_decay": group["weight_decay"], "nesterov": group["nesterov"],
        "maximize": group["maximize"],
    }  # fmt: skip
    new_buffers = _inline(tx, optim_rules.sgd_update, args, constants)
    if momentum == 0:
        return
    for state, old, new in zip(states, buffers, new_buffers.unpack(tx), strict=True):
        if not isinstance(old, TensorVariable):  # first step: store the new buffer
            state.call_method(tx, "__setitem__", [ConstantVariable("momentum_buffer"), new], {})


def _inline(tx, fn: Callable, args: list[VariableTracker], constants: dict) -> VariableTracker:
    kwargs = {name: ConstantVariable(value) for name, value in constants.items()}
    return tx.inline_call(fn, None, args, kwargs)


def _state_tensor(state: ConstDictVariable, key: str) -> VariableTracker:
    value = state.items.get(key)
    if not isinstance(value, TensorVariable):
        raise Unsupported(f"optimizer state {key!r} is not a tensor")
    return value


_COMMON_FLAGS = ("differentiable", "fused")
STEP_RULES: dict[type, StepRule] = {
    torch.optim.SGD: StepRule(_COMMON_FLAGS, _init_sgd, _sgd_update),
    torch.optim.Adam: StepRule((*_COMMON_FLAGS, "amsgrad", "capturable"), _init_adam, _adam_update),
    torch.optim.AdamW: StepRule(
        (*_COMMON_FLAGS, "amsgrad", "capturable"), _init_adam, _adam_update
    ),
}


# ---- trackers -------------------------------------------------------------------------------
class OptimizerVariable(UserDefinedObjectVariable):
    """A torch.optim.Optimizer reached from the frame (guarded by exact class)."""

    methods_by_name = True  # `opt.step` handed in as a bound method: the step rule too

    def var_getattr(self, tx, name):
        if name in _METHODS and name not in vars(self.value) and type(self.value) in STEP_RULES:
            return OptimizerMethodVariable(self, name)
        return super().var_getattr(tx, name)


class OptimizerMethodVariable(VariableTracker):
    """`opt.step` / `opt.zero_grad` before the call."""

    def __init__(self, optimizer: OptimizerVariable, name: str) -> None:
        # a source, so that a break at the call can put the bound method back on the stack
        super().__init__(source=AttrSource(optimizer.source, name))
        self.optimizer = optimizer
        self.name = name

    def call_function(self, tx, args, kwargs):
        return _METHODS[self.name](tx, self.optimizer, args, kwargs)


def _groups(tx, opt: OptimizerVariable) -> list[tuple[dict, ConstDictVariable]]:
    """Each parameter group: its constant hyperparameters and its tracker (guarded)."""
    groups_source = AttrSource(opt.source, "param_groups")
    groups = opt.value.param_groups
    _guard(tx, groups_source, GuardKind.LEN_MATCH, (type(groups), len(groups)))
    found = []
    for i, group in enumerate(groups):
        tracker = tx.wrap(group, ItemSource(groups_source, i))
        if not isinstance(tracker, ConstDictVariable):
            raise Unsupported("an optimizer parameter group that is not a plain dict")
        constants = {
            key: _constant(value, key) for key, value in tracker.items.items() if key != "params"
        }
        found.append((constants, tracker))
    return found


def _group_params(tx, opt: OptimizerVariable) -> list[list[VariableTracker]]:
    """Each group's parameters (guarded), without reading its hyperparameters."""
    groups_source = AttrSource(opt.source, "param_groups")
    groups = opt.value.param_groups
    _guard(tx, groups_source, GuardKind.LEN_MATCH, (type(groups), len(groups)))
    source = ItemSource  # group i's "params" list
    return [
        tx.wrap(group["params"], source(source(groups_source, i), "params")).unpack(tx)
        for i, group in enumerate(groups)
    ]


def _grad_of(tx, param: VariableTracker) -> VariableTracker:

    if not isinstance(param, TensorVariable):
        raise Unsupported("an optimizer parameter that is not a tensor")
    return read_grad(tx, param)


def _no_hooks(tx, opt: OptimizerVariable) -> None:
    """Step hooks (the optimizer's own and torch.optim's global ones) would run Python
    around the step: the trace requires none, and guards that none appear."""
    value = opt.value
    for name in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks"):
        hooks = getattr(value, name, None)
        if hooks is None:
            continue
        if len(hooks):
            raise Unsupported(f"optimizer.step() with {name.strip('_').replace('_', ' ')}")
        _guard(tx, AttrSource(opt.source, name), GuardKind.LEN_MATCH, (type(hooks), 0))
    module = sys.modules["torch.optim.optimizer"]
    tx.root().f_globals.setdefault("__ember_sys__", sys)
    module_source = ItemSource(
        AttrSource(GlobalSource("__ember_sys__"), "modules"), module.__name__
    )
    for name in ("_global_optimizer_pre_hooks", "_global_optimizer_post_hooks"):
        hooks = getattr(module, name, None)
        if hooks is None:
            continue
        if len(hooks):
            raise Unsupported("optimizer.step() with global optimizer hooks registered")
        _guard(tx, AttrSource(module_source, name), GuardKind.LEN_MATCH, (type(hooks), 0))


def _step(tx, opt: OptimizerVariable, args, kwargs) -> VariableTracker:
    if args or kwargs:
        raise Unsupported("optimizer.step(closure): the closure re-evaluates the model")
    rule = STEP_RULES[type(opt.value)]
    _no_hooks(tx, opt)
    groups = _groups(tx, opt)
    state = opt.value.state
    state_source = AttrSource(opt.source, "state")
    _guard(tx, state_source, GuardKind.TYPE_MATCH, type(state))
    plans = []
    for constants, tracker in groups:
        for flag in rule.unsupported_flags:
            if constants.get(flag):
                raise Unsupported(f"{type(opt.value).__name__}({flag}=True) inside a trace")
        params, grads = [], []
        for param in tracker.items["params"].unpack(tx):
            grad = _grad_of(tx, param)
            if isinstance(grad, ConstantVariable) and grad.value is None:
                continue  # eager skips parameters without a gradient
            if not isinstance(grad, TensorVariable) or grad.example.is_sparse:
                raise Unsupported("an optimizer step over a sparse or non-tensor gradient")
            params.append(param)
            grads.append(grad)
        plans.append((constants, params, grads))
    # State is created for real now, as the optimizer's first step would: the graph then
    # reads and updates it like any later step's (guarded by position and key identity).
    for constants, params, _ in plans:
        for param in params:
            rule.init_state(state, _real_of(tx, param), constants)
    positions = {id(key): i for i, key in enumerate(state)}
    for constants, params, grads in plans:
        states = []
        for param in params:
            real = _real_of(tx, param)
            index = positions.get(id(real))
            if index is None:
                states.append(None)
                continue
            _guard(tx, ItemSource(DictKeysSource(state_source), index), GuardKind.ID_MATCH, real)
            entry = tx.wrap(state[real], ItemSource(DictValuesSource(state_source), index))
            if not isinstance(entry, ConstDictVariable):
                raise Unsupported("optimizer state that is not a plain dict")
            states.append(entry)
        if params:
            rule.update(tx, constants, params, grads, states)
    return ConstantVariable(None)


def _real_of(tx, tensor: TensorVariable) -> torch.Tensor:
    real = tx.output.real_value(tensor.source) if tensor.source is not None else None
    if real is None:
        raise Unsupported("an optimizer parameter created inside the trace")
    return real


def _grad_unread(tx, param: TensorVariable) -> bool:
    """No graph op yet, and the trace has read no gradient (through any source, nor the
    tensor itself): dropping `param.grad` before the graph runs is then what eager does
    (SideEffects.released_early)."""
    output = tx.output
    if output.op_count or any(getattr(s, "attr", None) == "grad" for s in output.wrapped):
        return False
    grad = getattr(output.real_value(param.source), "grad", None)
    return grad is None or all(value is not grad for _, value in output.real_values.values())


def _zero_grad(tx, opt: OptimizerVariable, args, kwargs) -> VariableTracker:
    if len(args) > 1 or set(kwargs) - {"set_to_none"}:
        raise Unsupported("optimizer.zero_grad() with unexpected arguments")
    flag = args[0] if args else kwargs.get("set_to_none", ConstantVariable(True))
    set_to_none = _constant(flag, "set_to_none")
    for params in _group_params(tx, opt):
        for param in params:
            if set_to_none:
                # `p.grad = None` whatever it was: nothing about the gradient is read (or
                # guarded), so the first call (no gradients yet) shares the later calls' code
                if not isinstance(param, TensorVariable) or param.source is None:
                    raise Unsupported("zero_grad over a parameter the trace cannot follow")
                tx.output.side_effects.attributes[(param.source, "grad")] = ConstantVariable(None)
                if _grad_unread(tx, param):
                    tx.output.side_effects.released_early.add((param.source, "grad"))
                continue
            grad = _grad_of(tx, param)
            if isinstance(grad, ConstantVariable) and grad.value is None:
                continue
            if not isinstance(grad, TensorVariable):
                raise Unsupported("zero_grad over a gradient the trace cannot follow")
            if grad.example.requires_grad:
                raise Unsupported("zero_grad(set_to_none=False) of a gradient with a history")
            else:
                TensorMethodVariable(grad, "zero_").call_function(tx, [], {})
    return ConstantVariable(None)


_METHODS: dict[str, Callable] = {"step": _step, "zero_grad": _zero_grad}


class ClipGradNormVariable(VariableTracker):
    """torch.nn.utils.clip_grad_norm_: the norm and the in-place scaling in the graph."""

    def __init__(self, fn: Any) -> None:
        super().__init__()
        self.fn = fn

    def as_python_constant(self) -> Any:
        return self.fn

    def call_function(self, tx, args, kwargs):
        names = ("parameters", "max_norm", "norm_type", "error_if_nonfinite", "foreach")
        bound = dict(zip(names, args, strict=False))
        for key, value in kwargs.items():
            if key not in names or key in bound:
                raise Unsupported(f"clip_grad_norm_() got an unexpected argument {key!r}")
            bound[key] = value
        if "parameters" not in bound or "max_norm" not in bound:
            raise Unsupported("clip_grad_norm_() without parameters or max_norm")
        if _constant(
            bound.get("error_if_nonfinite", ConstantVariable(False)), "error_if_nonfinite"
        ):
            raise Unsupported("clip_grad_norm_(error_if_nonfinite=True) reads the norm's value")
        max_norm = float(_constant(bound["max_norm"], "max_norm"))
        norm_type = float(_constant(bound.get("norm_type", ConstantVariable(2.0)), "norm_type"))
        parameters = bound["parameters"]
        params = [parameters] if isinstance(parameters, TensorVariable) else parameters.unpack(tx)
        grads = []
        for param in params:
            grad = _grad_of(tx, param)
            if isinstance(grad, ConstantVariable) and grad.value is None:
                continue
            if not isinstance(grad, TensorVariable):
                raise Unsupported("clip_grad_norm_ over a gradient the trace cannot follow")
            grads.append(grad)
        if not grads:
            raise Unsupported("clip_grad_norm_ with no gradients")
        constants = {"max_norm": max_norm, "norm_type": norm_type}
        return _inline(tx, optim_rules.clip_grad_norm, [ListVariable(grads)], constants)


def _clip_functions() -> set:
    from torch.nn.utils import clip_grad

    return {clip_grad.clip_grad_norm_}


CLIP_FUNCTIONS = _clip_functions()


def optimizer_tracker(value: Any, source: Source | None) -> VariableTracker | None:
    """The tracker for an optimizer or clip_grad_norm_, or None for other values (the
    builder's hook; it records the TYPE_MATCH/ID_MATCH guard itself)."""
    if isinstance(value, torch.optim.Optimizer) and source is not None:
        return OptimizerVariable(value, source=source)
    if in_rule_table(value, CLIP_FUNCTIONS):
        return ClipGradNormVariable(value)
    return None


# ---- wrapping real values (variables/builder.py) ----------------------------------------
@wrap_rule("optimizer")
def _wrap_optimizer(tx: Translator, value: Any, source: Source | None) -> VariableTracker | None:
    tracker = optimizer_tracker(value, source)
    if tracker is not None and source is not None and not is_torch_namespace_source(tx, source):
        if source is tracker.source:  # the optimizer object: its class (state is guarded)
            guard(tx, source, GuardKind.TYPE_MATCH, type(value))
        else:
            guard(tx, source, GuardKind.ID_MATCH, value)
    return tracker
