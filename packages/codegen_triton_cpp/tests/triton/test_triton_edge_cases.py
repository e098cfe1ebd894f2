"""Edge cases of the Triton target: int64 index arithmetic, empty and 0-dim tensors,
regressions the C++ target met, typed errors."""

import pytest
import torch

from ember_codegen import CodegenError, compile_graph
from ember_primops import prims


def test_int64_index_arithmetic_when_sizes_do_not_fit_int32(check, monkeypatch):
    # buffers over 2**31 elements do not fit a CI machine: force the int64 path instead
    from ember_codegen.triton import kernel

    monkeypatch.setattr(kernel, "fits_int32_for_every_size", lambda env, *bounds: False)
    x = torch.randn(6, 40)

    def f(a):
        t = prims.permute(a, [1, 0])
        return (prims.exp(t), prims.sum(a, [1]), prims.argmax(a, 1))

    compiled = check(f, x, atol=1e-5, rtol=1e-5)
    assert "tl.program_id(0).to(tl.int64)" in compiled.triton_source


def test_empty_and_zero_dim_tensors(check):
    check(lambda a: (prims.reshape(prims.exp(a), [0, 5]),), torch.randn(5, 0, 0))
    check(lambda a: (prims.sum(a, [0, 1]), prims.neg(prims.sum(a, [0, 1]))), torch.randn(3, 4))


def test_padded_rows_of_a_block_diagonal(check):
    def f(a, b, c):
        rows = [
            prims.pad(prims.reshape(a, [1, 1]), 0.0, [0, 0], [0, 5], [0, 0]),
            prims.pad(prims.reshape(b, [1, 2]), 0.0, [0, 1], [0, 3], [0, 0]),
            prims.pad(prims.reshape(c, [1, 3]), 0.0, [0, 3], [0, 0], [0, 0]),
        ]
        return (prims.cat(rows, 0),)

    check(f, torch.randn(1), torch.randn(2), torch.randn(3))


def test_storage_behind_a_fallback_view_is_not_reused(check):
    def f(x, y):
        u = prims.unfold(prims.exp(x), 0, 3, 3)
        v = prims.unfold(prims.sin(y), 0, 3, 3)
        return (prims.add(u, v),)

    check(f, torch.randn(3), torch.randn(3))


def test_wrong_inputs_raise_typed_errors(compile_prims):
    _, compiled = compile_prims(lambda a: (prims.exp(a),), torch.randn(4, 3))
    with pytest.raises(CodegenError, match="compiled for"):
        compiled([torch.randn(5, 3)])
    torch.testing.assert_close(compiled([torch.randn(3, 4).t()])[0].shape, torch.Size([4, 3]))


def test_unknown_options_and_targets_are_rejected(compile_prims):
    sched, _ = compile_prims(lambda a: (prims.exp(a),), torch.randn(2))
    with pytest.raises(CodegenError, match="unknown compile_graph target"):
        compile_graph(sched, target="tpu")
    with pytest.raises(CodegenError, match="unknown options"):
        compile_graph(sched, target="triton", autotuen=True)
    with pytest.raises(CodegenError, match="unknown mode"):
        compile_graph(sched, target="triton", mode="fastest")


def test_a_split_reduction_is_int32_where_its_chunks_fit(check, monkeypatch):
    # A split row's programs each loop over one chunk: positions reach NSPLIT * CHUNK, about
    # the row, not NSPLIT times it. With the int32 limit lowered between the two, a column
    # sum (channels-last batch-norm statistics) stays int32 and still matches eager.
    from ember_codegen.triton import symbolic

    rows, channels = 20000, 16
    monkeypatch.setattr(symbolic, "INT32_LIMIT", 4 * rows * channels)
    torch.manual_seed(0)
    x = torch.randn(rows, channels)
    compiled = check(lambda a: (prims.sum(a, [0]),), x, atol=1e-3, rtol=1e-4)
    assert "_partial" in compiled.triton_source, "expected a split reduction"
    assert "program_id(0).to(tl.int64)" not in compiled.triton_source
