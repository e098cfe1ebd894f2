"""Process state a backend compiles for is guarded on every frame (issue 26): deterministic
algorithms (the kernels a backend may pick) and cuBLAS TF32 (what generated float32 matmul
code rounds to, matmul_template.allow_tf32). Compiled under one setting, a call under
another compiles again; going back reuses the first entry."""

from __future__ import annotations

import contextlib

import torch

from conftest import Compiled, same


@contextlib.contextmanager
def _state(deterministic: bool, tf32: bool):
    before = (torch.are_deterministic_algorithms_enabled(), torch._C._get_cublas_allow_tf32())
    torch.use_deterministic_algorithms(deterministic)
    torch._C._set_cublas_allow_tf32(tf32)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0])
        torch._C._set_cublas_allow_tf32(before[1])


def test_each_setting_gets_its_own_compile():
    seen = []

    def fn(x):
        return x @ x.T + 1

    compiled = Compiled(fn)
    backend = compiled.backend

    def recording(gm, example_inputs):
        seen.append(
            (torch.are_deterministic_algorithms_enabled(), torch._C._get_cublas_allow_tf32())
        )
        return backend(gm, example_inputs)

    compiled.compiler.backend = recording
    x = torch.randn(3, 3)
    for setting in [(False, False), (True, False), (False, True), (False, False), (True, False)]:
        with _state(*setting):
            assert same(compiled(x), fn(x))
    assert seen == [(False, False), (True, False), (False, True)]
    assert backend.graph_count == 3
