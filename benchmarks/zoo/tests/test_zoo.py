"""Tests for the ember_zoo registry and every model at the "tiny" size."""

from __future__ import annotations

import os

# Models are built from configs; make sure nothing tries to reach the Hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest
import torch

import ember_zoo
from ember_zoo import ZooCase

ALL = ember_zoo.names()
CUSTOM = ["mlp", "cnn", "transformer_block", "rnn"]
HF = ["bert", "gpt2", "t5", "llama"]

# Unique parameter counts, as documented in README.md: (tiny, real).
PARAM_COUNTS = {
    "mlp": (6_922, 15_688_680),
    "cnn": (1_586, 414_596),
    "transformer_block": (12_704, 7_087_872),
    "rnn": (5_064, 1_314_048),
    "bert": (38_944, 109_514_298),
    "gpt2": (62_336, 124_439_808),
    "t5": (45_696, 60_506_624),
    "llama": (26_784, 124_668_672),
}


def _count(case: ZooCase) -> int:
    return sum(p.numel() for p in case.model.parameters())


def _tensors(case: ZooCase) -> list[torch.Tensor]:
    return ember_zoo.output_tensors(
        (case.example_inputs, case.example_kwargs, case.targets, case.model.state_dict())
    )


def test_names() -> None:
    assert ALL == CUSTOM + HF
    assert len(set(ALL)) == len(ALL)


def test_unknown_name_raises_value_error_listing_names() -> None:
    with pytest.raises(ValueError, match="valid names: mlp, cnn") as info:
        ember_zoo.build("resnet9000")
    for name in ALL:
        assert name in str(info.value)


def test_unknown_size_raises_value_error() -> None:
    with pytest.raises(ValueError, match="valid sizes: tiny, real"):
        ember_zoo.build("mlp", "huge")


def test_build_preserves_global_rng() -> None:
    torch.manual_seed(123)
    expected = torch.rand(4)
    torch.manual_seed(123)
    ember_zoo.build("mlp", seed=7)
    assert torch.equal(torch.rand(4), expected)


def test_dtype_applies_to_floating_tensors_only() -> None:
    case = ember_zoo.build("mlp", dtype=torch.float64)
    assert all(p.dtype == torch.float64 for p in case.model.parameters())
    assert case.example_inputs[0].dtype == torch.float64
    assert case.targets[0].dtype == torch.long  # class labels keep their dtype
    assert case.loss(case.run()).dtype == torch.float64


def test_seed_changes_weights_and_inputs() -> None:
    a, b = ember_zoo.build("mlp", seed=0), ember_zoo.build("mlp", seed=1)
    assert not torch.equal(a.example_inputs[0], b.example_inputs[0])
    assert not torch.equal(a.model.head.weight, b.model.head.weight)


@pytest.mark.parametrize("name", ALL)
def test_build_is_deterministic(name: str) -> None:
    a, b = ember_zoo.build(name, seed=0), ember_zoo.build(name, seed=0)
    assert (a.name, a.size) == (name, "tiny")
    assert _count(a) == PARAM_COUNTS[name][0]
    assert a.model.training  # documented: built in train mode, dropout disabled
    ta, tb = _tensors(a), _tensors(b)
    assert len(ta) == len(tb) > 0
    for x, y in zip(ta, tb, strict=True):
        assert x.dtype == y.dtype and torch.equal(x, y)


@pytest.mark.parametrize("name", ALL)
def test_forward_loss_backward(name: str) -> None:
    case = ember_zoo.build(name)
    loss = ember_zoo.training_loss(case)
    assert loss.dim() == 0 and loss.is_floating_point()
    assert torch.isfinite(loss)
    loss.backward()

    trainable = {n for n, p in case.model.named_parameters() if p.requires_grad}
    with_grad = set()
    for n, p in case.model.named_parameters():
        if p.grad is not None:
            assert torch.isfinite(p.grad).all(), f"non-finite gradient for {n}"
            with_grad.add(n)
    assert case.unused_parameters <= trainable
    assert len(with_grad) > 0
    assert with_grad == trainable - case.unused_parameters


@pytest.mark.parametrize("name", ALL)
def test_eager_is_deterministic(name: str) -> None:
    case = ember_zoo.build(name)
    with torch.no_grad():
        first = ember_zoo.output_tensors(case.run())
        second = ember_zoo.output_tensors(case.run())
    assert len(first) == len(second) > 0
    for x, y in zip(first, second, strict=True):
        assert torch.equal(x, y)
    assert torch.equal(ember_zoo.training_loss(case), ember_zoo.training_loss(case))


@pytest.mark.parametrize("name", CUSTOM)
def test_real_size_builds(name: str) -> None:
    assert _count(ember_zoo.build(name, "real")) == PARAM_COUNTS[name][1]


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL)
def test_real_size_forward(name: str) -> None:
    case = ember_zoo.build(name, "real")
    assert _count(case) == PARAM_COUNTS[name][1]
    with torch.no_grad():
        assert torch.isfinite(case.loss(case.run()))
