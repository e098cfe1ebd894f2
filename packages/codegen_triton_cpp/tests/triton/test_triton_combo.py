"""Combined launches (combo.py): small independent pointwise kernels run as one Triton
kernel whose programs are split among them, launched once; values bit-for-bit those of
separate launches, and the kernel counted as one launch."""

from __future__ import annotations

import json

import torch

from ember_codegen.artifact import from_payload, to_payload
from ember_codegen.triton.combo import combined_kernel
from ember_codegen.triton.heuristics import LaunchConfig
from ember_codegen.triton.kernel import TritonKernel
from ember_codegen.triton.target import TRITON_TARGET
from ember_inductor_ir import CombinePolicy
from ember_primops import prims


def _update(t):
    return prims.add(prims.mul(t, prims.sin(t)), prims.exp(prims.neg(t)))


def _updates(a, b, c, d, e, f, g):
    """One pointwise update per tensor, of various sizes: an optimizer step's shape."""
    return tuple(_update(t) for t in (a, b, c, d, e, f, g))


def _inputs():
    torch.manual_seed(0)
    shapes = [(5, 3), (5,), (300,), (17, 11), (1,), (2, 3, 4), (1030,)]
    return [torch.randn(s) for s in shapes]


def test_independent_pointwise_groups_share_one_launch(check, compile_prims):
    inputs = _inputs()
    compiled = check(_updates, *inputs)
    sched, _ = compile_prims(_updates, *inputs)
    loops = [g for g in sched if g.extern is None]
    assert len(loops) == len(inputs)  # one group a tensor...
    assert compiled.kernel_count == 1  # ...and one launch for all of them
    assert compiled.combined_kernels == len(inputs)
    assert "pid - " in compiled.triton_source and "_part(pid" in compiled.triton_source
    assert compiled.wrapper_source.count("_k_") == 1


def test_values_are_bit_for_bit_those_of_separate_launches(compile_prims, monkeypatch):
    inputs = _inputs()
    _, combined = compile_prims(_updates, *inputs)
    monkeypatch.setenv("EMBER_TRITON_COMBINE", "0")
    _, alone = compile_prims(_updates, *inputs)
    assert alone.kernel_count == len(inputs) and alone.combined_kernels == 0
    for got, want in zip(combined(list(inputs)), alone(list(inputs)), strict=True):
        assert torch.equal(got, want)


def test_the_policy_is_the_targets_data():
    policy = TRITON_TARGET.combine
    assert isinstance(policy, CombinePolicy)
    assert policy.max_kernels > 1 and policy.max_args >= 8 * policy.max_kernels  # AdamW's 8


def test_large_kernels_and_reductions_launch_alone(check):
    def fn(a, b, c, d):
        return (prims.exp(a), prims.neg(b), prims.sum(c, [1]), prims.sin(d))

    limit = TRITON_TARGET.combine.max_numel
    big = torch.randn(limit + 1)  # more points than the policy combines
    compiled = check(fn, torch.randn(7), big, torch.randn(4, 12), torch.randn(9))
    # the big one and the reduction alone; the two small ones, each reading only an input,
    # gather over them (scheduler's gather_input_reads) into one launch
    assert compiled.kernel_count == 3 and compiled.combined_kernels == 2


def test_a_combined_kernel_hands_each_part_its_programs():
    def part(name, params, xnumel, xblock):
        code = (
            f"@triton.jit\ndef {name}({', '.join('ptr_' + p for p in params)}, "
            "XBLOCK: tl.constexpr):\n    xoffset = tl.program_id(0) * XBLOCK\n"
        )
        return TritonKernel(name, code, params, "pointwise", xnumel, False, LaunchConfig(xblock))

    parts = [part("kernel3", ["a", "b"], 100, 64), part("kernel4", ["a", "c"], 5, 8)]
    combo = combined_kernel("combo_kernel3_kernel4", parts)
    assert combo.params == ["a", "b", "c"]  # a buffer both read is one argument
    assert combo.xnumel == 2 + 1 and combo.kind == "combo"
    assert "if pid < 2:\n        kernel3_part(pid, ptr_a, ptr_b, 64)" in combo.code
    assert "else:\n        kernel4_part(pid - 2, ptr_a, ptr_c, 8)" in combo.code
    assert "def kernel3_part(pid, ptr_a, ptr_b, XBLOCK" in combo.code
    assert "xoffset = pid * XBLOCK" in combo.code


def test_a_combined_launch_round_trips_through_the_artifact(compile_prims, tmp_path):
    inputs = _inputs()
    _, compiled = compile_prims(_updates, *inputs)
    kept: list = []

    def encode(value: object) -> list:
        kept.append(value)
        return ["ref", len(kept) - 1]

    payload = json.loads(json.dumps(to_payload(compiled, encode)))
    rebuilt = from_payload(payload, lambda data: kept[data[1]], str(tmp_path / "wrapper.py"))
    assert rebuilt.kernel_count == 1 and rebuilt.combined_kernels == len(inputs)
    for got, want in zip(rebuilt(list(inputs)), compiled(list(inputs)), strict=True):
        assert torch.equal(got, want)


def test_a_combined_kernel_takes_the_direct_launch_path(compile_prims):
    from test_triton_launch import _wrapped  # the recording binaries of launch.py's tests

    inputs = _inputs()
    sched, compiled = compile_prims(_updates, *inputs)
    call, source, binaries = _wrapped(compiled, sched, raw=True)
    assert source.count("_launch_combo_") == 1 and "_k_kernel" not in source
    for got, want in zip(call(list(inputs)), _updates(*inputs), strict=True):
        torch.testing.assert_close(got, want)
    (binary,) = binaries.values()
    assert binary.raw_calls == 1  # one launch for the seven kernels
