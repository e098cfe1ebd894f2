"""Kernels generated twice in one module are defined once (shared_kernels.py): a repeated
layer's kernels become aliases of the first layer's, so that Triton builds each once; values
stay eager's."""

from __future__ import annotations

import torch

from ember_codegen.triton.cache import load_module
from ember_codegen.triton.compiled import _build_key
from ember_codegen.triton.shared_kernels import share_identical
from ember_primops import prims


def _layer(t, w):
    """A layer: a matmul (cuBLAS's: an extern between the layers' kernels), then a scaled
    softmax over the last dim."""
    s = prims.mul(prims.mm(t, w), torch.tensor(0.5))
    top = prims.expand_dims(prims.amax(s, [1]), [1])
    e = prims.exp(prims.sub(s, top))
    return prims.div(e, prims.expand_dims(prims.sum(e, [1]), [1]))


def _three_layers(x, w1, w2, w3):
    return _layer(_layer(_layer(x, w1), w2), w3)


def test_a_repeated_layer_is_built_once_and_matches_eager(check):
    torch.manual_seed(0)
    x, w1, w2, w3 = (torch.randn(6, 40) if i == 0 else torch.randn(40, 40) for i in range(4))
    compiled = check(_three_layers, x, w1, w2, w3, atol=1e-5, rtol=1e-4, matmul="aten")
    source = compiled.source
    kernels = [k for g in compiled.groups for k in g.kernels]
    defined = [k.name for k in kernels if f"\ndef {k.name}(" in source]
    assert len(kernels) == 3 and len(defined) == 1  # the first layer's softmax, twice aliased
    assert source.count("  # the same code") == 2
    # on a GPU, one build for the three (compile_parallel keys its builds so)
    module, _ = load_module(source)  # the compiled graph's own (imported once)
    groups = {k.name: g for g in compiled.groups for k in g.kernels}
    keys = {_build_key(module, groups[k.name], k, compiled.launch_layouts, {}) for k in kernels}
    assert len(keys) == 1


_KERNEL = """# {name}: loops [8] x reduce [40]: buf1(reduction)
@triton.jit
def {name}(ptr_{a}, ptr_{b}, XBLOCK: tl.constexpr):
    tmp0 = tl.load(ptr_{a} + xindex) * {scale}
    tl.store(ptr_{b} + xindex, tmp0)
"""


def test_only_kernels_equal_up_to_names_are_shared():
    first = _KERNEL.format(name="k1_poi_mul", a="buf0", b="buf1", scale="0.5")
    renamed = _KERNEL.format(name="k7_poi_mul", a="buf6", b="buf9", scale="0.5")
    other = _KERNEL.format(name="k9_poi_mul", a="buf6", b="buf9", scale="0.25")
    out, aliases = share_identical([first, renamed, other])
    assert aliases == {"k7_poi_mul": "k1_poi_mul"}
    assert out[0] == first and out[2] == other
    assert out[1] == "# k7_poi_mul: loops [8] x reduce [40]: buf1(reduction)\n" + (
        "k7_poi_mul = k1_poi_mul  # the same code"
    )


def test_swapped_parameters_are_not_the_same_code():
    first = _KERNEL.format(name="k1_poi_mul", a="buf0", b="buf1", scale="0.5")
    swapped = first.replace(
        "def k1_poi_mul(ptr_buf0, ptr_buf1", "def k2_poi_mul(ptr_buf1, ptr_buf0"
    )
    _, aliases = share_identical([first, swapped])
    assert aliases == {}


def test_a_combined_kernel_shares_each_of_its_functions():
    def combo(n: int, m: int) -> str:
        return (
            f"@triton.jit\ndef k{n}_part(pid, ptr_buf{n}, XBLOCK: tl.constexpr):\n"
            f"    tl.store(ptr_buf{n} + pid, 1.0)\n\n"
            f"@triton.jit\ndef k{m}_part(pid, ptr_buf{m}, XBLOCK: tl.constexpr):\n"
            f"    tl.store(ptr_buf{m} + pid, 2.0)\n\n"
            f"# one launch for k{n}, k{m}\n@triton.jit\n"
            f"def combo_k{n}_k{m}(ptr_buf{n}, ptr_buf{m}, XBLOCK: tl.constexpr):\n"
            f"    pid = tl.program_id(0)\n    if pid < 4:\n"
            f"        k{n}_part(pid, ptr_buf{n}, 256)\n    else:\n"
            f"        k{m}_part(pid - 4, ptr_buf{m}, 256)\n"
        )

    out, aliases = share_identical([combo(1, 2), combo(5, 6)])
    assert aliases == {"k5_part": "k1_part", "k6_part": "k2_part", "combo_k5_k6": "combo_k1_k2"}
    assert "def " not in out[1]
