"""Registry of zoo models: name -> family module, plus the `ZooCase` they build into.

Family modules are imported lazily so that ``import ember_zoo`` stays cheap (transformers
takes seconds to import) and a broken optional dependency only affects its own models.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

SIZES: tuple[str, ...] = ("tiny", "real")

# name -> module (relative to this package) exposing ``make(size: str) -> CaseParts``.
_FAMILIES: dict[str, str] = {
    "mlp": "mlp",
    "cnn": "cnn",
    "transformer_block": "transformer_block",
    "rnn": "rnn",
    "bert": "bert",
    "gpt2": "gpt2",
    "t5": "t5",
    "llama": "llama",
}
# families listed only where their extra dependency is installed: name -> (module, dependency)
_OPTIONAL_FAMILIES: dict[str, tuple[str, str]] = {"resnet": ("resnet", "torchvision")}

LossFn = Callable[..., torch.Tensor]


class UnknownCaseError(ValueError):
    """Raised by `build` for a model name or size that the zoo does not have."""


class CaseParts(NamedTuple):
    """What a family's ``make(size)`` returns: everything on CPU in float32.

    ``loss_fn(output, *targets)`` must return a scalar that depends on every trainable
    parameter the forward uses, except those named in ``unused_parameters``.
    """

    model: torch.nn.Module
    inputs: tuple[Any, ...]
    kwargs: dict[str, Any]
    loss_fn: LossFn
    targets: tuple[torch.Tensor, ...] = ()
    unused_parameters: frozenset[str] = frozenset()


@dataclass(frozen=True, eq=False)
class ZooCase:
    """One built model together with example inputs and a training loss.

    The model is returned in training mode (``model.training is True``) with every dropout
    probability set to 0, so repeated calls are deterministic. Call ``model.eval()`` for
    inference semantics (this only changes BatchNorm in ``cnn``).
    """

    name: str
    size: str
    model: torch.nn.Module
    example_inputs: tuple[Any, ...]
    example_kwargs: dict[str, Any]
    loss_fn: LossFn = field(repr=False)
    targets: tuple[torch.Tensor, ...] = field(default=(), repr=False)
    # Trainable parameters that legitimately get no gradient from `loss` (by qualified name).
    unused_parameters: frozenset[str] = frozenset()

    def run(self, fn: Callable[..., Any] | None = None) -> Any:
        """Call ``fn`` (default: the eager model) on the example inputs and return its output."""
        fn = self.model if fn is None else fn
        return fn(*self.example_inputs, **self.example_kwargs)

    def loss(self, output: Any) -> torch.Tensor:
        """Scalar training loss computed from the model's ``output``."""
        return self.loss_fn(output, *self.targets)


def names() -> list[str]:
    """Names of all zoo models, in a stable order (cheap custom models first); optional
    families (resnet: torchvision) come last, where their dependency is installed."""
    return list(_FAMILIES) + [
        name
        for name, (_, dependency) in _OPTIONAL_FAMILIES.items()
        if importlib.util.find_spec(dependency) is not None
    ]


def _move(value: Any, device: torch.device, dtype: torch.dtype) -> Any:
    # Only floating tensors change dtype: token ids, masks and class targets keep theirs.
    if isinstance(value, torch.Tensor):
        if value.is_floating_point():
            return value.to(device=device, dtype=dtype)
        return value.to(device=device)
    if isinstance(value, tuple):
        return tuple(_move(v, device, dtype) for v in value)
    if isinstance(value, list):
        return [_move(v, device, dtype) for v in value]
    if isinstance(value, Mapping):
        return {k: _move(v, device, dtype) for k, v in value.items()}
    return value


def build(
    name: str,
    size: str = "tiny",
    *,
    seed: int = 0,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
) -> ZooCase:
    """Build zoo model ``name`` at ``size`` ("tiny" or "real") with random weights.

    Weights and inputs are generated on the CPU from ``seed`` (so they are identical for a
    given seed whatever the device) and then moved to ``device``/``dtype``. The global RNG
    state is saved and restored, so building has no side effect on other random streams.
    """
    families = {**_FAMILIES, **{n: module for n, (module, _) in _OPTIONAL_FAMILIES.items()}}
    if name not in families:
        raise UnknownCaseError(f"unknown zoo model {name!r}; valid names: {', '.join(names())}")
    if size not in SIZES:
        raise UnknownCaseError(f"unknown size {size!r}; valid sizes: {', '.join(SIZES)}")
    module = importlib.import_module(f"{__package__}.{families[name]}")
    device = torch.device(device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        parts: CaseParts = module.make(size)
    model = parts.model.to(device=device, dtype=dtype)
    return ZooCase(
        name=name,
        size=size,
        model=model,
        example_inputs=_move(parts.inputs, device, dtype),
        example_kwargs=_move(parts.kwargs, device, dtype),
        loss_fn=parts.loss_fn,
        targets=_move(parts.targets, device, dtype),
        unused_parameters=parts.unused_parameters,
    )


def training_loss(case: ZooCase, fn: Callable[..., Any] | None = None) -> torch.Tensor:
    """Run the forward (through ``fn``, default the eager model) and return the scalar loss.

    The result is ready for ``.backward()``; pass a compiled version of ``case.model`` as
    ``fn`` to train through a compiler with the same inputs and loss.
    """
    return case.loss(case.run(fn))


def output_tensors(output: Any) -> list[torch.Tensor]:
    """Flatten a model output (tensor, tuple/list, dict or HF ``ModelOutput``) to its tensors.

    Order is deterministic (insertion order for mappings), so two outputs of the same
    model can be compared pairwise.
    """
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, Mapping):
        values: Any = output.values()
    elif isinstance(output, (tuple, list)):
        values = output
    else:
        return []
    return [t for v in values for t in output_tensors(v)]
