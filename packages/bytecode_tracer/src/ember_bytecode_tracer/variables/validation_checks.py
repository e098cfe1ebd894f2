"""Argument checks that branch on a tensor only to raise: run after the graph, not in it.

`torch.distributions` validates its parameters (and `log_prob`'s value) with
`if not torch._is_all_true(valid): raise ValueError(...)`: a branch on tensor data. For the
library sites listed in `SITES` (identified by their code objects, never by name) the trace
takes the passing side, the graph computes `valid.all()` as an extra output, and the runner
checks it right after the graph ran, before any result or side effect of the frame is
handed back: a failing check raises the site's exception, as eager code would (the message
names the same parameter and constraint; it does not print the values). From torch 2.15 the
sites call `torch._is_all_true` inside a helper (`_all_true_or_runtime_assert`, listed in
`HELPERS`) and take `bool()` of it: the check is then the caller's, named by its locals.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.tensor import TensorVariable

if TYPE_CHECKING:
    import torch.fx

    from ember_bytecode_tracer.variables.base import Translator


def _local_text(tx: Translator, name: str) -> str:
    value = tx.symbolic_locals.get(name)
    if value is None:
        return "?"
    if value.is_python_constant():
        return str(value.as_python_constant())
    if hasattr(value, "value"):  # an object read from the frame (a Constraint)
        return repr(value.value)
    return type(value).__name__


def _class_name(tx: Translator) -> str:
    owner = tx.symbolic_locals.get("self")
    try:
        return owner.python_type().__name__
    except (Unsupported, AttributeError):
        return "distribution"


def _parameter_message(tx: Translator) -> str:
    return (
        f"Expected parameter {_local_text(tx, 'param')} of distribution {_class_name(tx)} to "
        f"satisfy the constraint {_local_text(tx, 'constraint')}, but found invalid values "
        f"(checked after the compiled graph ran)"
    )


def _sample_message(tx: Translator) -> str:
    return (
        f"Expected value argument to be within the support of the distribution "
        f"{_class_name(tx)}, but found invalid values (checked after the compiled graph ran)"
    )


def _sites() -> dict[Any, tuple[type[BaseException], Callable[[Any], str]]]:
    from torch.distributions.distribution import Distribution

    return {
        Distribution.__init__.__code__: (ValueError, _parameter_message),
        Distribution._validate_sample.__code__: (ValueError, _sample_message),
    }


def _helpers() -> set[Any]:
    from torch.distributions import distribution

    helper = getattr(distribution, "_all_true_or_runtime_assert", None)  # torch >= 2.15
    return {helper.__code__} if helper is not None else set()


SITES = _sites()
HELPERS = _helpers()


def _site_frame(tx: Translator) -> Translator | None:
    """The translator of a known site: this frame, or the caller of a helper it delegates to."""
    if tx.code in SITES:
        return tx
    parent = getattr(tx, "parent", None)
    if tx.code in HELPERS and parent is not None and parent.code in SITES:
        return parent
    return None


@dataclass
class RuntimeCheck:
    """`node` (a bool tensor) must be true after the graph ran, else `error` is raised."""

    node: torch.fx.Node
    error: type[BaseException]
    message: str
    location: str


class DeferredAllTrueVariable(VariableTracker):
    """`torch._is_all_true(valid)` at a known raising site: true while tracing, checked at
    run time."""

    def __init__(
        self,
        node: torch.fx.Node,
        site: tuple[type[BaseException], Callable],
        site_tx: Translator,
    ) -> None:
        super().__init__()
        self.node = node
        self.site = site
        self.site_tx = site_tx

    def python_type(self) -> type:
        return torch.Tensor

    def truthiness(self, tx: Translator) -> bool:
        error, message = self.site
        site_tx = self.site_tx
        tx.output.runtime_checks.append(
            RuntimeCheck(self.node, error, message(site_tx), site_tx.location())
        )
        return True

    def __repr__(self) -> str:
        return f"DeferredAllTrueVariable({self.node.name})"


def deferred_all_true(tx: Translator, args, kwargs) -> VariableTracker | None:
    """The tracker for `torch._is_all_true(...)` when called at a known site, else None."""

    site_tx = _site_frame(tx)
    if site_tx is None or kwargs or len(args) != 1 or not isinstance(args[0], TensorVariable):
        return None
    node, _ = tx.output.create_node("call_method", "all", (args[0].node,), {})
    return DeferredAllTrueVariable(node, SITES[site_tx.code], site_tx)


def check_appliers(output: Any, output_index: Callable[[torch.fx.Node], int]) -> list[Callable]:
    """One `check(outs)` per runtime check of the trace (outputs registered now)."""
    appliers = []
    for check in output.runtime_checks:
        index = output_index(check.node)

        def apply(outs, index=index, check=check):
            if not bool(outs[index]):
                raise check.error(check.message)

        appliers.append(apply)
    return appliers
