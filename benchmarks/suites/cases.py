"""Builds a suite entry into a model, example inputs and a training loss (float32, random
weights, dropout off so that compiled and eager steps can be compared)."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from models import CPU_BATCH, HF_SEQ, HF_SMALL, Entry
from vision_import import import_timm, import_torchvision


class MissingLibrary(Exception):
    """The suite's library is not installed: the model is skipped with a note."""


class UnknownModel(Exception):
    """The installed library does not know this name: reported and skipped."""


@dataclass
class Case:
    model: torch.nn.Module
    kwargs: dict[str, Any]  # the forward's inputs (vision: {"x": images})
    train_kwargs: dict[str, Any]  # the inputs of a training forward (labels included)
    loss: Callable[[Any, dict[str, torch.Tensor]], torch.Tensor]  # (output, targets) -> loss
    optimizer: type[torch.optim.Optimizer]
    batch: int
    targets: dict[str, torch.Tensor]


def _no_dropout(model: torch.nn.Module) -> torch.nn.Module:
    for module in model.modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            module.p = 0.0
    return model


def first_tensor(output: Any) -> torch.Tensor:
    if isinstance(output, torch.Tensor):
        return output
    if hasattr(output, "logits"):
        return output.logits
    return output[0]


def _vision(model: torch.nn.Module, image: tuple[int, int, int], batch: int, classes: int) -> Case:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(batch, *image, generator=gen)
    target = torch.randint(0, classes, (batch,), generator=gen)

    return Case(_no_dropout(model), {"x": x}, {"x": x}, _cross_entropy, torch.optim.SGD, batch,
                {"target": target})  # fmt: skip


def _cross_entropy(output: Any, targets: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(first_tensor(output).float(), targets["target"])


def _hf_loss(output: Any, targets: dict[str, torch.Tensor]) -> torch.Tensor:
    return output.loss


def build_timm(entry: Entry, size: str) -> Case:
    try:
        timm = import_timm()
    except ImportError as exc:
        raise MissingLibrary(f"timm not installed ({exc})") from exc
    if not timm.is_model(entry.name):
        raise UnknownModel(f"timm {timm.__version__} has no model {entry.name}")
    torch.manual_seed(0)
    model = timm.create_model(entry.name, pretrained=False)
    image = tuple(model.pretrained_cfg.get("input_size", (3, 224, 224)))
    batch = entry.gpu_batch if size == "gpu" else CPU_BATCH
    return _vision(model, image, batch, model.num_classes)


def build_torchvision(entry: Entry, size: str) -> Case:
    try:
        torchvision = import_torchvision()
    except ImportError as exc:
        raise MissingLibrary(f"torchvision not installed ({exc})") from exc
    if entry.name not in torchvision.models.list_models(module=torchvision.models):
        raise UnknownModel(f"torchvision {torchvision.__version__} has no model {entry.name}")
    torch.manual_seed(0)
    model = torchvision.models.get_model(entry.name, weights=None)
    batch = entry.gpu_batch if size == "gpu" else CPU_BATCH
    return _vision(model, (3, 224, 224), batch, 1000)


def _config_kwargs(config_cls: type, wanted: dict[str, Any]) -> dict[str, Any]:
    """`wanted` keyed by the names the config's __init__ takes (directly or through its
    attribute_map); keys it takes neither way are dropped."""
    params = inspect.signature(config_cls.__init__).parameters
    aliases = getattr(config_cls, "attribute_map", {})
    out = {}
    for key, value in wanted.items():
        name = key if key in params else aliases.get(key)
        if name in params:
            out[name] = value
    return out


def _hf_labels(model_cls_name: str, ids: torch.Tensor, config: Any) -> torch.Tensor:
    if model_cls_name.endswith("ForSequenceClassification"):
        return torch.zeros(ids.shape[0], dtype=torch.long)
    if model_cls_name.endswith("ForPreTraining"):  # Electra: replaced-token labels
        return (ids % 2).long()
    return ids


def build_huggingface(entry: Entry, size: str) -> Case:
    # transformers imports torchvision where it is installed: through the shim first
    with contextlib.suppress(ImportError):
        import_torchvision()
    try:
        import transformers
    except ImportError as exc:
        raise MissingLibrary(f"transformers not installed ({exc})") from exc
    model_cls = getattr(transformers, entry.name, None)
    if model_cls is None:
        raise UnknownModel(f"transformers {transformers.__version__} has no {entry.name}")
    config_cls = model_cls.config_class
    wanted = dict(entry.config)
    if size != "gpu":
        wanted = {**HF_SMALL, **entry.small}
    config = config_cls(**_config_kwargs(config_cls, wanted))
    if getattr(config, "pad_token_id", 0) is None:  # sequence classifiers need one at batch > 1
        config.pad_token_id = 0
    for key, value in vars(config).items():  # dropout off: steps are compared with eager
        # (layerdrop too: a layer skipped when a random draw says so gives its weights no
        # gradient, and the draws of two compilers differ)
        if ("dropout" in key or "layerdrop" in key) and isinstance(value, float):
            setattr(config, key, 0.0)
    torch.manual_seed(0)
    model = _no_dropout(model_cls(config))
    batch = entry.gpu_batch if size == "gpu" else CPU_BATCH
    gen = torch.Generator().manual_seed(0)
    seq = entry.seq if size == "gpu" and entry.seq else HF_SEQ[size]
    ids = torch.randint(0, min(config.vocab_size, 30000), (batch, seq), generator=gen)
    kwargs: dict[str, Any] = {"input_ids": ids}
    if getattr(config, "is_encoder_decoder", False):
        kwargs["decoder_input_ids"] = ids
    labels = _hf_labels(entry.name, ids, config)
    return Case(model, kwargs, {**kwargs, "labels": labels}, _hf_loss, torch.optim.AdamW, batch,
                {})  # fmt: skip


BUILDERS: dict[str, Callable[[Entry, str], Case]] = {
    "timm": build_timm,
    "torchvision": build_torchvision,
    "huggingface": build_huggingface,
}


def to_device(case: Case, device: str) -> Case:
    case.model.to(device)
    for name in ("kwargs", "train_kwargs", "targets"):
        moved = {k: v.to(device) for k, v in getattr(case, name).items()}
        setattr(case, name, moved)
    return case
