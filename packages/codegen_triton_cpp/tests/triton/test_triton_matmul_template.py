"""The Triton matmul template (mm / addmm / bmm) with its epilogue fused, under the CPU
interpreter: numerics against eager with the template forced (matmul="template"), that the
template really ran and took the epilogue group with it, the max-autotune choice and its
on-disk decision, and the whole pipeline through ember.compile(mode="max-autotune")."""

from __future__ import annotations

import json
import logging

import pytest
import torch
from triton_helpers import compile_triton_fn

from ember_codegen.exc import CodegenError
from ember_codegen.triton import template_choice
from ember_primops import prims

FORCE = {"matmul": "template"}
HALF_TOL = {torch.float16: (2e-2, 1e-2), torch.bfloat16: (8e-2, 2e-2)}


def _gelu(y):
    half = prims.mul(y, torch.tensor(0.5))
    inner = prims.add(prims.erf(prims.mul(y, torch.tensor(0.7071067811865476))), torch.tensor(1.0))
    return prims.mul(half, inner)


def _template_ran(compiled, fused: bool) -> None:
    assert len(compiled.templates) == 1
    template = compiled.templates[0]
    assert "# ember matmul template" in compiled.triton_source
    assert f"_k_{template.name}[" in compiled.wrapper_source
    assert "_r = _mm_out(" not in compiled.wrapper_source  # aten's mm is not called
    assert (template.epilogue_group is not None) == fused
    if fused:
        assert f"_k_{template.epilogue_group}[" not in compiled.wrapper_source


def test_mm_alone_runs_as_the_template(check):
    a, b = torch.randn(24, 40), torch.randn(40, 36)
    compiled = check(lambda a, b: (prims.mm(a, b),), a, b, atol=1e-4, rtol=1e-4, **FORCE)
    _template_ran(compiled, fused=False)
    assert compiled.kernel_count == 1


def test_mm_plus_bias_plus_gelu_fuses_into_one_kernel(check):
    def f(a, b, bias):
        return (_gelu(prims.add(prims.mm(a, b), prims.broadcast_in_dim(bias, [40, 24], [1]))),)

    inputs = torch.randn(40, 20), torch.randn(20, 24), torch.randn(24)
    aten = check(f, *inputs, atol=1e-4, rtol=1e-4, matmul="aten")
    template = check(f, *inputs, atol=1e-4, rtol=1e-4, **FORCE)
    _template_ran(template, fused=True)
    assert not aten.templates and "_r = _mm_out(" in aten.wrapper_source
    assert template.kernel_count == aten.kernel_count == 1  # the extern is gone as well


def test_mm_relu_residual_with_sizes_off_the_blocks(check):
    def f(x, w, residual):
        y = prims.mm(x, w)
        return (prims.add(prims.maximum(y, torch.tensor(0.0)), residual),)

    compiled = check(f, torch.randn(37, 19), torch.randn(19, 45), torch.randn(37, 45),
                     atol=1e-4, rtol=1e-4, **FORCE)  # fmt: skip
    _template_ran(compiled, fused=True)


def test_transposed_operands_are_read_through_their_strides(check):
    def f(x, w):  # x.T @ w.T, both views
        return (prims.mm(prims.permute(x, [1, 0]), prims.permute(w, [1, 0])),)

    compiled = check(f, torch.randn(20, 33), torch.randn(17, 20), atol=1e-4, rtol=1e-4, **FORCE)
    _template_ran(compiled, fused=False)


def test_strided_and_offset_input(check):
    def f(x, w):
        return (prims.mul(prims.mm(x, w), torch.tensor(2.0)),)

    x = torch.randn(30, 50)[2:, 5:37]  # offset storage, row stride 50
    compiled = check(f, x, torch.randn(32, 16), atol=1e-4, rtol=1e-4, **FORCE)
    _template_ran(compiled, fused=True)


def test_addmm_prim_adds_the_bias_in_the_accumulator(check):
    def f(bias, a, b):
        return (prims.addmm(bias, a, b),)

    compiled = check(f, torch.randn(24), torch.randn(18, 32), torch.randn(32, 24),
                     atol=1e-4, rtol=1e-4, **FORCE)  # fmt: skip
    _template_ran(compiled, fused=False)


def test_addmm_left_to_the_library_goes_through_torchs_binding(check):
    """Without a template, addmm is torch's binding (parsed in C++), as mm and bmm are, not
    the prim's implementation behind a boxed aten call: a few microseconds of host time for
    each of a transformer's linear layers."""

    def f(bias, a, b):
        return (prims.addmm(bias, a, b),)

    compiled = check(f, torch.randn(24), torch.randn(18, 32), torch.randn(32, 24),
                     atol=1e-5, rtol=1e-5)  # fmt: skip
    assert "_r = _addmm_out(arg0, arg1, arg2)" in compiled.wrapper_source
    assert "_prim_impl" not in compiled.wrapper_source


def test_bmm_grids_over_the_batch_and_fuses_its_epilogue(check):
    def f(a, b, bias):
        y = prims.bmm(a, b)
        return (prims.tanh(prims.add(y, prims.broadcast_in_dim(bias, [3, 20, 18], [2]))),)

    compiled = check(f, torch.randn(3, 20, 24), torch.randn(3, 24, 18), torch.randn(18),
                     atol=1e-4, rtol=1e-4, **FORCE)  # fmt: skip
    _template_ran(compiled, fused=True)
    assert compiled.templates[0].grid()[1] == 3


def test_bmm_with_broadcast_batch_operand(check):
    def f(a, w):  # w expanded over the batch (stride 0)
        return (prims.bmm(a, prims.broadcast_in_dim(w, [2, 16, 20], [1, 2])),)

    compiled = check(f, torch.randn(2, 24, 16), torch.randn(16, 20), atol=1e-4, rtol=1e-4,
                     **FORCE)  # fmt: skip
    _template_ran(compiled, fused=False)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_reduced_float_inputs_accumulate_in_float32(check, dtype):
    def f(a, b, bias):
        y = prims.add(prims.mm(a, b), prims.broadcast_in_dim(bias, [33, 48], [1]))
        return (prims.maximum(y, torch.tensor(0.0, dtype=dtype)),)

    a, b = torch.randn(33, 40, dtype=dtype), torch.randn(40, 48, dtype=dtype)
    atol, rtol = HALF_TOL[dtype]
    compiled = check(f, a, b, torch.randn(48, dtype=dtype), atol=atol, rtol=rtol, **FORCE)
    _template_ran(compiled, fused=True)


def test_epilogue_casting_to_another_dtype(check):
    def f(a, b):
        return (prims.convert_element_type(prims.mm(a, b), torch.float16),)

    compiled = check(f, torch.randn(16, 24), torch.randn(24, 40), atol=1e-3, rtol=1e-3, **FORCE)
    _template_ran(compiled, fused=True)


def test_output_read_elsewhere_is_stored_too(check):
    def f(a, b):
        y = prims.mm(a, b)
        return (prims.exp(y), y)  # the product is a graph output as well

    compiled = check(f, torch.randn(20, 16), torch.randn(16, 24), atol=1e-4, rtol=1e-4, **FORCE)
    _template_ran(compiled, fused=True)
    assert compiled.templates[0].store_out


def test_output_read_by_a_later_reduction_is_stored_too(check):
    def f(a, b):
        y = prims.mm(a, b)
        z = prims.mul(y, torch.tensor(3.0))
        return (prims.sum(prims.add(z, y), [1]),)

    compiled = check(f, torch.randn(20, 16), torch.randn(16, 24), atol=1e-4, rtol=1e-4, **FORCE)
    assert len(compiled.templates) == 1


def test_two_products_meeting_in_one_epilogue(check):
    def f(a, b, c, d):
        return (prims.sigmoid(prims.add(prims.mm(a, b), prims.mm(c, d))),)

    inputs = torch.randn(20, 16), torch.randn(16, 24), torch.randn(20, 8), torch.randn(8, 24)
    compiled = check(f, *inputs, atol=1e-4, rtol=1e-4, **FORCE)
    fused = [t for t in compiled.templates if t.epilogue_group is not None]
    assert len(compiled.templates) == 2 and len(fused) == 1
    assert "_r = _mm_out(" not in compiled.wrapper_source


def test_transposed_output_layout_still_fuses(check):
    def f(a, b):  # the consumer's output is laid out along the product: elementwise
        return (prims.mul(prims.permute(prims.mm(a, b), [1, 0]), torch.tensor(2.0)),)

    compiled = check(f, torch.randn(20, 16), torch.randn(16, 24), atol=1e-4, rtol=1e-4, **FORCE)
    _template_ran(compiled, fused=True)


def test_consumer_reading_another_point_is_not_fused(check):
    def f(a, b):  # y + y.T reads the product at (i, j) and (j, i)
        y = prims.mm(a, b)
        return (prims.add(y, prims.permute(y, [1, 0])),)

    compiled = check(f, torch.randn(24, 16), torch.randn(16, 24), atol=1e-4, rtol=1e-4, **FORCE)
    _template_ran(compiled, fused=False)
    assert compiled.kernel_count == 2


def test_reduction_consumer_is_not_fused(check):
    def f(a, b):
        return (prims.sum(prims.mm(a, b), [1]),)

    compiled = check(f, torch.randn(20, 16), torch.randn(16, 24), atol=1e-4, rtol=1e-4, **FORCE)
    _template_ran(compiled, fused=False)
    assert compiled.kernel_count == 2


def test_integer_matmul_stays_with_aten(check):
    def f(a, b):
        return (prims.mm(a, b),)

    a, b = torch.randint(-5, 5, (8, 8)), torch.randint(-5, 5, (8, 8))
    compiled = check(f, a, b, **FORCE)
    assert not compiled.templates


def test_default_mode_never_uses_the_template(check, monkeypatch):
    monkeypatch.delenv("EMBER_TRITON_MATMUL", raising=False)
    compiled = check(lambda a, b: (prims.mm(a, b),), torch.randn(16, 16), torch.randn(16, 16))
    assert not compiled.templates and "# ember matmul template" not in compiled.triton_source


def test_environment_switch_and_a_bad_policy(check, monkeypatch):
    monkeypatch.setenv("EMBER_TRITON_MATMUL", "template")
    compiled = check(lambda a, b: (prims.mm(a, b),), torch.randn(16, 16), torch.randn(16, 16))
    assert len(compiled.templates) == 1
    monkeypatch.setenv("EMBER_TRITON_MATMUL", "cublas")
    with pytest.raises(CodegenError, match="EMBER_TRITON_MATMUL"):
        compile_triton_fn(lambda a, b: (prims.mm(a, b),), torch.randn(4, 4), torch.randn(4, 4))


def _decisions(root) -> list:
    return sorted((root / "triton" / "autotune").glob("*.matmul.json"))


def test_autotune_benchmarks_caches_and_reuses_the_decision(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("EMBER_TRITON_MATMUL", raising=False)

    def f(a, b, bias):
        return (_gelu(prims.add(prims.mm(a, b), prims.broadcast_in_dim(bias, [32, 32], [1]))),)

    inputs = [torch.randn(32, 32), torch.randn(32, 32), torch.randn(32)]
    want = f(*inputs)[0]
    with caplog.at_level(logging.INFO, logger="ember.autotune"):
        _, first = compile_triton_fn(f, *inputs, autotune=True)
    (decision,) = _decisions(tmp_path)
    entry = json.loads(decision.read_text())
    assert entry["key"] == decision.name.removesuffix(".matmul.json")
    assert entry["choice"] in ("template", "aten") and entry["aten_ms"] > 0
    assert len(entry["template_ms"]) >= 1
    assert any("wins (aten + epilogue" in r.getMessage() for r in caplog.records)
    assert bool(first.templates) == (entry["choice"] == "template")
    torch.testing.assert_close(first(inputs)[0], want, atol=1e-4, rtol=1e-4)

    def no_benchmark(*args, **kwargs):
        raise AssertionError("benchmarked although the decision is cached")

    monkeypatch.setattr(template_choice, "time_ms", no_benchmark)
    entry["choice"] = "template"  # a GPU's verdict: the second compile follows the file
    decision.write_text(json.dumps(entry))
    _, second = compile_triton_fn(f, *inputs, autotune=True)
    assert _decisions(tmp_path) == [decision]
    _template_ran(second, fused=True)
    torch.testing.assert_close(second(inputs)[0], want, atol=1e-4, rtol=1e-4)

    # another key's decision copied under this name: ignored, benchmarked again
    decision.write_text(json.dumps({**entry, "key": "0" * 64}))
    monkeypatch.setattr(template_choice, "time_ms", lambda run, device: 1.0)
    _, third = compile_triton_fn(f, *inputs, autotune=True)
    assert json.loads(decision.read_text())["key"] == entry["key"]
    torch.testing.assert_close(third(inputs)[0], want, atol=1e-4, rtol=1e-4)


def test_storage_freed_after_the_extern_is_not_reused_before_the_template(check):
    # u dies at the first mm; the plan gives its storage to z, which the template writes
    # while later programs still read u: the template keeps u alive and z gets fresh storage
    def f(x, w, w2):
        u = prims.mul(x, torch.tensor(2.0))
        z = prims.maximum(prims.mm(u, w), torch.tensor(0.0))
        return (prims.mm(z, w2),)

    inputs = torch.randn(24, 48), torch.randn(48, 48), torch.randn(48, 16)
    sched, _ = compile_triton_fn(f, *inputs, matmul="aten")
    assert any(a.reuses is not None for a in sched.allocations.values())
    compiled = check(f, *inputs, atol=1e-4, rtol=1e-4, **FORCE)
    assert len(compiled.templates) == 2
    assert "; del buf0" not in compiled.wrapper_source
    assert "del buf0" in compiled.wrapper_source  # freed once the template ran


class _MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(24, 48)
        self.fc2 = torch.nn.Linear(48, 16)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(x))) + x[:, :16]


def _wrappers(root) -> list[str]:
    return [p.read_text() for p in (root / "triton" / "kernels").rglob("*.wrapper.py")]


def test_mlp_training_step_through_ember_compile_max_autotune(monkeypatch, tmp_path):
    ember = pytest.importorskip("ember")
    monkeypatch.setenv("EMBER_INDUCTOR_TARGET", "triton")
    monkeypatch.setenv("EMBER_ARTIFACT_CACHE", "0")
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("EMBER_TRITON_MATMUL", "template")
    ember.reset()
    torch.manual_seed(0)
    model, x = _MLP(), torch.randn(20, 24)
    compiled = ember.compile(model, mode="max-autotune")
    got, want = compiled(x), model(x)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    got.square().sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    want.square().sum().backward()
    for g, p in zip(grads, model.parameters(), strict=True):
        torch.testing.assert_close(g, p.grad, atol=1e-4, rtol=1e-4)
    forward, backward = sorted(_wrappers(tmp_path), key=lambda w: "arg4" in w, reverse=True)
    # forward: both linears are templates with bias+gelu / bias+residual fused, no extern
    assert forward.count("# matmul template") == 2 and "_extern" not in forward
    assert backward.count("# matmul template") == 3 and "_extern" not in backward


def test_mlp_default_mode_keeps_aten(monkeypatch, tmp_path):
    ember = pytest.importorskip("ember")
    monkeypatch.setenv("EMBER_INDUCTOR_TARGET", "triton")
    monkeypatch.setenv("EMBER_ARTIFACT_CACHE", "0")
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("EMBER_TRITON_MATMUL", raising=False)
    ember.reset()
    model, x = _MLP(), torch.randn(20, 24)
    with torch.no_grad():
        torch.testing.assert_close(ember.compile(model)(x), model(x), atol=1e-5, rtol=1e-5)
    (wrapper,) = _wrappers(tmp_path)
    assert "# matmul template" not in wrapper and wrapper.count("_r = _mm_out(") == 2
