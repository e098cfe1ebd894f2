"""The C++ tensor check (native_tensor.py) answers as the Python TENSOR_MATCH does.

Every spec below is checked against every tensor below (and a few non-tensors), through the
generated Python guard and through a GuardProgram whose tensor matches are CHECK_NATIVE.
Needs the check built (`python -m ember_bytecode_tracer.guards.native_tensor`).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from ember_bytecode_tracer.guards import (
    Guard,
    GuardKind,
    LocalSource,
    TensorSpec,
    compile_guards,
    native,
    native_tensor,
)

needs_build = pytest.mark.skipif(
    native_tensor.capsule() is None,
    reason="the C++ tensor check is not built (python -m ember_bytecode_tracer.guards.native_tensor)",
)


class Sub(torch.Tensor):
    pass


def tensors() -> list[Any]:
    base = torch.randn(4, 6)
    return [
        base,
        torch.randn(4, 6, dtype=torch.float64),
        torch.randn(4, 6).requires_grad_(),
        torch.nn.Parameter(torch.randn(4, 6)),
        base.t(),
        base[:, ::2],
        base.expand(3, 4, 6),
        torch.randn(1, 6),
        torch.randn(0, 6),
        torch.randn(4, 1),
        torch.randn(9, 6),
        torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
        torch.randn(2, 3, 4, 5),
        torch.randn(4, 6, dtype=torch.complex64),
        torch.randn(4, 6, dtype=torch.complex64).conj(),
        torch.randn(4, 6, dtype=torch.complex64)._neg_view(),
        torch.randn(4, 6, device="meta"),
        torch.randn(4, 6).to_sparse(),
        base.as_subclass(Sub),
        torch.randn(2, 3, 4, 5, 6, 7),  # more dims than fit inline
        torch.tensor(3.0),
        3.0,
        None,
    ]


def specs() -> list[TensorSpec]:
    out = []
    for t in tensors():
        if not isinstance(t, torch.Tensor):
            continue
        spec = TensorSpec.of(t)
        out.append(spec)
        if spec.ndim and spec.strides is not None:
            out.append(spec.with_dynamic([0]))
            out.append(spec.with_dynamic(range(spec.ndim)))
    return out


@pytest.fixture(autouse=True)
def native_mode_on() -> Any:
    old = native.set_native_mode("1")
    yield
    native.set_native_mode(old)


def compiled_for(spec: TensorSpec) -> Any:
    return compile_guards([Guard(LocalSource("x"), GuardKind.TENSOR_MATCH, spec)], {})


@needs_build
def test_eligible_specs_use_the_native_check() -> None:
    ops = [op for op, *_ in compiled_for(TensorSpec.of(torch.randn(2))).native.instructions]
    assert "CHECK_NATIVE" in ops and "CHECK_DIMS" not in ops
    sub = [op for op, *_ in compiled_for(TensorSpec.of(Sub(torch.randn(2)))).native.instructions]
    assert "CHECK_NATIVE" not in sub  # other classes: attribute reads


@needs_build
def test_every_spec_against_every_tensor() -> None:
    values = tensors()
    passed = 0
    for spec in specs():
        compiled = compiled_for(spec)
        for value in values:
            expected = compiled.check({"x": value})
            assert compiled.native({"x": value}) is bool(expected), (spec, value)
            passed += bool(expected)
    assert passed > len(values)  # each tensor at least matches its own spec


@needs_build
def test_torch_function_modes_see_the_same_reads() -> None:
    class Counting(torch.overrides.TorchFunctionMode):
        calls = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            Counting.calls += 1
            return func(*args, **(kwargs or {}))

    t = torch.randn(4, 6)
    compiled = compiled_for(TensorSpec.of(t))
    counts = []
    for check in (compiled.check, compiled.native):
        Counting.calls = 0
        with Counting():
            assert check({"x": t})
        counts.append(Counting.calls)
    assert counts[0] == counts[1] > 0


def test_a_broken_build_is_not_used(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "tensor_check"
    folder.mkdir()
    (folder / "ember_tensor_check.so").write_bytes(b"not a shared object")
    monkeypatch.setattr(native_tensor, "cache_dir", lambda: folder)
    monkeypatch.setattr(native_tensor, "_loaded", {})
    assert native_tensor.capsule() is None
    ops = [op for op, *_ in compiled_for(TensorSpec.of(torch.randn(2))).native.instructions]
    assert "CHECK_DIMS" in ops
