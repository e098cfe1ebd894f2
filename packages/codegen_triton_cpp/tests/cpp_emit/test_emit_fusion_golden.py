"""Fusion is real (kernel counts), the generated code of canonical graphs is kept as golden
files (EMBER_UPDATE_GOLDEN=1 rewrites them), and EMBER_LOGS=output_code shows the code."""

import logging
import os
from pathlib import Path

import pytest
from canonical_graphs import GOLDEN, layer_norm, pointwise_chain, softmax

GOLDEN_DIR = Path(__file__).parent.parent / "golden"


@pytest.mark.parametrize(
    ("fn", "shapes"),
    [
        (pointwise_chain, [(8, 16), (8, 16)]),
        (softmax(8, 32), [(8, 32)]),
        (softmax(4, 100000), [(4, 100000)]),  # split reduction: still one kernel
        (layer_norm(16, 64), [(16, 64), (64,), (64,)]),
    ],
    ids=["10-op chain", "softmax", "softmax-split", "layernorm"],
)
def test_one_kernel(check, fn, shapes):
    import torch

    _, compiled = check(fn, *[torch.randn(*s) for s in shapes], atol=1e-5, rtol=1e-4)
    assert compiled.kernel_count == 1
    assert compiled.cpp_source.count("EMBER_KERNEL") == 1


def _golden_text(compiled) -> str:
    return (
        "// ===== C++ =====\n"
        + compiled.cpp_source
        + "\n# ===== wrapper =====\n"
        + compiled.wrapper_source
    )


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden(check, name):
    fn, make_inputs = GOLDEN[name]
    _, compiled = check(fn, *make_inputs(), atol=1e-5, rtol=1e-4)
    path = GOLDEN_DIR / f"{name}.txt"
    text = _golden_text(compiled)
    if os.environ.get("EMBER_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"no golden file {path}; run with EMBER_UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(), (
        f"generated code for {name} changed; inspect the diff and, if intended, rerun with "
        "EMBER_UPDATE_GOLDEN=1"
    )


def test_output_code_log_shows_kernels_and_wrapper(compile_prims, caplog):
    import torch

    with caplog.at_level(logging.INFO, logger="ember.output_code"):
        compile_prims(softmax(4, 12), torch.randn(4, 12))
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "ember.output_code")
    assert "EMBER_KERNEL void k0_red_max_sum_" in text  # named by kind and ops
    assert "def call(args):" in text
