"""Transposing pointwise kernels through the Triton target (interpreter): [XBLOCK, RBLOCK]
tiles where one access steps 1 in another loop variable than the innermost (tiles.py)."""

import torch
from triton_helpers import compile_triton_fn

from ember_codegen.triton.heuristics import LaunchConfig
from ember_codegen.triton.tiles import transposed_var
from ember_primops import prims


def _gated(a, b, bias):
    # gMLP's gate: a half of `a` times a transposed `b` plus a per-row bias
    u = prims.slice(a, [0, 0, 0], [4, 196, 96], [1, 1, 1])
    v = prims.permute(b, [0, 2, 1])
    return (prims.mul(u, prims.add(v, prims.broadcast_in_dim(bias, [4, 196, 96], [1]))),)


def _inputs():
    return torch.randn(4, 196, 192), torch.randn(4, 96, 196), torch.randn(196)


def test_transposed_read_runs_over_two_dimensional_tiles(check):
    compiled = check(_gated, *_inputs())
    (kernel,) = compiled.kernels
    assert kernel.kind == "tiled" and kernel.rnumel == 196
    assert "rindex = (tile %" in kernel.code
    # 384 x-points (4 x 96) by 196 transposed points: 6 x 4 tiles of 64 x 64
    assert kernel.grid() == (6 * 4,)


def test_tiles_of_every_candidate_shape_match_eager():
    a, b, bias = _inputs()
    (expected,) = _gated(a, b, bias)
    _sched, compiled = compile_triton_fn(_gated, a, b, bias)
    (kernel,) = compiled.kernels
    for config in ((32, 32, 4), (128, 32, 4), (16, 128, 2)):
        kernel.config = LaunchConfig(*config)
        (out,) = compiled([a, b, bias])
        torch.testing.assert_close(out, expected)


def test_contiguous_pointwise_and_small_transposes_stay_one_dimensional(check):
    compiled = check(lambda a: (prims.exp(prims.add(a, a)),), torch.randn(64, 2048))
    assert compiled.kernels[0].kind == "pointwise" and compiled.kernels[0].rnumel is None
    # a transpose of 4 points along the other grain is too short for a tile
    compiled = check(lambda a: (prims.neg(prims.permute(a, [1, 0])),), torch.randn(4, 16384))
    assert compiled.kernels[0].kind == "pointwise"


def test_transposed_var_names_the_variable_the_transposed_access_steps_one_in():
    a, b, bias = _inputs()
    sched, _ = compile_triton_fn(_gated, a, b, bias)
    (group,) = [g for g in sched if not g.is_extern]
    assert transposed_var(group) == 1  # loops [4, 196, 96]: b is contiguous along the 196
